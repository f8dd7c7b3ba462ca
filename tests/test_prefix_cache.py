#!/usr/bin/python3
"""Prefix reuse and the prompt cache (--cache-ram, --prompt-cache), end to end.

- --batch records sharing prefixes of many lengths (ending anywhere in a
  block, inside a multi-byte character, prompts that are exactly a prefix
  of another, duplicates) give byte for byte the records of a run without
  the cache at one record at a time, at --parallel 1/3/8, 1 and 2 threads,
  greedy and sampled (and every kernel table greedy), on a byte-level GPT, Llama GGUFs
  (stories260K, grouped-query attention, SentencePiece; a random Q8_0
  GPT-2 with GPT-2's BPE) and tiny-gpt2; and records run alone with
  generate -p give the same text. The cache serves tokens (tokens_cached).
- A job of unrelated prompts stores one block per prompt once 16 in a row
  stored blocks none reused (--stats: not stored), and records sharing an
  instruction after them still reuse it, with the uncached run's texts.
- --prompt-cache for generate, --batch and chat: a second run loads the
  prompt instead of prefilling it and gives the same text; bad files
  (truncated, corrupted, another model, KV type, version, not a prompt
  cache, a directory, an unwritable place) get one line and are never used.

    test_prefix_cache.py --bin build --shared ../shared --models build/test-models
"""
import argparse
import glob
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_file import with_chat_template  # noqa: E402
from tally import Tally  # noqa: E402

T = Tally("prefix")


def report(ok, name, detail=""):
    T.report(ok, name, "" if ok else detail)

BASE = ("Once upon a time, a café in Zürich sold 日本 tea to every traveller who came by, "
        "and the owner wrote each name — Zoë, José, Łukasz — in a long book. ") * 3
TAILS = ["", "a", "ab", "abc", "abcd", " What happened next?", "è!", " Zü", " 日本語", "\n\nAnswer:"]


def run(args, data=None):
    return subprocess.run(args, input=data, capture_output=True, timeout=1800)


def records(max_bytes):
    """Prompts sharing prefixes of many byte lengths, cut anywhere (also inside a character)."""
    raw = BASE.encode()
    cuts = [0, 5, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65, 70, 79, 80, 81, 100, 127, 128,
            129, 150, 200, 255, 256, 257, 300]
    out = []
    for i, k in enumerate(cuts):
        for j in (i % len(TAILS), (i * 3 + 1) % len(TAILS)):
            t = TAILS[j].encode()
            k2 = min(k, max_bytes - len(t))
            p = raw[:k2] + t
            if not p:
                p = b"x"
            out.append(p.decode("utf-8", errors="surrogateescape"))
    out += out[:4]  # duplicates
    return out


def write_batch(path, prompts):
    with open(path, "wb") as f:
        for p in prompts:
            # prompts cut inside a character: the record's bytes are those bytes (lone surrogates
            # are not JSON text, so such a prompt goes as a plain line)
            b = p.encode("utf-8", errors="surrogateescape")
            try:
                b.decode("utf-8")
                f.write(json.dumps({"prompt": p}).encode() + b"\n")
            except UnicodeDecodeError:
                f.write(b.replace(b"\n", b" ") + b"\n")


def batch(sm, model, path, *flags):
    p = run([sm, "generate", "-m", model, "--batch", path, "-n", "10", *flags])
    recs = [json.loads(x) for x in p.stdout.splitlines()]
    return p, recs


def texts(recs):
    return [r.get("text", r.get("error")) for r in recs]


def kernels(sm):
    have = []
    for k in ("scalar", "avx2", "avx512"):
        q = run([sm, "generate", "-m", "models/default", "-p", "x", "-n", "1", "--kernels", k])
        if q.returncode == 0:
            have.append(k)
    if len(have) >= 2:  # a composed table: prefill from the best, decoding from the reference
        have.append(f"{have[-1]},rows={have[0]},qrows={have[0]}")
    return have


