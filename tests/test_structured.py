#!/usr/bin/python3
"""Structured output (issue 37): grammars and JSON schemas the sampled text
cannot break, checked by independent validators on random-weight models
whose unconstrained output is noise.

- The engine: every token's mask, at every step of random walks, equals
  that token checked on its own (grammar_tool masks), for llama.cpp's
  grammars and schemas, on the GPT-2, Llama 2 (SentencePiece), Llama 3,
  Qwen 2.5 and Gemma 3 vocabularies.
- llama.cpp's grammars (json, json_arr, list, arithmetic, c, chess, english,
  japanese: build/npm/llama-grammars, or LLAMA_CPP's checkout): every output,
  greedy and sampled, is a viable prefix for an independent GBNF recogniser
  (tests/gbnf_ref.py, an Earley parser), and a whole sentence where it says
  "valid" (then also for llama.cpp's own validator when LLAMA_CPP is set).
- A suite of JSON Schemas: every output that says "valid" passes Python's
  jsonschema (with format checks); bounded schemas always finish; one cut by
  -n says finish_reason "length" and "valid": false.
- The same through generate, generate --chat, chat, and OpenAI's
  response_format in --batch; a batch record equals its prompt alone.
- Bad grammars and schemas: one line naming the rule or keyword and where.

    test_structured.py --bin build --shared ../shared --models build/test-models
"""
import argparse
import datetime
import ipaddress
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tally import Tally  # noqa: E402

TALLY = Tally("structured")
report, skip = TALLY.report, TALLY.skip
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA_GRAMMARS = ["json", "json_arr", "list", "arithmetic", "c", "chess", "english", "japanese"]

