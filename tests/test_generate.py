#!/usr/bin/python3
"""generate: --stop, --json, --truncate, --batch (plain and JSONL), --shard.

Every batch record must equal the same prompt run alone with the same flags;
outputs are parsed as JSON (Python's json module), never grepped.

    test_generate.py --bin build --model models/default
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tally import Tally  # noqa: E402


TALLY = Tally("generate")
report, skip = TALLY.report, TALLY.skip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    a = ap.parse_args()
    sm = os.path.join(a.bin, "smallmind")
    M = ["-m", a.model]

    def gen(*args, inp=None):
        return subprocess.run([sm, "generate", *M, *args], input=inp, capture_output=True)

    def alone(prompt, *flags):
        p = gen("-p", prompt, "--json", *flags)
        return json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr.decode()}

    # --json for one generation, and its text equals the plain output
    plain = gen("-p", "And God said", "-n", "60").stdout
    j = alone("And God said", "-n", "60")
    report(j.get("text", "").encode() == plain and j["tokens_generated"] == 60 and
           j["tokens_prompt"] == 12 and j["finish_reason"] == "length" and "timing" in j,
           "--json: text, counts, finish reason, timing", repr(j.get("text"))[:60])
    p = gen("-p", "And God said", "-n", "5", "--output-format", "json")
    report(json.loads(p.stdout)["tokens_generated"] == 5, "--output-format json")

    # --stop: the text up to the first stop string, which is not emitted
    full = gen("-p", "And God said", "-n", "200", "--temp", "0").stdout.decode()
    for stop in ["LORD", "\n", "h"]:
        want = full[:full.find(stop)] if stop in full else full
        p = gen("-p", "And God said", "-n", "200", "--temp", "0", "--stop", stop, "--stop", "zzzz")
        j = alone("And God said", "-n", "200", "--temp", "0", "--stop", stop)
        report(stop in full and p.stdout.decode() == want and j["text"] == want and
               j["finish_reason"] == "stop", f"--stop {stop!r}", repr(want)[:50])
    p = gen("-p", "x", "--stop", "")
    report(p.returncode == 2 and b"--stop expects 1 to 64 bytes" in p.stderr, "--stop '' is refused")

    # --truncate: too long is an error with both counts; with the flag the end is kept
    long_prompt = "In the beginning " * 40  # 680 bytes > context 256
    p = gen("-p", long_prompt, "-n", "10")
    report(p.returncode == 1 and b"prompt is 680 tokens, context is 256" in p.stderr and
           len(p.stderr.strip().split(b"\n")) == 1, "over-long prompt: error with both counts")
    j = alone(long_prompt, "-n", "10", "--truncate")
    report(j.get("tokens_prompt") == 246 and j.get("tokens_truncated") == 434 and
           j.get("tokens_generated") == 10, "--truncate keeps the last 246 tokens", str(j)[:80])
    j2 = alone(long_prompt[-246:], "-n", "10")
    report(j.get("text") == j2.get("text"), "--truncate equals the prompt's tail run alone")

    # --batch: plain and JSONL records, input order, each equal to running alone
    lines = [
        "And God said",
        json.dumps({"id": "a", "prompt": "In the beginning", "max_tokens": 30, "stop": ["\n"]}),
        json.dumps({"prompt": 5}),
        "",
        json.dumps({"id": 9, "prompt": "Blessed are the", "temperature": 0, "max_tokens": 25}),
        json.dumps({"id": "s", "prompt": "And Moses", "seed": 7, "top_k": 5, "top_p": 0.5}),
        "{not json",
        json.dumps({"id": "u", "prompt": "x", "bogus": 1}),
        json.dumps({"id": "z", "prompt": "Unicode: \u00e9\u4e2d\U0001F600", "max_tokens": 8}),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        batch = os.path.join(tmp, "in.jsonl")
        with open(batch, "w") as f:
            f.write("\n".join(lines) + "\n")
        p = subprocess.run([sm, "generate", *M, "--batch", batch, "-n", "40"], capture_output=True)
        recs = [json.loads(x) for x in p.stdout.decode().splitlines()]
        report(p.returncode == 1 and len(recs) == 8, "batch: one record per non-empty line, exit 1 "
               "when one failed", f"exit {p.returncode}, {len(recs)} records")
        ids = [r["id"] for r in recs]
        report(ids == [1, "a", 3, 9, "s", 7, "u", "z"], "batch: input order and ids", str(ids))
        errs = {r["id"]: (r.get("line"), r.get("error")) for r in recs if "error" in r}
        report(errs.get(3, (0,))[0] == 3 and "prompt" in errs[3][1] and errs.get(7, (0,))[0] == 7
               and "invalid JSON" in errs[7][1] and errs.get("u", (0, ""))[0] == 8 and
               "bogus" in errs["u"][1], "batch: error records name the line and the problem",
               str(errs)[:120])
        same = [
            (recs[0], alone("And God said", "-n", "40")),
            (recs[1], alone("In the beginning", "-n", "30", "--stop", "\n")),
            (recs[3], alone("Blessed are the", "-n", "25", "--temp", "0")),
            (recs[4], alone("And Moses", "-n", "40", "-s", "7", "--top-k", "5", "--top-p", "0.5")),
            (recs[7], alone("Unicode: \u00e9\u4e2d\U0001F600", "-n", "8")),
        ]
        bad = [(r.get("id"), r.get("text"), s.get("text")) for r, s in same
               if (r.get("text"), r.get("tokens_generated"), r.get("finish_reason")) !=
               (s.get("text"), s.get("tokens_generated"), s.get("finish_reason"))]
        report(not bad, "batch: every record equals the prompt run alone with the same settings",
               str(bad)[:200])

        # --parallel: records decoded together equal themselves decoded alone, whatever N
        par = []
        for i in range(14):
            r = {"id": f"p{i}", "prompt": ["And God said", "Jesus wept", "Blessed", "x",
                                            "In the beginning God created"][i % 5] + " " * (i % 3)}
            if i % 2: r["seed"] = 100 + i
            if i % 3 == 1: r["temperature"] = 0
            if i % 4 == 2: r["top_k"] = 3 + i
            if i % 5 == 3: r["top_p"] = 0.6
            if i % 6 == 4: r["stop"] = ["e", "LORD"]
            r["max_tokens"] = [7, 30, 1, 45][i % 4]
            par.append(r)
        par.append({"id": "full", "prompt": "And " * 60, "max_tokens": 100})  # context 256 fills
        with open(batch, "w") as f:
            f.write("\n".join(json.dumps(r) for r in par) + "\n")
        runs = {}
        for n in ["1", "4", "15"]:
            p = subprocess.run([sm, "generate", *M, "--batch", batch, "-n", "40", "--parallel", n,
                                "--stats"], capture_output=True)
            runs[n] = [json.loads(x) for x in p.stdout.decode().splitlines()]
            for r in runs[n]:  # timing and the tokens the prefix cache served depend on the run
                r.pop("timing", None), r.pop("tokens_cached", None)
            report(p.returncode == 0 and len(runs[n]) == len(par) and
                   [r["id"] for r in runs[n]] == [r["id"] for r in par] and
                   f"{n} decoded together".encode() in p.stderr,
                   f"--parallel {n}: every record, in input order", p.stderr.decode()[-120:])
        report(runs["1"] == runs["4"] == runs["15"], "--parallel 1, 4 and 15 give identical records")
        # no --parallel: as many as there are records (up to 32) when memory allows, same records
        p = subprocess.run([sm, "generate", *M, "--batch", batch, "-n", "40", "--stats"], capture_output=True)
        auto = [json.loads(x) for x in p.stdout.decode().splitlines()]
        for r in auto:
            r.pop("timing", None), r.pop("tokens_cached", None)
        report(p.returncode == 0 and f"{len(par)} decoded together".encode() in p.stderr and auto == runs["1"],
               f"--batch without --parallel: all {len(par)} records together, each as with --parallel 1",
               p.stderr.decode()[-120:])
        full = runs["15"][-1]
        # 256 positions, plus the last token sampled from position 255 (it needs no slot)
        report(full["finish_reason"] == "length" and full["tokens_prompt"] + full["tokens_generated"]
               == 257, "--parallel: a record that fills the context ends with length", str(full)[:80])
        bad = []
        for r, got in zip(par, runs["15"]):
            flags = ["-n", str(r["max_tokens"])]
            for key, flag in [("seed", "-s"), ("temperature", "--temp"), ("top_k", "--top-k"),
                              ("top_p", "--top-p")]:
                if key in r: flags += [flag, str(r[key])]
            for st in r.get("stop", []): flags += ["--stop", st]
            want = alone(r["prompt"], *flags)
            want.pop("timing", None), want.pop("load_ms", None), want.pop("tokens_cached", None)
            got.pop("id", None), got.pop("line", None)
            if want != got: bad.append((r["id"], want, got))
        report(not bad, "--parallel 15: each record equals its prompt generated alone", str(bad)[:300])
        p = gen("-p", "x", "--parallel", "2")
        report(p.returncode == 2 and b"--parallel goes with --batch" in p.stderr, "--parallel without --batch")
        p = gen("--batch", batch, "--parallel", "0")
        report(p.returncode == 2 and b"--parallel expects a whole number from 1 to 256" in p.stderr,
               "--parallel 0 is refused")

        # all good: exit 0; plain lines from stdin
        p = subprocess.run([sm, "generate", *M, "--batch", "-", "-n", "5"],
                           input=b"And\nGod\r\nsaid", capture_output=True)
        recs = [json.loads(x) for x in p.stdout.decode().splitlines()]
        report(p.returncode == 0 and [r["id"] for r in recs] == [1, 2, 3] and
               all(r["tokens_generated"] == 5 for r in recs), "batch from stdin, CRLF, no final newline")

        # shards: disjoint, together the whole batch, each in input order
        with open(batch, "w") as f:
            f.write("".join(json.dumps({"id": i, "prompt": f"Verse {i}", "max_tokens": 3}) + "\n"
                            for i in range(7)))
        got = []
        for s in ["1/3", "2/3", "3/3"]:
            p = subprocess.run([sm, "generate", *M, "--batch", batch, "--shard", s],
                               capture_output=True)
            got.append([json.loads(x)["id"] for x in p.stdout.decode().splitlines()])
        report(got == [[0, 3, 6], [1, 4], [2, 5]], "--shard 1/3, 2/3, 3/3", str(got))
        p = gen("-p", "x", "--shard", "1/2")
        report(p.returncode == 2 and b"--shard goes with --batch" in p.stderr, "--shard without --batch")
        p = subprocess.run([sm, "generate", *M, "--batch", batch, "--shard", "3/2"], capture_output=True)
        report(p.returncode == 2 and b"--shard expects I/N" in p.stderr, "--shard 3/2 is refused")

        # closed stdout: quiet, exit 0
        big = os.path.join(tmp, "big.txt")
        with open(big, "w") as f:
            f.write("And God said\n" * 50)
        p = subprocess.run(f"'{sm}' generate -m '{a.model}' --batch '{big}' -n 50 | head -c 10",
                           shell=True, capture_output=True, executable="/bin/bash")
        report(len(p.stdout) == 10 and p.stderr == b"", "batch into a closed pipe: quiet")
        p = subprocess.run(f"'{sm}' generate -m '{a.model}' --batch '{big}' -n 50 | head -c 10; "
                           "exit ${PIPESTATUS[0]}", shell=True, capture_output=True,
                           executable="/bin/bash")
        report(p.returncode == 0, "batch into a closed pipe: exit 0", f"exit {p.returncode}")

        # Ctrl-C: whole records only, exit 130
        proc = subprocess.Popen([sm, "generate", *M, "--batch", big, "-n", "200"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first = proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        # the rest through the same buffered reader: communicate() reads the descriptor and
        # would skip what readline() buffered (records done together arrive together)
        rest = proc.stdout.read()
        err = proc.stderr.read()
        proc.wait()
        out = (first + rest).decode()
        ok_lines = all(json.loads(x)["tokens_generated"] >= 0 for x in out.splitlines())
        report(proc.returncode == 130 and out.endswith("\n") and ok_lines and
               b"interrupted" in err, "batch Ctrl-C: only whole records, exit 130",
               f"exit {proc.returncode}, {len(out.splitlines())} records")

    p = gen("--batch", "-", inp=b'{"prompt": "a\\u0000b"}\n{"prompt": "a\\\\u0000b", "max_tokens": 2}\n')
    recs = [json.loads(x) for x in p.stdout.decode().splitlines()]
    report(len(recs) == 2 and "NUL" in recs[0].get("error", "") and recs[1].get("tokens_prompt") == 8,
           "batch: an escaped NUL is refused, an escaped backslash is not", str(recs)[:100])
    p = gen("--batch", "/nonexistent/x")
    report(p.returncode == 1 and b"cannot open '/nonexistent/x'" in p.stderr, "batch: missing file")
    p = gen("--batch", "-", "-p", "x")
    report(p.returncode == 2 and b"--batch takes the prompts from its file" in p.stderr,
           "batch with -p is a usage error")
    p = gen("-p", "x", "--output-format", "yaml")
    report(p.returncode == 2 and b"--output-format expects text, json or jsonl" in p.stderr,
           "--output-format yaml is refused")

    return TALLY.close()


if __name__ == "__main__":
    sys.exit(main())