def batch_exactness(sm, tmp, models):
    ks = kernels(sm)
    for name, model, max_bytes, extra in models:
        path = os.path.join(tmp, name + ".in")
        prompts = records(max_bytes)
        write_batch(path, prompts)
        for sampling in (["--temp", "0"], ["--temp", "0.9", "--seed", "7"]):
            p0, ref = batch(sm, model, path, "--cache-ram", "0", "--parallel", "1", *sampling, *extra)
            ok = p0.returncode == 0 and len(ref) == len(prompts) and all("text" in r for r in ref)
            report(ok and all(r["tokens_cached"] == 0 for r in ref),
                     f"{name} {sampling[1]}: reference batch without the cache ({len(prompts)} records)",
                     p0.stderr.decode()[:300])
            if not ok:
                continue
            configs = [("1", "1", None), ("3", "2", None), ("8", "2", None), ("8", "1", None)]
            # every table greedy (a table's rounding is what could differ; the sampled runs
            # above already take each sampler's state through reused prefixes)
            configs += [("5", "2", k) for k in ks] if sampling[1] == "0" else []
            if os.environ.get("SM_SANITIZED"):  # make asan: the paths once (every table on the first model)
                configs = [("1", "1", None), ("8", "2", None)] + \
                    ([("5", "2", k) for k in ks if "=" not in k] if model == models[0][1] and sampling[1] == "0"
                     else [])
            for par, th, k in configs:
                flags = ["--parallel", par, "-t", th, "--stats", *sampling, *extra]
                if k:
                    flags += ["--kernels", k]
                if k:  # the reference with the same kernels (tables may round differently)
                    pk, refk = batch(sm, model, path, "--cache-ram", "0", "--parallel", "1", *sampling,
                                     *extra, "--kernels", k)
                else:
                    refk = ref
                p, got = batch(sm, model, path, *flags)
                served = sum(r.get("tokens_cached", 0) for r in got)
                diff = [i for i, (a, b) in enumerate(zip(texts(refk), texts(got))) if a != b]
                report(p.returncode == 0 and len(got) == len(refk) and not diff and served > 0,
                         f"{name} {sampling[1]} --parallel {par} -t {th}{' --kernels ' + k if k else ''}: "
                         f"every record equals the uncached run ({served} prompt tokens from the cache)",
                         f"rc {p.returncode}, differ {diff[:5]}: "
                         f"{[(prompts[i][:40], refk[i], got[i]) for i in diff[:2]]} {p.stderr.decode()[-300:]}")
                if par == "8" and th == "2" and not k:
                    err = p.stderr.decode()
                    line = [x for x in err.splitlines() if x.startswith("cache:")]
                    report(line and "records reused a prefix" in line[0] and
                             sum(1 for r in got if r["tokens_cached"] > 0) > len(got) // 2,
                             f"{name}: --stats reports the cache, most records reused a prefix",
                             str(line))
                    # prompts of 64 tokens and more share their prefix's keys and values with
                    # another slot (or keep their slot's) instead of copying them in
                    m = re.search(r"\((\d+) read in place", line[0]) if line else None
                    report(m and int(m.group(1)) >= 64,
                             f"{name}: --stats counts prefix tokens read in place, not copied",
                             str(line))
        # records alone: generate -p gives the text the batch gave them with their prefixes cached
        bad = []
        _, cached = batch(sm, model, path, "--temp", "0", "--parallel", "4", *extra)
        for i in range(0, len(prompts), 7):
            b = prompts[i].encode("utf-8", errors="surrogateescape")
            try:
                b.decode("utf-8")
            except UnicodeDecodeError:
                continue
            j = run([sm, "generate", "-m", model, "-p", prompts[i], "-n", "10", "--temp", "0", "--json", *extra])
            a = json.loads(j.stdout)["text"] if j.returncode == 0 else None
            if a != cached[i].get("text"):
                bad.append((i, a, cached[i].get("text")))
        report(not bad, f"{name}: records with cached prefixes equal generate -p alone", str(bad[:2]))


