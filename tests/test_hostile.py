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
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
from proc import interrupt, run_cpu, wait_until  # noqa: E402
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


# ---- 3. a GGUF file whose alignment leaves tensors misaligned: copied once, said by info
def gguf_alignment(sm, tmp):
    try:
        import numpy as np
        import make_gguf as mg
    except ImportError:
        skip("3. GGUF alignment", "NumPy is not installed (apt-get install python3-numpy)")
        return None
    outs = {}
    for align in (32, 1, 2, 8):
        m = mg.llama(np.random.default_rng(5))
        m.align = align
        mg.set_meta(m, "general.alignment", mg.U32, align)
        f = os.path.join(tmp, f"align{align}.gguf")
        with open(f, "wb") as fh:
            fh.write(m.bytes())
        rc, out, err = run([sm, "generate", "-m", f, "-p", "the cat", "-n", "12", "--temp", "0"])
        outs[align] = (rc, out)
        rc2, info, err2 = run([sm, "info", "-m", f])
        said = b"copied:" in info and f"general.alignment ({align})".encode() in info
        if align == 32:
            report(rc == 0 and rc2 == 0 and b"copied:" not in info, "3. general.alignment 32: used in place",
                   f"rc={rc} {err[:100]}")
        else:
            report(rc == 0 and out == outs[32][1] and said,
                   f"3. general.alignment {align}: the same text as the aligned file, info says the "
                   "tensors were copied", f"rc={rc} {err[:100]} {info[-200:]!r}")
    return mg