# (schema, bounded): a bounded schema's texts have a bounded length, so they always finish
SCHEMAS = [
    ({"type": "string", "maxLength": 8}, True),
    ({"type": "string", "minLength": 3, "maxLength": 5}, True),
    ({"type": "integer"}, True),
    ({"type": "integer", "minimum": 0, "maximum": 9}, True),
    ({"type": "integer", "minimum": -120, "maximum": 35}, True),
    ({"type": "integer", "minimum": 1000}, True),
    ({"type": "integer", "exclusiveMinimum": -5, "exclusiveMaximum": 5}, True),
    ({"type": "integer", "maximum": -7}, True),
    ({"type": "integer", "multipleOf": 7, "minimum": -100, "maximum": 1000}, True),
    ({"type": "object", "properties": {"minutes": {"type": "number", "multipleOf": 15, "minimum": 0}},
      "required": ["minutes"]}, True),
    ({"type": "number"}, True),
    ({"type": "boolean"}, True),
    ({"type": "null"}, True),
    ({"type": ["string", "null"], "maxLength": 4}, True),
    ({"enum": ["red", "green", 3, None, {"a": [1, 2]}]}, True),
    ({"const": {"kind": "fixed", "n": 2}}, True),
    ({"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                       "age": {"type": "integer", "minimum": 0, "maximum": 150}},
      "required": ["name", "age"]}, True),
    ({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "integer", "maximum": 99, "minimum": 0},
                                       "c": {"enum": ["x", "y"]}}, "required": ["b"]}, True),
    ({"type": "object", "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 5}},
      "required": ["id"], "additionalProperties": {"type": "boolean"}}, False),
    ({"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 3}},
      "additionalProperties": False}, True),
    ({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 2, "maxItems": 4}, True),
    ({"type": "array", "items": {"type": "boolean"}, "maxItems": 3}, True),
    ({"type": "array", "prefixItems": [{"type": "string", "maxLength": 3}, {"type": "integer", "minimum": 0,
                                                                           "maximum": 9}], "items": False}, True),
    ({"type": "array", "prefixItems": [{"const": "head"}], "items": {"type": "null"}, "maxItems": 3}, True),
    ({"type": "object", "properties": {"inner": {"type": "object", "properties": {
        "deep": {"type": "array", "items": {"enum": [1, 2, 3]}, "maxItems": 2}}, "required": ["deep"]}},
        "required": ["inner"]}, True),
    ({"anyOf": [{"type": "integer", "minimum": 0, "maximum": 5}, {"type": "string", "maxLength": 3},
                {"type": "null"}]}, True),
    ({"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}, "v": {"type": "boolean"}},
                 "required": ["kind", "v"]},
                {"type": "object", "properties": {"kind": {"const": "b"}, "w": {"type": "null"}},
                 "required": ["kind", "w"]}]}, True),
    ({"$defs": {"pt": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 9},
                                                        "y": {"type": "integer", "minimum": 0, "maximum": 9}},
                       "required": ["x", "y"]}},
      "type": "array", "items": {"$ref": "#/$defs/pt"}, "maxItems": 2}, True),
    ({"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer", "minimum": 0, "maximum": 9},
        "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}},
      "$ref": "#/$defs/node"}, False),
    ({"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}, True),
    ({"type": "string", "pattern": "^(cat|dog)s?\\.?$"}, True),
    ({"type": "string", "pattern": "^\\d{1,3}(\\.\\d{1,2})?$"}, True),
    ({"type": "string", "format": "date"}, True),
    ({"type": "string", "format": "time"}, True),
    ({"type": "string", "format": "date-time"}, True),
    ({"type": "string", "format": "uuid"}, True),
    ({"type": "string", "format": "ipv4"}, True),
    ({"type": "string", "format": "ipv6"}, True),
    ({"type": "string", "format": "duration"}, False),
    ({"type": "object", "properties": {"url": {"type": "string", "format": "uri"}}, "required": ["url"]}, False),
    ({"type": "object", "properties": {"host": {"type": "string", "format": "hostname"},
                                       "mail": {"type": "string", "format": "email"}}, "required": ["host", "mail"]},
     False),
    ({"type": "object", "properties": {"when": {"type": "string", "format": "date"},
                                       "tags": {"type": "array", "items": {"type": "string", "maxLength": 4},
                                                "minItems": 1, "maxItems": 2}},
      "required": ["when", "tags"], "title": "an event", "description": "annotations are ignored"}, True),
    ({"type": "number", "minimum": -2.5, "maximum": 7.25}, True),
    ({"type": "object", "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1},
                                       "delta": {"type": ["number", "null"], "exclusiveMinimum": -0.001,
                                                 "exclusiveMaximum": 0.001}},
      "required": ["score", "delta"]}, True),
    ({"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 99}},
                         "required": ["id"]}},
      "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"tag": {"enum": ["a", "b"]}}, "required": ["tag"]}]}, True),
    ({"allOf": [{"type": "string"}, {"maxLength": 6}], "description": "a constraint split over branches"}, True),
    ({"$defs": {"n": {"type": "number", "minimum": 0}}, "$ref": "#/$defs/n", "maximum": 10}, True),
    ({"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}, False),
    ({"type": "array", "items": {"type": "number"}}, False),
]

BAD_SCHEMAS = [
    ({"type": "number", "multipleOf": 0.01}, "'multipleOf' 0.01 is not supported: only whole numbers"),
    ({"type": "integer", "multipleOf": 0}, "'multipleOf' must be a number above 0"),
    ({"type": "integer", "multipleOf": "2"}, "'multipleOf' must be a number above 0"),
    ({"type": "integer", "multipleOf": 2e9}, "'multipleOf' above 1000000000 is not supported"),
    ({"type": "integer", "multipleOf": 997}, "'multipleOf' 997 makes too large a grammar"),
    ({"type": "integer", "multipleOf": 13, "minimum": 14, "maximum": 25}, "no multiple of 13 is within"),
    ({"type": "array", "uniqueItems": True}, "the keyword 'uniqueItems' is not supported"),
    ({"type": "array", "minItems": 3, "maxItems": 2}, "'maxItems' 2 is below 'minItems' 3"),
    ({"type": "string", "minLength": 5, "maxLength": 2}, "'maxLength' 2 is below 'minLength' 5"),
    ({"type": "integer", "minimum": 5, "maximum": 4}, "no integer is within"),
    ({"type": "number", "exclusiveMinimum": 1.5, "exclusiveMaximum": 1.5}, "no number of at most 16"),
    ({"type": "number", "minimum": 1e20}, "no number of at most 16"),
    ({"type": "number", "minimum": 1e-20, "maximum": 2e-20}, "no number of at most 16"),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["b"]}, "'required' names \"b\""),
    ({"type": "strin"}, "'type' must be"),
    ({"enum": []}, "'enum' must be a non-empty array"),
    ({"$ref": "#/$defs/missing"}, "names nothing"),
    ({"type": "string", "pattern": "^(?=a)b$"}, "lookarounds"),
    ({"type": "string", "format": "json-pointer"}, "\"json-pointer\" is not supported"),
    ({"properties": {"a": {"type": "object", "properties": {"b": {"uniqueItems": True}}}}},
     "#/properties/a/properties/b"),
    (False, "nothing is valid"),
    ({"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"a": {"type": "string"}}}]},
     "the property \"a\" two different schemas"),
    ({"allOf": [{"properties": {"a": {"type": "integer"}}, "additionalProperties": False},
                {"properties": {"b": {"type": "integer"}}}]}, "does not declare \"b\""),
    ({"allOf": [{"type": "integer"}, {"type": "string"}]}, "'allOf' gives 'type' two different values"),
    ({"properties": {"x": {"allOf": [True, False]}}}, "#/properties/x"),
    ({"$defs": {"a": {"$ref": "#/$defs/a", "type": "object"}}, "$ref": "#/$defs/a"}, "nested more than"),
]

BAD_GRAMMARS = [
    ('root ::= a\na ::= a "x" | "y"\n', "rule 'a' is left-recursive"),
    ('root ::= x\n', "rule 'x' is not defined"),
    ('root ::= ("a"?)*\n', "left-recursive"),
    ('root ::= "a\n', "grammar line"),
    ('root = "a"\n', "expecting '::='"),
    ('root ::= [a-\n', "grammar line 1"),
    ('root ::= "a"{5,2}\n', "n < m"),
    ('rot ::= "a"\n', "no rule named 'root'"),
    ('root ::= "\\q"\n', "unknown escape"),
]


def loads(data):
    return [json.loads(x) for x in data.decode().splitlines() if x.strip()]


def jsonschema_checker():
    try:
        import jsonschema
    except ImportError:
        return None
    fc = jsonschema.FormatChecker()

    @fc.checks("date-time", raises=ValueError)
    def _dt(s):  # RFC 3339: the date, "T", the time with an offset
        if not isinstance(s, str):
            return True
        d, _, t = s.partition("T")
        datetime.date.fromisoformat(d)
        return _time(t)

    @fc.checks("time", raises=ValueError)
    def _time(s):
        if not isinstance(s, str):
            return True
        if not (s.endswith("Z") or s[-6] in "+-"):
            raise ValueError("no offset")
        datetime.time.fromisoformat(s)
        return True

    @fc.checks("date", raises=ValueError)
    def _date(s):
        if isinstance(s, str):
            if len(s) != 10:
                raise ValueError("not YYYY-MM-DD")
            datetime.date.fromisoformat(s)
        return True

    @fc.checks("ipv6", raises=ValueError)
    def _ipv6(s):  # the standard library's parser
        if isinstance(s, str):
            ipaddress.IPv6Address(s)
        return True

    label = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")

    @fc.checks("hostname", raises=ValueError)
    def _host(s):  # RFC 1123: dot-separated labels of 1-63 letters, digits, inner hyphens; 253 bytes at most
        if isinstance(s, str) and (len(s) > 253 or not all(label.fullmatch(x) for x in s.split("."))):
            raise ValueError("not a hostname")
        return True

    @fc.checks("email", raises=ValueError)
    def _email(s):  # RFC 5322's dot-atom local part (64 bytes at most) "@" an RFC 1123 hostname
        if isinstance(s, str):
            local, at, domain = s.rpartition("@")
            if not at or len(local) > 64 or not re.fullmatch(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
                                                             r"(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*", local):
                raise ValueError("not a local part")
            _host(domain)
        return True

    @fc.checks("uri", raises=ValueError)
    def _uri(s):  # RFC 3986: a scheme, ":", then unreserved, reserved and percent-encoded characters
        if isinstance(s, str):
            scheme = urllib.parse.urlsplit(s).scheme
            rest = s[len(scheme) + 1:]
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme) or s[len(scheme)] != ":" or \
                    not re.fullmatch(r"([A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*", rest):
                raise ValueError("not a URI")
        return True

    @fc.checks("duration", raises=ValueError)
    def _duration(s):  # RFC 3339 appendix A
        t = r"T(\d+H(\d+M(\d+S)?)?|\d+M(\d+S)?|\d+S)"
        if isinstance(s, str) and not re.fullmatch(rf"P((\d+Y(\d+M(\d+D)?)?|\d+M(\d+D)?|\d+D)({t})?|{t}|\d+W)", s):
            raise ValueError("not a duration")
        return True

    def check(schema, value):
        try:
            jsonschema.Draft202012Validator(schema, format_checker=fc).validate(value)
            return None
        except jsonschema.ValidationError as e:
            return e.message[:120]
    return check