def held_back(sm, tmp, model):
    words = "river city letter green market value short answer record field old new".split()
    unrelated = [f"{i:03d} " + " ".join(words[(i * 7 + k * 5) % len(words)] for k in range(14))
                 for i in range(40)]
    instr = "Rewrite the item below in plain words, keep every number, and answer in one line. Item: "
    shared = [instr + f"#{i} " + words[i % len(words)] for i in range(24)]
    path = os.path.join(tmp, "held.in")
    write_batch(path, unrelated + shared)
    p0, ref = batch(sm, model, path, "--cache-ram", "0", "--parallel", "1", "--temp", "0")
    p, got = batch(sm, model, path, "--parallel", "4", "--stats", "--temp", "0")
    line = [x for x in p.stderr.decode().splitlines() if x.startswith("cache:")]
    m = re.search(r"(\d+) not stored", line[0]) if line else None
    report(p0.returncode == 0 and p.returncode == 0 and len(got) == len(ref) == 64 and
           texts(got) == texts(ref),
           "unrelated prompts, then an instruction: every record equals the uncached run",
           f"{p.stderr.decode()[-300:]}")
    report(m and int(m.group(1)) > 0, "unrelated prompts: --stats counts blocks not stored", str(line))
    reused = sum(1 for r in got[40:] if r.get("tokens_cached", 0) >= 64)
    report(reused >= 20, f"records sharing an instruction after them reuse it ({reused} of 24)",
           str([r.get("tokens_cached") for r in got[40:]]))


def pcache_generate(sm, tmp, model, name):
    pc = os.path.join(tmp, name + ".pcache")
    prompt = BASE[:180]
    g = [sm, "generate", "-m", model, "-n", "12", "--temp", "0", "--json"]
    ref = run(g + ["-p", prompt])
    want = json.loads(ref.stdout)["text"]
    first = run(g + ["-p", prompt, "--prompt-cache", pc])
    j1 = json.loads(first.stdout) if first.returncode == 0 else {}
    report(first.returncode == 0 and os.path.exists(pc) and j1.get("text") == want and
             j1.get("tokens_cached") == 0, f"{name}: generate --prompt-cache makes the file on a first run",
             first.stderr.decode()[:300])
    second = run(g + ["-p", prompt, "--prompt-cache", pc])
    j2 = json.loads(second.stdout) if second.returncode == 0 else {}
    n = j2.get("tokens_prompt", 0)
    report(j2.get("text") == want and j2.get("tokens_cached", 0) >= n - 20 and j2["tokens_cached"] > 0,
             f"{name}: the second run loads {j2.get('tokens_cached')} of {n} prompt tokens, same text",
             str(j2)[:200])
    for what, p2 in (("a longer prompt", prompt + " More words follow here."),
                     ("a prompt that is a prefix of the saved one", prompt[:100]),
                     ("a prompt that differs midway", prompt[:90] + "Something else entirely.")):
        r = run(g + ["-p", p2])
        c = run(g + ["-p", p2, "--prompt-cache", pc, "--prompt-cache-ro"])
        jr = json.loads(r.stdout)
        jc = json.loads(c.stdout) if c.returncode == 0 else {}
        report(jc.get("text") == jr["text"], f"{name}: {what}: same text from the cache "
                 f"({jc.get('tokens_cached')} tokens loaded)", c.stderr.decode()[:200])
    report(not glob.glob(pc + ".tmp*"), f"{name}: no temporary file left beside the cache")
    return pc, prompt, want