# ---- 10. convert F.gguf OUT checks the file as generate does (one validation path)
# ---- 4. GGUF export of tokenizer.json vocabularies (the round trip of every real tokenizer
#         is in test_tokenizers.py: gguf_export_round_trip)
def gguf_export_refusal(sm, tmp, shared):
    tiny = os.path.join(shared, "models", "tiny-gpt2")
    if not os.path.isdir(tiny):
        skip("4. GGUF export refusal", f"{tiny} is absent")
        return
    with open(os.path.join(tiny, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    for label, pre, want in (
            ("a Split on commas before GPT-2's ByteLevel",
             {"type": "Sequence", "pretokenizers": [
                 {"type": "Split", "pattern": {"String": ","}, "behavior": "Isolated", "invert": False},
                 {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
             "not one llama.cpp names"),
            ("GPT-2's pattern spelled differently (as llama.cpp's gpt-2)",
             {"type": "Sequence", "pretokenizers": [
                 {"type": "Split", "pattern": {"Regex": "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?"
                                                        "[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"},
                  "behavior": "Isolated", "invert": False},
                 {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
             None)):
        d = writable_copy(tiny, os.path.join(tmp, "exp-" + str(len(label))))
        tj2 = dict(tj, pre_tokenizer=pre)
        os.remove(os.path.join(d, "tokenizer.json"))
        for n in ("vocab.json", "merges.txt"):  # tokenizer.json alone
            if os.path.exists(os.path.join(d, n)):
                os.remove(os.path.join(d, n))
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tj2, f)
        g = d + ".gguf"
        rc, out, err = run([sm, "convert", d, g])
        if want:
            report(rc == 1 and want in err and one_line(err) and not os.path.exists(g)
                   and not [x for x in os.listdir(tmp) if x.startswith(os.path.basename(g) + ".")],
                   f"4. export to GGUF with {label}: refused in one line, nothing written: {err[:160]}",
                   f"rc={rc} {err[:300]}")
        else:
            a = run([sm, "tokenize", "-m", d, "-p", "Hello world, it's 2024!"])
            b = run([sm, "tokenize", "-m", g, "-p", "Hello world, it's 2024!"]) if rc == 0 else (None, b"", "")
            pre_name = b""
            if rc == 0:
                with open(g, "rb") as f:
                    raw = f.read(1 << 16)
                i = raw.find(b"tokenizer.ggml.pre")
                pre_name = raw[i + 18 + 4 + 8: i + 18 + 4 + 8 + 5]
            report(rc == 0 and a[1] == b[1] and a[0] == 0 and pre_name == b"gpt-2",
                   f"4. export to GGUF with {label}: named by what it does (gpt-2), the same ids",
                   f"rc={rc} {err[:200]} {a[1][:60]} {b[1][:60]} {pre_name}")


def gguf_convert_checks(sm, tmp, mg):
    if mg is None:
        skip("10. convert of corrupted GGUF files", "NumPy is not installed")
        return
    import numpy as np
    bad = 0
    for name, change, want in mg.faults():  # (each a .gguf name: also the one without GGUF's magic)
        m = mg.llama(np.random.default_rng(5))
        change(m)
        f = os.path.join(tmp, f"bad-{name}.gguf")
        with open(f, "wb") as fh:
            fh.write(m.bytes())
        out = os.path.join(tmp, f"bad-{name}-out")
        rg, _, eg = run([sm, "generate", "-m", f, "-p", "x", "-n", "1"])
        rc, _, ec = run([sm, "convert", f, out])
        same = rc == 1 and rg == 1 and want in ec and ec == eg and not os.path.exists(out) and one_line(ec)
        if not same:
            bad += 1
            report(False, f"10. convert {name}: refused as generate refuses it", f"generate: {eg[:120]} convert: rc={rc} {ec[:120]}")
    report(bad == 0, f"10. convert refuses each of the {len(mg.faults())} corrupted GGUF files with the "
           "message generate gives, and writes nothing")



def gguf_keeps_types(sm, tmp, shared):
    """convert F.gguf DIR of llama.cpp's quantized files keeps their types and text."""
    g = os.path.join(shared, "models", "gguf", "llama-rand-256-q8_0.gguf")
    if not os.path.exists(g):
        skip("extra: convert F.gguf DIR keeps the types", f"{g} is absent")
        return
    d = os.path.join(tmp, "q-dir")
    rc, _, err = run([sm, "convert", g, d, "-q"])
    types = set()
    if rc == 0:
        with open(os.path.join(d, "config.json")) as fh:
            types = {t["dtype"] for t in json.load(fh)["tensors"]}
    a = run([sm, "generate", "-m", g, "-p", "the cat", "-n", "12", "--temp", "0"])[1]
    b = run([sm, "generate", "-m", d, "-p", "the cat", "-n", "12", "--temp", "0"])[1]
    size = os.path.getsize(os.path.join(d, "model.bin")) if rc == 0 else 0
    report(rc == 0 and types == {"q8_0", "f32"} and a == b and size < 1.05 * os.path.getsize(g),
           "extra: convert F.gguf DIR keeps the file's tensor types (q8_0 stays q8_0; the same size and text)",
           f"rc={rc} {types} {size} {err[:100]}")


# ---- 5., 6. convert: a FIFO source, a killed or interrupted GGUF export
def convert_leftovers(sm, tmp, shared):
    fifo = os.path.join(tmp, "src.fifo")
    os.mkfifo(fifo)
    rc, _, err = run([sm, "convert", fifo, os.path.join(tmp, "fifo-out")])
    report(rc == 1 and "not a regular file" in err and one_line(err), "6. convert FIFO OUT: refused at once",
           f"rc={rc} {err[:120]}")
    s260 = os.path.join(shared, "models", "stories260K", "stories260K.bin")
    if os.path.exists(s260):
        rc, _, err = run([sm, "convert", s260, os.path.join(tmp, "fifo-out2"), "--tokenizer", fifo])
        report(rc == 1 and "not a regular file" in err, "6. convert --tokenizer FIFO: refused at once",
               f"rc={rc} {err[:120]}")
    rc, _, err = run([sm, "convert", DFLT, os.path.join(tmp, "fifo-out3"), "--tokenizer", fifo])
    report(rc == 1 and "--tokenizer is for" in err and not os.path.exists(os.path.join(tmp, "fifo-out3")),
           "13. convert of a smallmind directory with --tokenizer: refused (it would be ignored)", f"rc={rc} {err[:120]}")
    # a model large enough that its export takes a moment (8 x 768, about 220 MB of f32)
    m = os.path.join(tmp, "big")
    subprocess.run([PY, os.path.join(ROOT, "scripts", "sm_random_model.py"), "--out", m, "--layers", "8",
                    "--heads", "12", "--embd", "768", "--ctx", "256", "--vocab", "256", "--seed", "1"],
                   check=True, capture_output=True)
    work = os.path.join(tmp, "conv")
    os.makedirs(work)

    def left(name):
        return sorted(x for x in os.listdir(work) if x.startswith(name + "."))

    # SIGKILL while the intermediate directory is written: the next run writing OUT removes it
    out = os.path.join(work, "k.gguf")
    p = subprocess.Popen([sm, "convert", m, out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: left("k.gguf") or p.poll() is not None, every=0.002)
    p.kill()
    p.wait()
    stale = left("k.gguf")
    rc, _, err = run([sm, "convert", m, out, "-q"])
    report(stale and rc == 0 and left("k.gguf") == [] and os.path.exists(out),
           "5. convert to GGUF killed (SIGKILL): the next run removes what it left", f"left {stale}, then rc={rc} {left('k.gguf')}")
    # one Ctrl-C while the GGUF file is written: exit 130 soon, nothing left
    out = os.path.join(work, "c.gguf")
    rc, _, err, cpu = interrupt([sm, "convert", m, out], signal.SIGINT,
                                lambda o, e, c: any(x.startswith("c.gguf.tmp-") for x in os.listdir(work)))
    report(rc == 130 and os.listdir(work) == ["k.gguf"] and cpu < 2.0,
           "5. one Ctrl-C during the GGUF export: exit 130 within a second, nothing left",
           f"rc={rc} {sorted(os.listdir(work))} {cpu:.2f} s")
    rc, _, err, cpu = interrupt([sm, "convert", m, out, "--dtype", "q4_k_m"], signal.SIGINT,
                                lambda o, e, c: any(x.startswith("c.gguf.dir-") for x in os.listdir(work)))
    report(rc == 130 and os.listdir(work) == ["k.gguf"] and cpu < 2.0,
           "5. one Ctrl-C while quantizing for the export: exit 130 within a second, nothing left",
           f"rc={rc} {sorted(os.listdir(work))} {cpu:.2f} s")


# ---- 7., 8., 9. piped chat: /save to a FIFO, a long /load, failures in the exit code
def chat_files(sm, tmp):
    tpl = os.path.join(tmp, "plain.jinja")
    with open(tpl, "w") as f:
        f.write("{% for m in messages %}{{ m.content }}\n{% endfor %}")
    chat = [sm, "chat", "-m", DFLT, "--chat-template", tpl, "-n", "4", "--json"]
    fifo = os.path.join(tmp, "save.fifo")
    os.mkfifo(fifo)
    rc, out, err = run(chat, f"Hi\n/save {fifo}\n".encode())
    report(rc == 1 and "not a regular file" in err, "7. /save to a FIFO nobody reads: refused, exit 1 at the end",
           f"rc={rc} {err[:150]}")
    saved = os.path.join(tmp, "saved.json")
    with open(saved, "w") as f:
        f.write("old")
    rc, out, err = run(chat, f"Hi\n/save {saved}\n".encode())
    left = [x for x in os.listdir(tmp) if x.startswith("saved.json.")]
    ok = rc == 0 and json.load(open(saved))[0]["content"] == "Hi" and not left
    report(ok, "7. /save replaces the file whole (written beside it, then renamed)", f"rc={rc} {left} {err[:100]}")
    # 16,000 messages loaded into a 256-token context: trimmed in a few renderings, not 8,000
    msgs = [{"role": "system", "content": "A story."}]
    for i in range(8000):
        msgs += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    conv = os.path.join(tmp, "conv.json")
    with open(conv, "w") as f:
        json.dump(msgs, f)
    rc, out, err, cpu = run_cpu(chat, data=f"/load {conv}\nHello\n".encode())
    rec = [json.loads(x) for x in out.decode().splitlines() if x.strip()]
    ok = rc == 0 and len(rec) == 1 and rec[0]["messages_dropped"] > 15000 and cpu < 20
    report(ok, "8. /load of 16,000 messages into a 256-token context: trimmed by bisection",
           f"rc={rc} {cpu:.2f} s CPU {rec[:1]} {err[-150:]}")
    with open(conv, "w") as f:
        json.dump(msgs[:1] + [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}] * 50001, f)
    rc, out, err = run(chat, f"/load {conv}\n".encode())
    report(rc == 1 and "more than a conversation may hold (100000)" in err, "8. a conversation file over 100,000 messages: refused naming the cap",
           f"rc={rc} {err[:150]}")
    # failures: unknown commands, /load and /save without a file, failing turns
    for what, lines in (("an unknown command", "Hi\n/foo\n"), ("/load without a file", "/load\nHi\n"),
                        ("/save without a file", "Hi\n/save\n")):
        rc, out, err = run(chat, lines.encode())
        named = ("'/foo'" in err) if "unknown" in what else ("needs a file name" in err)
        report(rc == 1 and named and "commands:" not in err, f"9. piped chat, {what}: named, exit 1 at the end",
               f"rc={rc} {err[:150]}")
    rc, out, err = run(chat, b"Hi\n/help\nAgain\n")
    report(rc == 0 and "commands:" in err, "9. /help lists the commands, exit 0", f"rc={rc}")
    bad = os.path.join(tmp, "raise.jinja")
    with open(bad, "w") as f:
        f.write("{{ raise_exception('no') }}")
    rc, out, err = run([sm, "chat", "-m", DFLT, "--chat-template", bad, "-n", "4", "--json"], b"Hi\nAgain\n")
    report(rc == 1 and err.count("raise.jinja line 1: no") == 2, "9. every turn failing (the template raises): exit 1",
           f"rc={rc} {err[:150]}")
    rc, out, err = run(chat + ["-c", "16"], ("x" * 100 + "\nHi\n").encode())
    report(rc == 1 and "the context (16)" in err and len(out.decode().splitlines()) == 1,
           "9. a turn longer than the context fails, the next one runs, exit 1", f"rc={rc} {err[:150]}")


# ---- 12. a normalizer that multiplies the text: refused past a bound, linear below it
def normalizer_growth(sm, tmp, shared):
    src = os.path.join(shared, "models", "tiny-gpt2")
    if not os.path.isdir(src):
        skip("12. normalizer growth", f"{src} is absent")
        return
    text = os.path.join(tmp, "p100k.txt")
    with open(text, "w") as f:
        f.write("banana " * 15000)
    for times, ok_expected in ((1000, False), (32, True)):
        d = writable_copy(src, os.path.join(tmp, f"norm{times}"))
        for n in ("vocab.json", "merges.txt"):
            os.remove(os.path.join(d, n))
        with open(os.path.join(d, "tokenizer.json")) as f:
            tj = json.load(f)
        tj["normalizer"] = {"type": "Replace", "pattern": {"String": "a"}, "content": "a" * times}
        with open(os.path.join(d, "tokenizer.json"), "w") as f:
            json.dump(tj, f)
        rc, out, err, cpu = run_cpu([sm, "tokenize", "-m", d, "-f", text])
        if ok_expected:
            report(rc == 0 and len(out.split()) > 100000 and cpu < 30,
                   f"12. a Replace making the text {times}x longer: tokenized in linear time",
                   f"rc={rc} {len(out.split())} ids, {cpu:.2f} s CPU {err[:100]}")
        else:
            report(rc == 1 and "1000 times longer" in err and "tokenizer.json" in err and one_line(err),
                   f"12. a Replace making the text {times}x longer: refused naming tokenizer.json", f"rc={rc} {err[:150]}")


# ---- 13. messages that name what is wrong
def messages(sm, tmp):
    d = writable_copy(DFLT, os.path.join(tmp, "shape"))
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg["n_embd"] = 128
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    rc, out, err = run([sm, "generate", "-m", d, "-p", "a", "-n", "1"])
    report(rc == 1 and err.startswith(f"smallmind: {d}: tensor tok_embd has") and one_line(err),
           "13. a directory's tensor that does not fit its config: the message names the directory", err[:150])
    rc, out, err = run([sm, "convert", DFLT, ""])
    report(rc == 2 and "OUT is an empty path" in err, "13. convert SRC '': a usage error at once (exit 2)", f"rc={rc} {err[:120]}")
    d = chat_dir(tmp, "ctx-chat", "{% for m in messages %}{{ m.content }}{% endfor %}")
    rc, out, err = run([sm, "generate", "-m", d, "--chat", "-p", "x" * 400, "-c", "64"])
    report(rc == 1 and "400 tokens" in err and "context (64)" in err,
           "13. a templated prompt longer than the context: the message gives both counts", err[:150])
    # NaN weights: the message names the model
    d = writable_copy(DFLT, os.path.join(tmp, "nan"))
    with open(os.path.join(d, "model.bin"), "r+b") as f:
        f.seek(64)
        f.write(b"\xff\xff\xff\x7f" * 65536)  # the token embedding all NaN
    rc, out, err = run([sm, "generate", "-m", d, "-p", "a", "-n", "3"])
    report(rc == 1 and f"{d}: the model produced NaN or infinite logits" in err,
           "13. NaN logits: the message names the model", err[:150])
    rc, out, err = run([sm, "score", "-m", d, "-p", "abc"])
    report(rc == 1 and f"{d}: the model produced NaN or infinite logits" in err,
           "13. NaN logits in score: the message names the model", err[:150])


def gguf_silent(sm, tmp, mg):
    """14. GGUF files that were accepted though they should not be."""
    if mg is None:
        skip("14. GGUF silent accepts", "NumPy is not installed")
        return
    import numpy as np

    def case(name, change, want):
        m = mg.llama(np.random.default_rng(5))
        change(m)
        f = os.path.join(tmp, f"silent-{name}.gguf")
        with open(f, "wb") as fh:
            fh.write(m.bytes())
        rc, out, err = run([sm, "generate", "-m", f, "-p", "the cat", "-n", "2"])
        report(rc == 1 and want in err and one_line(err), f"14. GGUF {name}: refused", f"rc={rc} {err[:150]}")

    def junk(m):
        made = m.bytes
        m.bytes = lambda: made() + b"junk" * 100
    case("with 400 bytes of junk after the last tensor", junk, "400 bytes after the last tensor")
    case("whose tensor was relabelled q8_0 (the data no longer tiles)",
         lambda m: m.tensors[0].update(type=8), "bytes of no tensor before tensor")
    for v in (0, -1, 99):
        def types(m, v=v):
            toks, scores, ty = mg.spm_vocab()
            ty = list(ty)
            ty[5] = v
            mg.set_meta(m, "tokenizer.ggml.token_type", mg.ARR, (mg.I32, ty))
        case(f"with a token_type of {v}", types, f"token_type of token 5 is {v}")
    case("with a NUL in general.architecture", lambda m: mg.set_meta(m, "general.architecture", mg.STR, "llama\0x"),
         "general.architecture has a NUL byte")
    case("with tokenizer.ggml.pre a number", lambda m: m.meta.append(("tokenizer.ggml.pre", mg.U32, 7)),
         "tokenizer.ggml.pre is a u32, expected a string")
    case("with block_count 2^64 - 1", lambda m: mg.set_meta(m, "llama.block_count", mg.U64, (1 << 64) - 1)
         if hasattr(mg, "U64") else None, "block_count is 18446744073709551615")


def hf_silent(sm, tmp, shared):
    """14. Hugging Face directories that were accepted though they should not be."""
    src = os.path.join(shared, "models", "tiny-gpt2")
    if not os.path.isdir(src):
        skip("14. Hugging Face silent accepts", f"{src} is absent")
        return

    def variant(name, cfg=None, tokcfg=None, tok=None, st=None, tokenizer_json=False):
        d = writable_copy(src, os.path.join(tmp, f"hf-{name}"))
        for fname, edit in (("config.json", cfg), ("tokenizer_config.json", tokcfg), ("tokenizer.json", tok)):
            if edit:
                with open(os.path.join(d, fname)) as f:
                    j = json.load(f)
                edit(j)
                with open(os.path.join(d, fname), "w") as f:
                    json.dump(j, f)
        if st:
            p = os.path.join(d, "model.safetensors")
            raw = open(p, "rb").read()
            n = int.from_bytes(raw[:8], "little")
            h = json.loads(raw[8:8 + n])
            st(h)
            hb = json.dumps(h).encode()
            hb += b" " * ((8 - len(hb) % 8) % 8)
            with open(p, "wb") as f:
                f.write(len(hb).to_bytes(8, "little") + hb + raw[8 + n:])
        if tokenizer_json:
            for n in ("vocab.json", "merges.txt"):
                os.remove(os.path.join(d, n))
        return d

    cases = [
        ("scale_attn_by_inverse_layer_idx true", dict(cfg=lambda c: c.update(scale_attn_by_inverse_layer_idx=True)),
         "config.json: scale_attn_by_inverse_layer_idx true is not supported"),
        ("a numeric eos_token", dict(tokcfg=lambda c: c.update(eos_token=5)),
         "tokenizer_config.json: eos_token must be a string"),
        ("add_bos_token \"yes\"", dict(tokcfg=lambda c: c.update(add_bos_token="yes")),
         "tokenizer_config.json: add_bos_token must be true or false"),
        ("safetensors __metadata__ as a list", dict(st=lambda h: h.update(__metadata__=["a", "b"])),
         "model.safetensors: __metadata__ must be an object of strings"),
        ("two added tokens with one id", dict(tok=lambda t: t["added_tokens"].append(dict(t["added_tokens"][0], content="<|x|>")),
                                               tokenizer_json=True), "added_tokens[1] has id 50256"),
        ("an unknown decoder in a GPT-2 tokenizer.json", dict(tok=lambda t: t.update(decoder={"type": "Frobnicate"}),
                                                              tokenizer_json=True), "decoder type \"Frobnicate\" is not supported"),
    ]
    for what, kw, want in cases:
        d = variant(what.split()[0] + str(len(what)), **kw)
        for args in (["generate", "-m", d, "-p", "Hi", "-n", "2"], ["convert", d, d + "-out"]):
            rc, out, err = run([sm] + args)
            report(rc == 1 and want in err and one_line(err) and not os.path.exists(d + "-out"),
                   f"14. {args[0]} of a Hugging Face directory with {what}: refused", f"rc={rc} {err[:150]}")
    d = variant("unknown-eos", tokcfg=lambda c: c.update(eos_token="<|nope|>", chat_template="{{ messages[0].content }}"))
    rc, out, err = run([sm, "generate", "-m", d, "--chat", "-p", "Hi", "-n", "2"])
    report(rc == 0 and "eos_token \"<|nope|>\" is not a token" in err,
           "14. tokenizer_config.json's eos_token not in the vocabulary: said (the template prints it as text)", err[:150])


# ---- 15. GGUF export of a Llama whose heads are not hidden / heads wide
def head_dim_export(sm, tmp, shared):
    try:
        import numpy as np
    except ImportError:
        skip("15. head_dim export", "NumPy is not installed")
        return
    src = os.path.join(shared, "models", "tiny-gpt2")
    if not os.path.isdir(src):
        skip("15. head_dim export", f"{src} is absent (its tokenizer)")
        return
    from st_file import safetensors_bytes
    C, H, KVH, hd, F, L, V = 64, 3, 3, 24, 96, 2, 50257
    rng = np.random.default_rng(7)
    r = lambda *s: (rng.standard_normal(s).astype("<f4") * np.float32(0.05)).tobytes()  # noqa: E731
    ts = [("model.embed_tokens.weight", "F32", [V, C], r(V, C)), ("model.norm.weight", "F32", [C], np.ones(C, "<f4").tobytes())]
    for i in range(L):
        p = f"model.layers.{i}."
        ts += [(p + "input_layernorm.weight", "F32", [C], np.ones(C, "<f4").tobytes()),
               (p + "post_attention_layernorm.weight", "F32", [C], np.ones(C, "<f4").tobytes()),
               (p + "self_attn.q_proj.weight", "F32", [H * hd, C], r(H * hd, C)),
               (p + "self_attn.k_proj.weight", "F32", [KVH * hd, C], r(KVH * hd, C)),
               (p + "self_attn.v_proj.weight", "F32", [KVH * hd, C], r(KVH * hd, C)),
               (p + "self_attn.o_proj.weight", "F32", [C, H * hd], r(C, H * hd)),
               (p + "mlp.gate_proj.weight", "F32", [F, C], r(F, C)), (p + "mlp.up_proj.weight", "F32", [F, C], r(F, C)),
               (p + "mlp.down_proj.weight", "F32", [C, F], r(C, F))]
    d = os.path.join(tmp, "hd24")
    os.makedirs(d)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(safetensors_bytes(ts))
    cfg = {"model_type": "llama", "hidden_size": C, "num_attention_heads": H, "num_key_value_heads": KVH,
           "head_dim": hd, "intermediate_size": F, "num_hidden_layers": L, "vocab_size": V,
           "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": True, "bos_token_id": 50256, "eos_token_id": 50256}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    for n in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(src, n), os.path.join(d, n))
    g = os.path.join(tmp, "hd24.gguf")
    rc, out, err = run([sm, "convert", d, g])
    a = run([sm, "generate", "-m", d, "-p", "Hello", "-n", "8", "--temp", "0"])
    b = run([sm, "generate", "-m", g, "-p", "Hello", "-n", "8", "--temp", "0"]) if rc == 0 else (None, b"", "")
    report(rc == 0 and a[0] == 0 and a[1] == b[1] and b[0] == 0,
           "15. a Llama of hidden 64, 3 heads of 24: exported to GGUF (attention.key_length) and read back, the same text",
           f"rc={rc} {err[:120]} {a[2][:80]} {b[2][:80]}")


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
        mg = gguf_alignment(sm, tmp)
        gguf_convert_checks(sm, tmp, mg)
        gguf_export_refusal(sm, tmp, a.shared)
        gguf_keeps_types(sm, tmp, a.shared)
        convert_leftovers(sm, tmp, a.shared)
        chat_files(sm, tmp)
        normalizer_growth(sm, tmp, a.shared)
        messages(sm, tmp)
        gguf_silent(sm, tmp, mg)
        hf_silent(sm, tmp, a.shared)
        head_dim_export(sm, tmp, a.shared)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return T.close()


if __name__ == "__main__":
    sys.exit(main())
