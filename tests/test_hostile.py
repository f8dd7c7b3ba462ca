#!/usr/bin/python3
"""Regression tests for the third robustness sweep (issue 32): the ways the
surfaces of GGUF files, Hugging Face directories, chat templates and
sessions, batches and convert crashed, hung or accepted what they should
refuse, numbered as in the issue; each check failed before its fix.

    test_hostile.py --bin build --shared ../shared

Checks that need ../shared skip, saying so, without it.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
from proc import run_cpu  # noqa: E402
from st_file import with_chat_template, writable_copy  # noqa: E402
from tally import Tally  # noqa: E402

T = Tally("hostile")
report, skip = T.report, T.skip
ROOT = os.path.dirname(HERE)
DFLT = os.path.join(ROOT, "models", "default")
PY = sys.executable


def run(args, data=None, env=None):
    """(returncode, stdout bytes, stderr text); returncode None when it hung."""
    rc, out, err, _ = run_cpu(args, data=data, env=env)
    return rc, out, err.strip()


def one_line(err):
    return len(err.strip().split("\n")) == 1


def chat_dir(tmp, name, template):
    """models/default (a byte-level model) with `template` as its chat template."""
    d = writable_copy(DFLT, os.path.join(tmp, name))
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg["chat_template"] = template
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return d


# ---- 1. expression chains and nesting: one line, never a crash
def deep_templates(sm, tmp, shared):
    n = 10000
    chains = {
        "1+1+...": "{{ " + "+".join(["1"] * n) + " }}",
        "|upper": "{{ 'a'" + "|upper" * n + " }}",
        ".x": "{{ x" + ".x" * n + " }}",
        "[0]": "{{ x" + "[0]" * n + " }}",
        "f()()": "{{ f" + "()" * n + " }}",
        "and": "{{ " + " and ".join(["1"] * n) + " }}",
        "not not": "{{ " + "not " * n + "1 }}",
        "- - -": "{{ " + "-" * n + "1 }}",
        "((( )))": "{{ " + "(" * n + "1" + ")" * n + " }}",
        "[[[ ]]]": "{{ " + "[" * n + "]" * n + " }}",
        "{'a': {...}}": "{{ " + "{'a': " * n + "1" + "}" * n + " }}",
        "if else if": "{{ " + " if 1 else ".join(["1"] * n) + " }}",
        "**": "{{ " + "**".join(["1"] * n) + " }}",
        "~": "{{ " + "~".join(["'a'"] * n) + " }}",
        "is defined": "{{ 1" + " is defined" * n + " }}",
        "nested if blocks": "{% if 1 %}" * n + "x" + "{% endif %}" * n,
    }
    conv = json.dumps([{"role": "user", "content": "hi"}]).encode()
    for what, text in chains.items():
        tf = os.path.join(tmp, "deep.jinja")
        with open(tf, "w") as f:
            f.write(text)
        rc, out, err = run([sm, "template", "-m", DFLT, "--chat-template", tf, "-f", "-"], conv)
        report(rc == 1 and one_line(err) and "deep.jinja line 1" in err and "nested too deeply" in err,
               f"1. a template of {n} x {what}: exit 1, one line", err[:150])
    # a long elif chain is not nesting: it renders (the parser and renderer loop over it)
    elifs = "{% if x == 0 %}a" + "".join(f"{{% elif x == {i} %}}b{i}" for i in range(1, 20000)) + \
        "{% else %}z{% endif %}"
    tf = os.path.join(tmp, "elif.jinja")
    with open(tf, "w") as f:
        f.write(elifs)
    rc, out, err = run([sm, "template", "-m", DFLT, "--chat-template", tf, "-f", "-"],
                       json.dumps({"messages": [], "x": 19999}).encode())
    report(rc == 0 and out == b"b19999", "1. 20,000 elifs render (the last one taken)", f"rc={rc} {out[:40]!r} {err[:100]}")
    # the same through generate --chat and chat, with the template in the model's config
    deep = chains["|upper"]
    d = chat_dir(tmp, "deep-model", deep)
    for args, data in ((["generate", "-m", d, "--chat", "-p", "Hi", "-n", "2"], None),
                       (["chat", "-m", d, "-n", "2"], b"Hi\n")):
        rc, out, err = run([sm] + args, data)
        report(rc == 1 and "nested too deeply" in err and "Segmentation" not in err,
               f"1. {args[0]}: a deep template in config.json fails cleanly", f"rc={rc} {err[:150]}")
    # ... from a GGUF file's tokenizer.chat_template
    g = os.path.join(tmp, "deep.gguf")
    rc, out, err = run([sm, "convert", d, g])
    if rc == 0:
        rc, out, err = run([sm, "generate", "-m", g, "--chat", "-p", "Hi", "-n", "2"])
        report(rc == 1 and "nested too deeply" in err and one_line(err),
               "1. a deep tokenizer.chat_template in a GGUF file fails cleanly", f"rc={rc} {err[:150]}")
    else:
        report(False, "1. convert to GGUF with a chat template", err[:150])
    # ... from a Hugging Face directory's tokenizer_config.json
    src = os.path.join(shared, "models", "tiny-gpt2")
    if os.path.isdir(src):
        cfgf = os.path.join(tmp, "deep_tokenizer_config.json")
        with open(cfgf, "w") as f:
            json.dump({"chat_template": deep}, f)
        h = with_chat_template(src, cfgf, os.path.join(tmp, "tg2-deep"))
        rc, out, err = run([sm, "generate", "-m", h, "--chat", "-p", "Hi", "-n", "2"])
        report(rc == 1 and "nested too deeply" in err and one_line(err),
               "1. a deep chat_template in tokenizer_config.json fails cleanly", f"rc={rc} {err[:150]}")
    else:
        skip("1. tokenizer_config.json", f"{src} is absent")


# ---- 2. template arithmetic at the edges of int64 and double
def arithmetic(sm, tmp):
    imin = "(-9223372036854775807 - 1)"
    cases = [  # (expression, output as Python's Jinja gives it, or None: an error naming it)
        ("(10.0**300) % 7", "1.0"),
        (f"{imin} % -1", "0"),
        (f"{imin} - 0", "-9223372036854775808"),
        ("9223372036854775807 + 1", "9.223372036854776e+18"),
        ("range(9223372036854775806, 9223372036854775807)|list", "[9223372036854775806]"),
        ("range(9223372036854775807, " + imin + ", " + imin + ")|list", "[9223372036854775807, -1]"),
        ("range(" + imin + ", 9223372036854775807, 4611686018427387904)|list",
         "[-9223372036854775808, -4611686018427387904, 0, 4611686018427387904]"),
        ("-" + imin, "9.223372036854776e+18"),
        (f"{imin} // -1", None),
        (f"{imin}|abs", None),
        ("1 % 0", None),
    ]
    for expr, want in cases:
        tf = os.path.join(tmp, "arith.jinja")
        with open(tf, "w") as f:
            f.write("{{ " + expr + " }}")
        rc, out, err = run([sm, "template", "-m", DFLT, "--chat-template", tf, "-f", "-"], b"[]")
        if want is None:
            ok = rc == 1 and one_line(err) and "arith.jinja line 1" in err
        else:
            ok = rc == 0 and out.decode() == want
        report(ok, f"2. {{{{ {expr} }}}}: " + (want if want is not None else "an error naming the line"),
               f"rc={rc} {out[:80]!r} {err[:120]}")
    # a macro of two arguments calling itself: the depth limit, not undefined behaviour
    tf = os.path.join(tmp, "macro.jinja")
    with open(tf, "w") as f:
        f.write("{% macro f(a, b) %}{{ f(b, a) }}{{ f(a) }}{% endmacro %}{{ f(1, 2) }}")
    rc, out, err = run([sm, "template", "-m", DFLT, "--chat-template", tf, "-f", "-"], b"[]")
    report(rc == 1 and one_line(err) and "nested more than" in err, "2. recursion through a two-argument macro",
           err[:120])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--shared", default=os.path.join("..", "shared"))
    a = ap.parse_args()
    sm = os.path.abspath(os.path.join(a.bin, "smallmind"))
    tmp = tempfile.mkdtemp(prefix="sm-hostile-")
    try:
        deep_templates(sm, tmp, a.shared)
        arithmetic(sm, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return T.close()


if __name__ == "__main__":
    sys.exit(main())
