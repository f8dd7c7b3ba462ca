"""An independent GBNF recogniser (llama.cpp's grammar syntax) for the tests:
a grammar read by a small recursive-descent parser of its own into a plain
context-free grammar, and texts checked by an Earley parser over code
points, so it shares nothing with smallmind's compiler or matcher.

    g = Grammar(text)
    g.accepts("...")        # a whole sentence of rule "root"
    g.viable_prefix("...")  # some sentence starts with it
"""


class GrammarError(ValueError):
    pass


class Grammar:
    def __init__(self, text):
        self.rules = {}      # name -> list of alternatives; an alternative is a list of symbols
        self.n_synth = 0
        self.src, self.i = text, 0
        self._parse()
        if "root" not in self.rules:
            raise GrammarError("no root rule")
        for alts in self.rules.values():
            for alt in alts:
                for sym in alt:
                    if isinstance(sym, str) and sym not in self.rules:
                        raise GrammarError(f"undefined rule {sym}")
        self._nullable()

    # ---- reading the text: a symbol is a rule name (str) or a character set (tuple)

    def _peek(self):
        return self.src[self.i] if self.i < len(self.src) else ""

    def _space(self, newlines):
        while self.i < len(self.src):
            c = self.src[self.i]
            if c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            elif c == "#":
                while self.i < len(self.src) and self.src[self.i] not in "\r\n":
                    self.i += 1
            else:
                break

    def _name(self):
        j = self.i
        while self.i < len(self.src) and (self.src[self.i].isalnum() or self.src[self.i] in "-_"):
            self.i += 1
        if j == self.i:
            raise GrammarError(f"name expected at {self.i}")
        return self.src[j:self.i]

    def _char(self):
        c = self._peek()
        if c == "":
            raise GrammarError("unexpected end")
        if c != "\\":
            self.i += 1
            return ord(c)
        e = self.src[self.i + 1]
        self.i += 2
        if e in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[e]
            v = int(self.src[self.i:self.i + n], 16)
            self.i += n
            return v
        table = {"t": 9, "r": 13, "n": 10, "\\": 92, '"': 34, "[": 91, "]": 93, "-": 45}
        if e not in table:
            raise GrammarError(f"bad escape \\{e}")
        return table[e]

    def _synth(self, alts):
        self.n_synth += 1
        name = f"\0{self.n_synth}"  # no rule of the text can have this name
        self.rules[name] = alts
        return name

    def _repeat(self, item, lo, hi):
        """item{lo,hi} (hi None: unbounded) as symbols."""
        out = [item] * lo
        if hi is None:
            star = self._synth([])
            self.rules[star] += [[item, star], []]
            out.append(star)
        else:
            nxt = None
            for _ in range(hi - lo):
                opt = self._synth([[item] + ([nxt] if nxt else []), []])
                nxt = opt
            if nxt:
                out.append(nxt)
        return out

    def _sequence(self, nested):
        seq = []
        while True:
            c = self._peek()
            if c == '"':
                self.i += 1
                chars = []
                while self._peek() != '"':
                    chars.append(self._char())
                self.i += 1
                item = [((ch, ch),) for ch in chars]
                item = item[0] if len(item) == 1 else self._synth([item])
            elif c == "[":
                self.i += 1
                neg = self._peek() == "^"
                if neg:
                    self.i += 1
                ranges = []
                while self._peek() != "]":
                    lo = self._char()
                    hi = lo
                    if self._peek() == "-" and self.src[self.i + 1] != "]":
                        self.i += 1
                        hi = self._char()
                    ranges.append((lo, hi))
                self.i += 1
                item = (("^",) + tuple(ranges)) if neg else tuple(ranges)
            elif c == ".":
                self.i += 1
                item = ((0, 0x10FFFF),)
            elif c == "(":
                self.i += 1
                self._space(True)
                item = self._synth(self._alternates(True))
                if self._peek() != ")":
                    raise GrammarError(") expected")
                self.i += 1
            elif c and (c.isalnum() or c in "-_"):
                item = self._name()
            else:
                return seq
            self._space(nested)
            q = self._peek()
            if q in ("*", "+", "?"):
                self.i += 1
                self._space(nested)
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[q]
                seq += self._repeat(item, lo, hi)
            elif q == "{":
                j = self.src.index("}", self.i)
                body = self.src[self.i + 1:j].replace(" ", "")
                self.i = j + 1
                self._space(nested)
                if "," in body:
                    a, b = body.split(",")
                    lo, hi = int(a or 0), (int(b) if b else None)
                else:
                    lo = hi = int(body)
                seq += self._repeat(item, lo, hi)
            else:
                seq.append(item)

    def _alternates(self, nested):
        alts = [self._sequence(nested)]
        while self._peek() == "|":
            self.i += 1
            self._space(True)
            alts.append(self._sequence(nested))
        return alts

    def _parse(self):
        self._space(True)
        while self.i < len(self.src):
            name = self._name()
            self._space(False)
            if not self.src.startswith("::=", self.i):
                raise GrammarError(f"::= expected at {self.i}")
            self.i += 3
            self._space(True)
            self.rules[name] = self._alternates(False)
            self._space(True)

    def _nullable(self):
        self.null = set()
        changed = True
        while changed:
            changed = False
            for n, alts in self.rules.items():
                if n not in self.null and any(all(isinstance(s, str) and s in self.null for s in a) for a in alts):
                    self.null.add(n)
                    changed = True

    @staticmethod
    def _match(sym, cp):
        neg = sym and sym[0] == "^"
        hit = any(lo <= cp <= hi for lo, hi in (sym[1:] if neg else sym))
        return hit != neg

    # ---- Earley: an item is (rule, alternative index, dot, origin)

    def _chart(self, text):
        cps = [ord(c) for c in text]
        sets = [set() for _ in range(len(cps) + 1)]
        waits = [{} for _ in range(len(cps) + 1)]  # per set: rule -> the items whose dot is before it

        def add(i, item):
            if item in sets[i]:
                return False
            sets[i].add(item)
            alt = self.rules[item[0]][item[1]]
            if item[2] < len(alt) and isinstance(alt[item[2]], str):
                waits[i].setdefault(alt[item[2]], []).append(item)
            return True

        for k, _ in enumerate(self.rules["root"]):
            add(0, ("root", k, 0, 0))
        for i in range(len(cps) + 1):
            work = list(sets[i])
            while work:
                item = work.pop()
                rule, k, dot, org = item
                alt = self.rules[rule][k]
                if dot == len(alt):  # complete: advance what waited for this rule at org
                    for wr, wk, wd, wo in list(waits[org].get(rule, ())):
                        nw = (wr, wk, wd + 1, wo)
                        if add(i, nw):
                            work.append(nw)
                    continue
                sym = alt[dot]
                if isinstance(sym, str):  # predict (and step over a nullable rule at once)
                    for k2, _ in enumerate(self.rules[sym]):
                        nw = (sym, k2, 0, i)
                        if add(i, nw):
                            work.append(nw)
                    if sym in self.null:
                        nw = (rule, k, dot + 1, org)
                        if add(i, nw):
                            work.append(nw)
                elif i < len(cps) and self._match(sym, cps[i]):
                    add(i + 1, (rule, k, dot + 1, org))
            if i < len(cps) and not sets[i + 1]:
                return sets, i + 1  # dead at i + 1
        return sets, None

    def accepts(self, text):
        sets, dead = self._chart(text)
        if dead is not None:
            return False
        return any(r == "root" and d == len(self.rules[r][k]) and o == 0 for r, k, d, o in sets[-1])

    def viable_prefix(self, text):
        _, dead = self._chart(text)
        return dead is None