def pcache_bad(sm, tmp, model, other, pc, prompt, want):
    g = [sm, "generate", "-m", model, "-n", "12", "--temp", "0", "--json", "-p", prompt]
    good = open(pc, "rb").read()

    def attempt(data, *flags, name="c.bin"):
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        p = run(g + ["--prompt-cache", path, *flags])
        return p, path

    cases = [("truncated", good[:len(good) // 2], "truncated"),
             ("a byte flipped", good[:-40] + bytes([good[-40] ^ 0x10]) + good[-39:], "corrupted"),
             ("another version", good[:8] + struct.pack("<I", 99) + good[12:], "version 99"),
             ("trailing bytes", good + b"\0" * 8, "trailing bytes"),
             ("a token out of the vocabulary", good[:168] + struct.pack("<i", 10 ** 8) + good[172:], "corrupted")]
    for what, data, needle in cases:
        p, path = attempt(data)
        j = json.loads(p.stdout) if p.returncode == 0 else {}
        err = p.stderr.decode()
        rewritten = open(path, "rb").read() == good
        report(p.returncode == 0 and j.get("tokens_cached") == 0 and j.get("text") == want and
                 needle in err and path in err and len(err.strip().splitlines()) == 1 and rewritten,
                 f"prompt cache {what}: one notice naming the file, not used, rewritten", err[:200])
        p, path = attempt(data, "--prompt-cache-ro")
        report(p.returncode == 0 and open(path, "rb").read() == data and needle in p.stderr.decode(),
                 f"prompt cache {what} with --prompt-cache-ro: not used, left as it was")
    # another model's, and another KV type's
    p = run([sm, "generate", "-m", other, "-p", prompt, "-n", "3", "--prompt-cache", pc, "--prompt-cache-ro"])
    report(p.returncode == 0 and b"another model" in p.stderr and open(pc, "rb").read() == good,
             "prompt cache of another model: noticed, not used", p.stderr.decode()[:200])
    p = run(g + ["--prompt-cache", pc, "--prompt-cache-ro", "--kv-type", "f16"])
    report(p.returncode == 0 and b"--kv-type f16" in p.stderr and json.loads(p.stdout)["tokens_cached"] == 0,
             "prompt cache of another KV type: noticed, not used", p.stderr.decode()[:200])
    # not a prompt cache: refused, never overwritten; a directory; an unwritable place
    p, path = attempt(b"my notes, not a cache\n" * 10, name="notes.txt")
    report(p.returncode == 1 and b"not a smallmind prompt cache" in p.stderr and p.stdout == b"" and
             open(path, "rb").read() == b"my notes, not a cache\n" * 10,
             "a file that is not a prompt cache: exit 1, left untouched", p.stderr.decode()[:200])
    p = run(g + ["--prompt-cache", tmp])
    report(p.returncode == 1 and b"not a regular file" in p.stderr and p.stdout == b"",
             "a directory as the prompt cache: exit 1", p.stderr.decode()[:200])
    p = run(g + ["--prompt-cache", os.path.join(tmp, "no", "such", "dir", "c.bin")])
    report(p.returncode == 1 and b"cannot write prompt cache" in p.stderr and p.stdout == b"",
             "a prompt cache that cannot be written: exit 1 before generating", p.stderr.decode()[:200])
    p = run([sm, "generate", "-m", model, "-p", "x", "--prompt-cache-ro"])
    report(p.returncode == 2 and b"--prompt-cache-ro goes with --prompt-cache" in p.stderr,
             "--prompt-cache-ro alone: usage error")
    for flags, needle in ((["--cache-ram", "-1", "--batch", pc], b"--cache-ram"),
                          (["--cache-ram", "8", "-p", "x"], b"--cache-ram goes with --batch")):
        p = run([sm, "generate", "-m", model, *flags])
        report(p.returncode == 2 and needle in p.stderr, f"{' '.join(flags[:2])}: usage error",
                 p.stderr.decode()[:200])


def pcache_batch(sm, tmp, model):
    path = os.path.join(tmp, "pcb.in")
    pre = BASE[:160]
    with open(path, "w") as f:
        for i in range(10):
            f.write(json.dumps({"prompt": pre + f" Item {i}: number {i * 7}."}) + "\n")
    pc = os.path.join(tmp, "batch.pcache")
    _, ref = batch(sm, model, path, "--temp", "0", "--cache-ram", "0")
    p1, r1 = batch(sm, model, path, "--temp", "0", "--prompt-cache", pc)
    p2, r2 = batch(sm, model, path, "--temp", "0", "--prompt-cache", pc, "--parallel", "3")
    ok = p1.returncode == p2.returncode == 0 and texts(r1) == texts(ref) == texts(r2)
    report(ok and os.path.exists(pc) and r1[0]["tokens_cached"] == 0 and r2[0]["tokens_cached"] > 0 and
             all(b["tokens_cached"] >= a["tokens_cached"] for a, b in zip(r1, r2)),
             "--batch --prompt-cache: the second run's first record loads the shared prefix, same records",
             f"{[r['tokens_cached'] for r in r1]} {[r['tokens_cached'] for r in r2]} {p2.stderr.decode()[:200]}")


def pcache_chat(sm, tmp, shared):
    src = os.path.join(shared, "models", "tiny-gpt2")
    qcfg = os.path.join(shared, "models", "tokenizers", "qwen2_5", "tokenizer_config.json")
    if not os.path.isdir(src) or not os.path.exists(qcfg):
        T.skip("chat --prompt-cache", "../shared's tiny-gpt2 or Qwen 2.5 config is absent")
        return
    d = with_chat_template(src, qcfg, os.path.join(tmp, "tg2"))
    pc = os.path.join(tmp, "chat.pcache")
    system = "You answer in one short sentence, and you are always polite to the user. " * 2
    c = [sm, "chat", "-m", d, "--temp", "0", "-n", "8", "--json", "--system", system]
    ref = run(c, b"What is 2+2?\nAnd 3+3?\n")
    a = run(c + ["--prompt-cache", pc], b"What is 2+2?\nAnd 3+3?\n")
    b = run(c + ["--prompt-cache", pc], b"What is 2+2?\nAnd 3+3?\n")
    rr = [json.loads(x) for x in ref.stdout.splitlines()]
    ra = [json.loads(x) for x in a.stdout.splitlines()]
    rb = [json.loads(x) for x in b.stdout.splitlines()]
    ok = len(rr) == len(ra) == len(rb) == 2 and texts(rr) == texts(ra) == texts(rb)
    report(ok and ra[0]["tokens_reused"] == 0 and rb[0]["tokens_reused"] >= 16,
             "chat --prompt-cache: the second session's first turn loads the system prompt, same replies",
             f"{a.stderr.decode()[:200]} {[r.get('tokens_reused') for r in rb]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--models", required=True)
    a = ap.parse_args()
    sm = os.path.join(a.bin, "smallmind")
    gg = os.path.join(a.shared, "models", "gguf")
    models = [("default (byte GPT)", "models/default", 200, [])]
    for f, mb in (("stories260K-f32.gguf", 400), ("gpt2-rand-256-q8_0.gguf", 400)):
        if os.path.exists(os.path.join(gg, f)):
            models.append((f, os.path.join(gg, f), mb, []))
        else:
            T.skip(f"--batch with the prefix cache on {f}", "../shared/models/gguf lacks it")
    with tempfile.TemporaryDirectory() as tmp:
        batch_exactness(sm, tmp, models)
        held_back(sm, tmp, "models/default")
        pc, prompt, want = pcache_generate(sm, tmp, "models/default", "default")
        other = os.path.join(a.models, "seed")
        pcache_bad(sm, tmp, "models/default", other, pc, prompt, want)
        st = os.path.join(gg, "stories260K-f32.gguf")
        if os.path.exists(st):
            pcache_generate(sm, tmp, st, "stories260K")
        pcache_batch(sm, tmp, "models/default")
        pcache_chat(sm, tmp, a.shared)
    return T.close()


if __name__ == "__main__":
    sys.exit(main())