def batch(sm, model, flags, records, *extra):
    p = subprocess.run([sm, "generate", "-m", model, *flags, "--batch", "-", "-q", *extra],
                       input="".join(json.dumps(r) + "\n" for r in records).encode(), capture_output=True)
    return p.returncode, loads(p.stdout), p.stderr.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--models", required=True)
    a = ap.parse_args()
    sm = os.path.join(a.bin, "smallmind")
    tool = os.path.join(a.bin, "grammar_tool")
    shared_models = os.path.join(a.shared, "models")
    lc = os.environ.get("LLAMA_CPP")
    gdir = os.path.join(ROOT, "build", "npm", "llama-grammars")
    if not os.path.exists(os.path.join(gdir, "json.gbnf")) and lc:
        gdir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(lc))), "grammars")
    have_grammars = all(os.path.exists(os.path.join(gdir, g + ".gbnf")) for g in LLAMA_GRAMMARS)
    try:
        import numpy  # noqa: F401
        from vocab_models import vocab_models
        models = vocab_models(shared_models, a.models)
    except ImportError:
        models = {"gpt2": (os.path.join(shared_models, "tiny-gpt2"), [])}
        skip("the Llama 2, Llama 3, Qwen 2.5 and Gemma 3 vocabularies", "NumPy is not installed")
    check = jsonschema_checker()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gbnf_ref

    with tempfile.TemporaryDirectory() as tmp:
        engine(tool, models, gdir if have_grammars else None, tmp)
        if have_grammars:
            # make asan: two vocabularies (the matcher's paths; every vocabulary in make test)
            gm = {k: v for k, v in models.items() if k in ("gpt2", "llama2")} if os.environ.get("SM_SANITIZED") \
                else models
            llama_grammars(sm, gm, gdir, gbnf_ref, lc, tmp)
        else:
            skip("llama.cpp's grammars", "not fetched (npm unreachable) and LLAMA_CPP not set")
        if check:
            schemas(sm, models, check, tmp)
        else:
            skip("JSON schemas against jsonschema", "python3-jsonschema is not installed")
        forced(sm, models, gbnf_ref)
        if check:
            number_bounds(tool, check, gbnf_ref, tmp)
            multiples(tool, check, gbnf_ref, tmp)
            merged_schemas(tool, check, tmp)
        else:
            skip("numbers within bounds, multipleOf and merged allOf against jsonschema", "python3-jsonschema is not installed")
        bad_inputs(sm, tool, tmp)
        commands(sm, a.models, check, tmp)
    return TALLY.close()


def engine(tool, models, gdir, tmp):
    """Masks equal to each token checked alone, on every vocabulary."""
    s1 = os.path.join(tmp, "engine-schema.json")
    with open(s1, "w") as f:
        json.dump(SCHEMAS[14][0], f)
    for name, (path, flags) in models.items():
        if flags:  # llama.cpp's tokenizer.bin beside a directory: grammar_tool reads tokenizer.json only
            continue
        runs = [("-s", s1, 30)] + ([("-g", os.path.join(gdir, g + ".gbnf"), 20) for g in ("json", "japanese", "c")]
                                   if gdir else [])
        bad = []
        for flag, f, steps in runs:
            p = subprocess.run([tool, "masks", flag, f, path, str(steps), "7"], capture_output=True)
            if p.returncode != 0:
                bad.append((os.path.basename(f), p.stdout.decode()[-300:]))
        report(not bad, f"{name}: every token's mask = the token checked alone, {len(runs)} grammars", str(bad)[:400])


def llama_grammars(sm, models, gdir, gbnf_ref, lc, tmp):
    texts = {g: open(os.path.join(gdir, g + ".gbnf"), encoding="utf-8").read() for g in LLAMA_GRAMMARS}
    refs = {g: gbnf_ref.Grammar(t) for g, t in texts.items()}
    validator = os.path.join(lc, "test-gbnf-validator") if lc else None
    if validator and not os.path.exists(validator):
        validator = None
    for name, (path, flags) in models.items():
        recs = []
        for g in LLAMA_GRAMMARS:
            recs.append({"id": f"{g}-greedy", "prompt": "Write:", "grammar": texts[g], "temperature": 0})
            recs.append({"id": f"{g}-s", "prompt": "Write:", "grammar": texts[g], "temperature": 1.0, "seed": 3})
        rc, out, err = batch(sm, path, flags, recs, "-n", "96")
        bad, complete = [], 0
        for r in out:
            g = r["id"].rsplit("-", 1)[0]
            if "error" in r:
                bad.append((r["id"], r["error"]))
                continue
            text = r["text"]
            if r["finish_reason"] == "length":
                text = text.rstrip("\ufffd")  # a character the cut split (JSON writes its bytes as U+FFFD)
            if r["valid"]:
                complete += 1
                if not refs[g].accepts(text):
                    bad.append((r["id"], "valid, but not a sentence", text[:80]))
                elif validator:
                    gf, tf = os.path.join(tmp, "g.gbnf"), os.path.join(tmp, "t.txt")
                    with open(gf, "w") as f:
                        f.write(texts[g])
                    with open(tf, "w") as f:
                        f.write(text)
                    v = subprocess.run([validator, gf, tf], capture_output=True)
                    if v.returncode != 0:
                        bad.append((r["id"], "llama.cpp's validator refuses it", text[:80]))
            elif not refs[g].viable_prefix(text) or r["finish_reason"] != "length":
                bad.append((r["id"], "not a prefix of a sentence, or not valid without being cut", text[:80]))
        report(rc == 0 and len(out) == len(recs) and not bad,
               f"{name}: llama.cpp's 8 grammars, greedy and sampled: viable prefixes, {complete} whole sentences"
               f"{' (and llama.cpp validator)' if validator else ''}", (str(bad) + err)[:400])


FORCED_GBNF = ('root ::= "{\\"description\\": \\"" [a-z ]{2,12} "\\", \\"the long and winding key\\": " '
               '("true" | "false") ", \\"another key, also long\\": [" [0-9]{1,3} "]}"\n')


def forced(sm, models, gbnf_ref):
    """Tokens the grammar forces go through one call (--stats counts them): the texts stay
    sentences of the grammar for an independent recogniser, on every vocabulary, and a batch
    record (forced runs prefilled in the scheduler) equals its prompt alone."""
    ref = gbnf_ref.Grammar(FORCED_GBNF)
    for name, (path, flags) in models.items():
        recs = [{"id": f"{i}", "prompt": f"Item {i}:", "grammar": FORCED_GBNF, "temperature": t, "seed": i}
                for i, t in enumerate([0, 1.0, 0.8])]
        rc, out, err = batch(sm, path, flags, recs, "-n", "120", "--parallel", "2")
        bad, n_forced = [], []
        for r, q in zip(recs, out):
            p = subprocess.run([sm, "generate", "-m", path, *flags, "-p", r["prompt"], "--grammar-text", FORCED_GBNF,
                                "-n", "120", "--temp", str(r["temperature"]), "-s", str(r["seed"]), "--json",
                                "--stats"], capture_output=True)
            alone = json.loads(p.stdout or b"{}")
            m = [ln for ln in p.stderr.decode().splitlines() if "tokens forced" in ln]
            k = int(m[0].split("; ")[-1].split()[0]) if m else 0
            n_forced.append(k)
            if p.returncode != 0 or not alone.get("valid") or not ref.accepts(alone.get("text", "")):
                bad.append((r["id"], "alone: not a whole sentence", alone.get("text", "")[:80]))
            elif k < 10:
                bad.append((r["id"], f"only {k} tokens forced"))
            elif alone["text"] != q.get("text"):
                bad.append((r["id"], "batch differs from alone", alone["text"][:60], q.get("text", "")[:60]))
        report(rc == 0 and len(out) == len(recs) and not bad,
               f"{name}: forced tokens fed in one call ({n_forced} forced): sentences, batch = alone",
               (str(bad) + err)[:400])


def schemas(sm, models, check, tmp):
    for name, (path, flags) in models.items():
        recs = []
        for i, (s, _) in enumerate(SCHEMAS):
            recs.append({"id": f"{i}-g", "prompt": "Answer in JSON:", "json_schema": s, "temperature": 0})
            recs.append({"id": f"{i}-s", "prompt": "Answer in JSON:", "json_schema": s, "temperature": 1.0,
                         "seed": i + 1})
        rc, out, err = batch(sm, path, flags, recs, "-n", "200")
        bad, complete, cut = [], 0, 0
        for r in out:
            i = int(r["id"].split("-")[0])
            schema, bounded = SCHEMAS[i]
            if "error" in r:
                bad.append((r["id"], r["error"]))
                continue
            if r["finish_reason"] == "length" or not r["valid"]:
                cut += 1
                if r["valid"] or r["finish_reason"] != "length" or bounded:
                    bad.append((r["id"], "cut, but bounded or not said", r["finish_reason"], r["valid"]))
                continue
            complete += 1
            try:
                value = json.loads(r["text"])
            except ValueError as e:
                bad.append((r["id"], f"not JSON: {e}", r["text"][:80]))
                continue
            why = check(schema, value)
            if why:
                bad.append((r["id"], why, r["text"][:80]))
        report(rc == 0 and len(out) == 2 * len(SCHEMAS) and not bad,
               f"{name}: {len(SCHEMAS)} schemas, greedy and sampled: {complete} outputs valid under jsonschema, "
               f"{cut} cut by -n and said so", (str(bad) + err)[:500])


NUMBER_BOUNDS = [  # the bound keywords of a number schema; more are drawn at random
    {"minimum": 1.5, "maximum": 2.5}, {"exclusiveMinimum": 0}, {"minimum": -0.25, "exclusiveMaximum": 0.1},
    {"minimum": 0, "maximum": 1}, {"exclusiveMinimum": -1, "exclusiveMaximum": 1}, {"maximum": -3.75},
    {"minimum": 1e-5}, {"minimum": 0.1, "maximum": 0.1}, {"exclusiveMinimum": 1, "maximum": 1.0000000000000002},
    {"minimum": -1e300, "maximum": 3}, {"maximum": 0, "exclusiveMaximum": 0},
    {"minimum": 999999999999999.5}, {"exclusiveMaximum": -0.0}, {"minimum": -7, "exclusiveMinimum": -7.5},
    {"minimum": 123.456, "maximum": 124}, {"minimum": -0.3, "maximum": -0.2999},
]
NUMBER_TEXT = re.compile(r"-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?")


def number_candidates(bounds, rng):
    """Texts around and between a schema's bounds: each bound's digits, nudged at every decimal place, random
    decimals in and out of the range, signs and zeros."""
    vals = [float(v) for k, v in bounds.items() if not isinstance(v, bool)]
    out = {"0", "-0", "0.0", "-0.0", "1", "-1", "0.5", "-0.5", "10", "1e2", "0.1e1"}
    for v in vals:
        out.add(repr(v).replace("e+", "e"))
        for d in range(0, 18):
            for sgn in (1, -1):
                x = v + sgn * 10.0 ** -d
                out.add(f"{x:.{d}f}")
                out.add(f"{x:.{min(d + 3, 16)}f}")
        out.add(f"{v:.16f}")
    lo, hi = (min(vals) - 2, max(vals) + 2) if vals else (-5, 5)
    for _ in range(40):
        x = rng.uniform(lo, hi) if abs(hi - lo) < 1e12 else rng.uniform(-1e6, 1e6)
        out.add(f"{x:.{rng.randrange(0, 12)}f}")
    return sorted(t for t in out if len(t) < 40)


def verdicts(tool, schema_path, texts, tmp, tag):
    """grammar_tool accepts over texts (each written to a file): "1" or "0" per text, or None with why."""
    files = []
    for i, t in enumerate(texts):
        files.append(os.path.join(tmp, f"{tag}-{i}.txt"))
        with open(files[-1], "w") as f:
            f.write(t)
    p = subprocess.run([tool, "accepts", "-s", schema_path] + files, capture_output=True, text=True)
    mine = p.stdout.split()
    return (mine, "") if len(mine) == len(texts) else (None, p.stdout[-200:] + p.stderr[-200:])


def judged(g, check, schema, label, t, m, bad):
    """One text: the Earley parser's verdict (which the matcher's, m, must equal) and jsonschema's; an
    accepted text jsonschema refuses is a failure. (accepted, valid)."""
    ref = g.accepts(t)
    if (m == "1") != ref:
        bad.append((label, t, "matcher and Earley parser differ", m, ref))
    valid = check(schema, json.loads(t)) is None
    if ref and not valid:
        bad.append((label, t, "accepted, invalid"))
    return ref, valid


def number_bounds(tool, check, gbnf_ref, tmp):
    """Numbers with minimum / maximum / exclusive bounds: every text the schema's grammar accepts (an
    independent Earley parser, tests/gbnf_ref.py, and smallmind's matcher, grammar_tool accepts) is valid
    under jsonschema, and every valid plain decimal (16 digits a side) more than 4 ulps from a bound is
    accepted."""
    import math
    import random
    rng = random.Random(37)
    specs = list(NUMBER_BOUNDS)
    for _ in range(25):
        def bound():
            return round(rng.choice((-1, 1)) * 10 ** rng.uniform(-6, 6), rng.randrange(0, 7))
        a, b = sorted((bound(), bound()))
        spec = {}
        if rng.random() < 0.8:
            spec["exclusiveMinimum" if rng.random() < 0.4 else "minimum"] = a
        if rng.random() < 0.8 or not spec:
            spec["exclusiveMaximum" if rng.random() < 0.4 else "maximum"] = b
        specs.append(spec)
    bad, n_texts, n_accepted = [], 0, 0
    for k, spec in enumerate(specs):
        schema = dict({"type": "number"}, **spec)
        path = os.path.join(tmp, f"num-{k}.json")
        with open(path, "w") as f:
            json.dump(schema, f)
        p = subprocess.run([tool, "gbnf", path], capture_output=True, text=True)
        lo = max([(v, 0) for k, v in spec.items() if k == "minimum"] +
                 [(v, 1) for k, v in spec.items() if k == "exclusiveMinimum"], default=None)
        hi = min([(v, 0) for k, v in spec.items() if k == "maximum"] +
                 [(v, -1) for k, v in spec.items() if k == "exclusiveMaximum"], default=None)
        empty = lo and hi and (lo[0] > hi[0] or (lo[0] == hi[0] and (lo[1] or hi[1])))
        if empty or p.returncode != 0:
            if not empty or "no number" not in p.stdout:
                bad.append((spec, "grammar", empty, p.stdout[:120]))
            continue
        g = gbnf_ref.Grammar(p.stdout)
        texts = number_candidates(spec, rng)
        mine, why = verdicts(tool, path, texts, tmp, f"num-{k}")
        if mine is None:
            bad.append((spec, "grammar_tool accepts", why))
            continue
        edges = [float(v) for v in spec.values() if not isinstance(v, bool)]
        for t, m in zip(texts, mine):
            n_texts += 1
            ref, valid = judged(g, check, schema, spec, t, m, bad)
            n_accepted += ref
            far = all(abs(float(t) - e) > 4 * math.ulp(e) for e in edges)
            if valid and not ref and far and NUMBER_TEXT.fullmatch(t):
                bad.append((spec, t, "valid, refused"))
    report(not bad, f"numbers within bounds: {len(specs)} schemas, {n_texts} texts, {n_accepted} accepted: "
           f"each valid under jsonschema, every valid plain decimal accepted", str(bad)[:600])


MULTIPLES = [  # multipleOf on integers and numbers, with and without bounds; more are drawn at random
    {"type": "integer", "multipleOf": 7, "minimum": -30, "maximum": 100},
    {"type": "integer", "multipleOf": 2},
    {"type": "integer", "multipleOf": 1000},
    {"type": "integer", "multipleOf": 1, "minimum": -3, "maximum": 3},
    {"type": "number", "multipleOf": 1.0, "exclusiveMinimum": -2.5, "maximum": 4.5},
    {"type": "number", "multipleOf": 5, "exclusiveMinimum": 0, "maximum": 97.5},
    {"type": "integer", "multipleOf": 3, "minimum": 9999999999999980},
    {"type": "integer", "multipleOf": 97, "minimum": -1000000, "maximum": -1},
    {"type": "integer", "multipleOf": 86400, "minimum": 0},
    {"type": "integer", "multipleOf": 60, "exclusiveMaximum": 3600},
    {"type": "integer", "multipleOf": 1000000000, "minimum": -5e15},
    {"type": "integer", "multipleOf": 12, "minimum": 120, "maximum": 120},
    # 16-digit bounds: every digit of the bound written (the range's prefix once lost its last one)
    {"type": "integer", "multipleOf": 1, "minimum": -1234567890123456, "maximum": -1234567890123450},
    {"type": "integer", "multipleOf": 3, "minimum": 9876543210987650, "maximum": 9876543210987659},
]


def multiples(tool, check, gbnf_ref, tmp):
    """multipleOf: every text the schema's grammar accepts (the Earley parser of tests/gbnf_ref.py and
    smallmind's matcher agree) is valid under jsonschema, and every valid integer of at most 16 digits is
    accepted; candidates are the multiples and their neighbours at the bounds, at 0 and at random."""
    import random
    rng = random.Random(41)
    specs = list(MULTIPLES)
    for _ in range(20):
        m = rng.choice((2, 3, 4, 6, 9, 11, 15, 24, 25, 36, 48, 50, 64, 75, 99, 125, 128, 250, 365, 500, 1024))
        spec = {"type": rng.choice(("integer", "number")), "multipleOf": m}
        a, b = sorted(rng.randrange(-10 ** rng.randrange(1, 17), 10 ** rng.randrange(1, 17)) for _ in range(2))
        if rng.random() < 0.7:
            spec["exclusiveMinimum" if rng.random() < 0.3 else "minimum"] = a
        if rng.random() < 0.7:
            spec["exclusiveMaximum" if rng.random() < 0.3 else "maximum"] = b
        specs.append(spec)
    bad, n_texts, n_accepted = [], 0, 0
    for k, schema in enumerate(specs):
        path = os.path.join(tmp, f"mul-{k}.json")
        with open(path, "w") as f:
            json.dump(schema, f)
        p = subprocess.run([tool, "gbnf", path], capture_output=True, text=True)
        if p.returncode != 0:
            bad.append((schema, "grammar", p.stdout[:120]))
            continue
        g = gbnf_ref.Grammar(p.stdout)
        m = int(schema["multipleOf"])
        limit = 10 ** 16 - 1
        edges = [0, limit, -limit] + [int(v) for key, v in schema.items() if key.endswith(("imum", "Minimum"))]
        vals = set()
        for e in edges:
            for base in (e - e % m, e):
                vals.update([base + d for d in range(-6, 7)] + [base + j * m + d for j in (-2, -1, 1, 2) for d in (-1, 0, 1)])
        vals.update(rng.randrange(-limit, limit) // m * m + rng.choice((0, 0, 1, -1)) for _ in range(30))
        vals.update(rng.randrange(-10 ** 6, 10 ** 6) // m * m for _ in range(20))
        texts = sorted({str(v) for v in vals if abs(v) <= 10 ** 17} | {"0.0", "-0", "1e3", f"{m}.0", f"{m}.5"})
        mine, why = verdicts(tool, path, texts, tmp, f"mul-{k}")
        if mine is None:
            bad.append((schema, "grammar_tool accepts", why))
            continue
        for t, mt in zip(texts, mine):
            n_texts += 1
            ref, valid = judged(g, check, schema, schema, t, mt, bad)
            n_accepted += ref
            # "-0" is never written; a bound beyond 2^53 is moved one double inward (its literal unknown)
            near = re.fullmatch(r"-?[0-9]+", t) and any(abs(e) >= 2 ** 53 and abs(int(t) - e) <= 4 for e in edges[3:])
            if valid and not ref and not near and re.fullmatch(r"0|-?[1-9][0-9]{0,15}", t):
                bad.append((schema, t, "valid, refused"))
    report(not bad and n_accepted > 0, f"multipleOf: {len(specs)} schemas, {n_texts} texts, {n_accepted} accepted: "
           f"each valid under jsonschema, every valid integer accepted", str(bad)[:600])


MERGED = [  # (schema, texts valid under it, texts that are not): allOf, $ref beside other keywords, formats
    (SCHEMAS[-5][0], ['{"id": 5, "tag": "a"}', '{ "id" : 99 , "tag" : "b" }'],
     ['{"id": 5}', '{"tag": "a"}', '{"id": 0, "tag": "a"}', '{"id": 5, "tag": "c"}']),
    (SCHEMAS[-4][0], ['"abcdef"', '""'], ['"abcdefg"', '5', 'null']),
    (SCHEMAS[-3][0], ['10', '3.25', '0', '0.0'], ['10.5', '-1', '-0.001', '"3"']),
    ({"type": "object", "properties": {"p": {"allOf": [{"allOf": [{"type": "integer"}, {"minimum": -3}]},
                                                       {"maximum": 3}]}}, "required": ["p"]},
     ['{"p": -3}', '{"p": 3}'], ['{"p": 4}', '{"p": -4}', '{"p": 1.5}', '{}']),
    ({"type": "string", "format": "ipv6"}, ['"::1"', '"::"', '"2001:db8::8a2e:370:7334"', '"1:2:3:4:5:6:7:8"',
                                            '"fe80::"', '"1:2:3:4:5:6::7"'],
     ['"1:2:3:4:5:6:7:8:9"', '"1::2::3"', '"12345::"', '"1:2:3:4:5:6:7::8"', '"1:2:3:4:5:6::7:8"', '"g::"', '":1"']),
    ({"type": "string", "format": "hostname"}, ['"example.com"', '"a"', '"a-b.c0"', '"XN--80AK6AA92E.com"'],
     ['"-a.com"', '"a..b"', '"a_b.com"', '"a-.com"', '"a.com."', '""']),
    ({"type": "string", "format": "email"}, ['"john.doe@example.com"', '"x+y@a.b"', '"{a}/=?@mail-1.org"'],
     ['"@a.com"', '"a@"', '"a..b@c.com"', '"a b@c.com"', '".a@c.com"', '"a@b@c"']),
    ({"type": "string", "format": "uri"}, ['"https://example.com"', '"http://a.b:8080/p/q?x=1&y=%20#f"',
                                           '"ftp://h/a/b/"'],
     ['"example.com"', '"://x.com"', '"http://a b"', '"https://x.org/%zz"', '"1http://x"']),
    ({"type": "string", "format": "duration"}, ['"P3Y6M4DT12H30M5S"', '"PT5M"', '"P2W"', '"P1D"', '"PT1H30M"'],
     ['"P"', '"PT"', '"P1H"', '"P1W2D"', '"PT1D"', '"P1Y2D"', '"3D"']),
    ({"type": "object"}, ['{}', '{"a": 1, "b": [true, null], "c": {"d": "e"}}'], ['[]', '"{}"', 'null']),
]


def merged_schemas(tool, check, tmp):
    """allOf's schemas merged into one, $ref with keywords beside it, the string formats ipv6 (checked by
    Python's ipaddress), hostname, email, uri (urllib.parse) and duration: each text a validator takes is a sentence of the schema's
    grammar (grammar_tool accepts), each it refuses is not."""
    bad, n = [], 0
    for k, (schema, good, wrong) in enumerate(MERGED):
        path = os.path.join(tmp, f"merged-{k}.json")
        with open(path, "w") as f:
            json.dump(schema, f)
        got, _ = verdicts(tool, path, good + wrong, tmp, f"merged-{k}")
        for t, g in zip(good + wrong, got or [None] * len(good + wrong)):
            n += 1
            valid = check(schema, json.loads(t)) is None
            if valid != (t in good) or (g == "1") != valid:
                bad.append((k, t, "jsonschema", valid, "grammar", g))
    report(not bad and n == sum(len(g) + len(w) for _, g, w in MERGED),
           f"allOf merged, $ref beside keywords, formats: {len(MERGED)} schemas, {n} texts, the grammar = jsonschema", str(bad)[:400])


def bad_inputs(sm, tool, tmp):
    model = os.path.join(ROOT, "models", "default")
    bad = []
    for k, (schema, needle) in enumerate(BAD_SCHEMAS):
        path = os.path.join(tmp, f"bad-{k}.json")  # a file (the value false is not inline JSON)
        with open(path, "w") as f:
            json.dump(schema, f)
        p = subprocess.run([sm, "generate", "-m", model, "-p", "x", "--json-schema", path], capture_output=True)
        e = p.stderr.decode()
        if p.returncode != 1 or needle not in e or e.count("\n") != 1 or p.stdout:
            bad.append((schema, e))
    report(not bad, f"{len(BAD_SCHEMAS)} bad schemas: exit 1, one line naming the keyword and where", str(bad)[:400])
    bad = []
    for text, needle in BAD_GRAMMARS:
        p = subprocess.run([sm, "generate", "-m", model, "-p", "x", "--grammar-text", text], capture_output=True)
        e = p.stderr.decode()
        if p.returncode != 1 or needle not in e or e.count("\n") != 1 or p.stdout:
            bad.append((text, e))
    report(not bad, f"{len(BAD_GRAMMARS)} bad grammars: exit 1, one line naming the rule or position", str(bad)[:400])
    p = subprocess.run([sm, "generate", "-m", model, "-p", "x", "--grammar-text", "root ::= \"a\"",
                        "--json-schema", "{}"], capture_output=True)
    report(p.returncode == 2 and b"give one of" in p.stderr, "two grammar flags: a usage error")
    p = subprocess.run([sm, "generate", "-m", model, "-p", "x", "--grammar", os.path.join(tmp, "none.gbnf")],
                       capture_output=True)
    report(p.returncode == 1 and b"none.gbnf" in p.stderr, "--grammar of a missing file names it")
    p = subprocess.run([sm, "generate", "-m", model, "--batch", "-", "-n", "4"], capture_output=True,
                       input=b'{"prompt": "x", "json_schema": {"type": "integer", "multipleOf": 0.5}}\n'
                             b'{"prompt": "x", "grammar": 7}\n{"prompt": "x", "json_schema": {"type": "null"}}\n')
    r = loads(p.stdout)
    report(p.returncode == 1 and "multipleOf" in r[0].get("error", "") and "grammar" in r[1].get("error", "") and
           r[2].get("text") == "null" and r[2].get("valid") is True,
           "batch: a bad schema or grammar is that record's error, the rest run", json.dumps(r)[:300])


def commands(sm, models_dir, check, tmp):
    model = os.path.join(ROOT, "models", "default")
    schema = SCHEMAS[14][0]
    sj = json.dumps(schema)
    # -n runs out before the schema can end: finish length, valid false
    p = subprocess.run([sm, "generate", "-m", model, "-p", "x", "--json-schema", sj, "-n", "3", "--json"],
                       capture_output=True)
    j = json.loads(p.stdout or b"{}")
    report(p.returncode == 0 and j.get("finish_reason") == "length" and j.get("valid") is False,
           "-n too small: finish_reason length and valid false", p.stdout.decode()[:200])
    p = subprocess.run([sm, "generate", "-m", model, "-p", "x", "--json-schema", sj, "-n", "3"], capture_output=True)
    report(b"not a whole sentence of the grammar" in p.stderr, "text output: a cut output is said on stderr")
    # a record in a batch = the same prompt alone (greedy and sampled, several at once)
    recs = [{"id": i, "prompt": f"Who {i}?", "json_schema": schema, "temperature": t, "seed": i}
            for i, t in enumerate([0, 0.9, 1.3, 0.7, 0])]
    rc, out, err = batch(sm, model, [], recs, "-n", "120", "--parallel", "3")
    bad = []
    for r, q in zip(recs, out):
        p = subprocess.run([sm, "generate", "-m", model, "-p", r["prompt"], "--json-schema", sj, "-n", "120",
                            "--temp", str(r["temperature"]), "-s", str(r["seed"]), "--json"], capture_output=True)
        alone = json.loads(p.stdout)
        if alone["text"] != q["text"] or alone["valid"] != q["valid"]:
            bad.append((r["id"], alone["text"][:60], q["text"][:60]))
    report(rc == 0 and not bad, "batch records under a schema = each prompt alone (--parallel 3)", str(bad)[:300])
    # --format json: any JSON value; generate --chat and chat with a schema
    tpl = os.path.join(tmp, "t.jinja")
    with open(tpl, "w") as f:
        f.write("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:")
    p = subprocess.run([sm, "generate", "-m", model, "-p", "x", "--format", "json", "-n", "100", "--json"],
                       capture_output=True)
    j = json.loads(p.stdout)
    ok = j["valid"]
    if ok:
        json.loads(j["text"])
    report(p.returncode == 0 and (ok or j["finish_reason"] == "length"), "--format json: a JSON value", j["text"][:80])
    p = subprocess.run([sm, "generate", "-m", model, "-p", "Name one.", "--chat", "--chat-template", tpl,
                        "--json-schema", sj, "-n", "150", "--json"], capture_output=True)
    j = json.loads(p.stdout or b"{}")
    report(p.returncode == 0 and j.get("valid") and (not check or check(schema, json.loads(j["text"])) is None),
           "generate --chat --json-schema: valid JSON", p.stdout.decode()[:200] + p.stderr.decode()[:200])
    p = subprocess.run([sm, "chat", "-m", model, "--chat-template", tpl, "--json-schema", sj, "-n", "150", "--json"],
                       input=b"Name one.\nAnd another.\n", capture_output=True)
    turns = loads(p.stdout)
    report(p.returncode == 0 and len(turns) == 2 and all(t.get("valid") for t in turns) and
           (not check or all(check(schema, json.loads(t["text"])) is None for t in turns)),
           "chat --json-schema: every reply valid JSON", p.stdout.decode()[:200])
    # OpenAI's response_format in a batch: json_schema and json_object
    lines = [{"custom_id": "s", "method": "POST", "url": "/v1/completions",
              "body": {"prompt": "JSON:", "max_tokens": 150,
                       "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": True,
                                                                                  "schema": schema}}}},
             {"custom_id": "o", "method": "POST", "url": "/v1/completions",
              "body": {"prompt": "JSON:", "max_tokens": 150, "response_format": {"type": "json_object"}}},
             {"custom_id": "c", "method": "POST", "url": "/v1/chat/completions",
              "body": {"messages": [{"role": "user", "content": "JSON please"}], "max_tokens": 150,
                       "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}}}]
    rc, out, err = batch(sm, model, [], lines, "--chat-template", tpl)
    ok = len(out) == 3 and all(r["response"]["status_code"] == 200 for r in out)
    if ok:
        texts = [out[0]["response"]["body"]["choices"][0]["text"], out[1]["response"]["body"]["choices"][0]["text"],
                 out[2]["response"]["body"]["choices"][0]["message"]["content"]]
        fins = [r["response"]["body"]["choices"][0]["finish_reason"] for r in out]
        try:
            vals = [json.loads(t) if f == "stop" else None for t, f in zip(texts, fins)]
            ok = (isinstance(vals[1], dict) or fins[1] == "length") and \
                 (not check or all(check(schema, v) is None for v in (vals[0], vals[2]) if v is not None))
        except ValueError:
            ok = False
    report(rc == 0 and ok, "OpenAI response_format json_schema and json_object in a batch", (json.dumps(out) + err)[:300])


if __name__ == "__main__":
    sys.exit(main())
