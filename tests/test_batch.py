#!/usr/bin/python3
"""generate --batch as jobs run it in the field (issue 36): a streaming worker
(a coprocess gets each answer while its stdin stays open), --ordered and
--unordered, OpenAI Batch API files (OpenAI's own example file unchanged),
--errors, --input-format, --resume after kills at many moments (and a torn
last line), duplicate ids, --progress, and the scale-out engines: GNU
parallel (--shard, and --pipe) and a Slurm job array on a one-node cluster
the test starts itself (as root, where slurm-wlm and munge are installed).

Every result is checked against the same prompt run alone with `generate`,
or against one single run of the whole file; results are parsed as JSON.
Nothing waits on a clock: reads wait for lines, kills wait until the output
holds N lines, and Slurm jobs are waited for with `sbatch --wait`.

    test_batch.py --bin build --model models/default
"""
import argparse
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc import LIMIT, wait_until  # noqa: E402
from tally import Tally  # noqa: E402

TALLY = Tally("batch")
report, skip = TALLY.report, TALLY.skip
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# OpenAI's example batch input file, as its Batch API guide prints it
OPENAI_EXAMPLE = (
    '{"custom_id": "request-1", "method": "POST", "url": "/v1/chat/completions", "body": {"model": '
    '"gpt-3.5-turbo-0125", "messages": [{"role": "system", "content": "You are a helpful assistant."},'
    '{"role": "user", "content": "Hello world!"}],"max_tokens": 1000}}\n'
    '{"custom_id": "request-2", "method": "POST", "url": "/v1/chat/completions", "body": {"model": '
    '"gpt-3.5-turbo-0125", "messages": [{"role": "system", "content": "You are an unhelpful assistant."},'
    '{"role": "user", "content": "Hello world!"}],"max_tokens": 1000}}\n')

TEMPLATE = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}")


def loads(data):
    return [json.loads(x) for x in data.decode().splitlines() if x.strip()]


def norm(r):
    """A result without what differs from run to run (timing, creation time, queue)."""
    r = json.loads(json.dumps(r))
    r.pop("timing", None)
    body = (r.get("response") or {}).get("body") or {}
    body.pop("created", None), body.pop("timings", None)
    return r


class Worker:
    """smallmind as a coprocess: lines in on a pipe, result lines read as they come."""

    def __init__(self, args):
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.p.stdout, selectors.EVENT_READ)
        self.buf = b""

    def send(self, line):
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()

    def read(self, limit=LIMIT):
        """The next result line (None if the worker ended or `limit` passed without one)."""
        while b"\n" not in self.buf:
            if not self.sel.select(limit):
                return None
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def close(self):
        self.p.stdin.close()
        rest = self.p.stdout.read()
        err = self.p.stderr.read()
        return self.p.wait(), self.buf + rest, err


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    a = ap.parse_args()
    sm = os.path.abspath(os.path.join(a.bin, "smallmind"))
    model = os.path.abspath(a.model)
    M = ["-m", model]

    def gen(*args, inp=None):
        return subprocess.run([sm, "generate", *M, *args], input=inp, capture_output=True)

    def alone(prompt, *flags):
        p = gen("-p", prompt, "--json", *flags)
        return json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr.decode()}

    with tempfile.TemporaryDirectory() as tmp:
        tpl = os.path.join(tmp, "chat.jinja")
        with open(tpl, "w") as f:
            f.write(TEMPLATE)
        streaming(sm, M, tmp)
        formats(sm, M, tmp, tpl, gen, alone)
        choices(gen, alone, tpl)
        logprobs(a.bin, model, gen, tpl)
        echo(a.bin, model, gen)
        errors_and_formats(sm, M, tmp, gen)
        resume(sm, M, tmp, gen)
        duplicates(sm, M, tmp, gen)
        scale_out(sm, model, tmp)
    return TALLY.close()


def streaming(sm, M, tmp):
    # a coprocess writes one line and waits: its answer comes while stdin stays open
    w = Worker([sm, "generate", *M, "--batch", "-", "-n", "12", "--temp", "0", "-q"])
    w.send("And God said")
    r1 = w.read()
    report(r1 is not None and w.p.poll() is None and r1.get("id") == 1 and r1.get("line") == 1 and
           r1.get("tokens_generated") == 12, "worker: the first answer comes before stdin closes", str(r1)[:80])
    w.send(json.dumps({"id": "second", "prompt": "In the beginning", "max_tokens": 3}))
    r2 = w.read()
    report(r2 is not None and r2.get("id") == "second" and r2.get("line") == 2 and
           r2.get("tokens_generated") == 3, "worker: the second answer, with its id and line", str(r2)[:80])
    rc, rest, err = w.close()
    report(rc == 0 and rest == b"", "worker: EOF ends it after the last record, exit 0", err.decode()[-200:])

    # a FIFO as the input: the same
    fifo = os.path.join(tmp, "in.fifo")
    os.mkfifo(fifo)
    p = subprocess.Popen([sm, "generate", *M, "--batch", fifo, "-n", "4", "--temp", "0", "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with open(fifo, "w") as fw:
        fw.write("And the\n")
        fw.flush()
        first = p.stdout.readline()
        report(json.loads(first or b"{}").get("line") == 1, "FIFO: an answer per line as it arrives")
    out, err = p.communicate(timeout=LIMIT)
    report(p.returncode == 0 and out == b"", "FIFO: its writer closing ends the run", err.decode()[-200:])

    # --unordered: each result as it is done; --ordered (the default) keeps input order
    long_rec = json.dumps({"id": "long", "prompt": "And God", "max_tokens": 120})
    short_rec = json.dumps({"id": "short", "prompt": "And God", "max_tokens": 2})
    for flag, want in (("--unordered", ["short", "long"]), ("--ordered", ["long", "short"]),
                       (None, ["long", "short"])):
        w = Worker([sm, "generate", *M, "--batch", "-", "--temp", "0", "-q", "--parallel", "2"] +
                   ([flag] if flag else []))
        w.send(long_rec)
        w.send(short_rec)
        got = [w.read(), w.read()]
        rc, _, err = w.close()
        report(rc == 0 and [g and g.get("id") for g in got] == want and
               sorted(g["line"] for g in got) == [1, 2],
               f"{flag or 'default'}: results in the order {want}", err.decode()[-200:])


def formats(sm, M, tmp, tpl, gen, alone):
    # our records, plain lines and OpenAI requests in one file; each equals its prompt alone
    oai_c = {"custom_id": "c1", "method": "POST", "url": "/v1/completions",
             "body": {"model": "x", "prompt": "Blessed are the", "max_tokens": 20, "temperature": 0,
                      "stop": ["\n"]}}
    oai_chat = {"custom_id": "h1", "method": "POST", "url": "/v1/chat/completions",
                "body": {"messages": [{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": "Who made the light?"}],
                         "max_completion_tokens": 25, "max_tokens": 3, "seed": 5, "temperature": 0.7,
                         "top_p": 0.9}}
    lines = ["And God said",
             json.dumps({"id": 10, "prompt": "In the beginning", "max_tokens": 15, "temperature": 0}),
             json.dumps(oai_c), json.dumps(oai_chat)]
    path = os.path.join(tmp, "mixed.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    p = gen("--batch", path, "-n", "20", "--chat-template", tpl)
    recs = loads(p.stdout)
    report(p.returncode == 0 and len(recs) == 4, "mixed file: a result per line, exit 0", p.stderr.decode()[-200:])
    if len(recs) != 4:
        return
    want0 = alone("And God said", "-n", "20")
    want1 = alone("In the beginning", "-n", "15", "--temp", "0")
    ok = all(recs[i]["text"] == w["text"] and recs[i]["tokens_generated"] == w["tokens_generated"]
             for i, w in ((0, want0), (1, want1)))
    report(ok and recs[0]["id"] == 1 and recs[1]["id"] == 10 and [recs[0]["line"], recs[1]["line"]] == [1, 2]
           and "queue_ms" in recs[1]["timing"], "our records: alone's text, id, line, queue time")
    c = recs[2]
    want = alone("Blessed are the", "-n", "20", "--temp", "0", "--stop", "\n")
    body = c["response"]["body"]
    ch = body["choices"][0]
    report(c["id"] == "batch_req_3" and c["custom_id"] == "c1" and c["error"] is None and
           c["response"]["status_code"] == 200 and body["object"] == "text_completion" and
           ch["text"] == want["text"] and ch["finish_reason"] == {"eos": "stop"}.get(want["finish_reason"],
                                                                                   want["finish_reason"]) and
           body["usage"] == {"prompt_tokens": want["tokens_prompt"], "completion_tokens": want["tokens_generated"],
                             "total_tokens": want["tokens_prompt"] + want["tokens_generated"],
                             "prompt_tokens_details": {"cached_tokens": 0}},
           "OpenAI /v1/completions: the text alone gives, OpenAI's shape and usage", json.dumps(c)[:200])
    h = recs[3]
    want = gen("--chat", "--chat-template", tpl, "--system", "Be brief.", "-p", "Who made the light?",
               "-n", "25", "-s", "5", "--temp", "0.7", "--top-p", "0.9", "--json")
    want = json.loads(want.stdout) if want.returncode == 0 else {}
    body = h["response"]["body"]
    msg = body["choices"][0]["message"]
    report(body["object"] == "chat.completion" and msg["role"] == "assistant" and
           msg["content"] == want.get("text") and body["usage"]["completion_tokens"] == want.get("tokens_generated")
           and body["usage"]["completion_tokens"] <= 25,
           "OpenAI /v1/chat/completions: generate --chat's text (max_completion_tokens wins)",
           json.dumps(msg)[:120])

    # OpenAI's own example file, unchanged
    ex = os.path.join(tmp, "openai_example.jsonl")
    with open(ex, "w") as f:
        f.write(OPENAI_EXAMPLE)
    p = gen("--batch", ex, "--chat-template", tpl, "--temp", "0")
    recs = loads(p.stdout)
    shape = len(recs) == 2 and all(
        set(r) == {"id", "custom_id", "response", "error"} and r["error"] is None and
        set(r["response"]) == {"status_code", "request_id", "body"} and r["response"]["status_code"] == 200 and
        r["response"]["body"]["choices"][0]["finish_reason"] in ("stop", "length") and
        isinstance(r["response"]["body"]["choices"][0]["message"]["content"], str) and
        r["response"]["body"]["model"] == os.path.basename(M[1])
        for r in recs)
    report(p.returncode == 0 and shape and [r["custom_id"] for r in recs] == ["request-1", "request-2"],
           "OpenAI's example batch file runs unchanged", p.stderr.decode()[-200:])
    # --alias: the name in results; a request for another model is refused with 404
    p = gen("--batch", ex, "--chat-template", tpl, "--alias", "gpt-3.5-turbo-0125", "-n", "2")
    recs = loads(p.stdout)
    report(p.returncode == 0 and all(r["response"]["body"]["model"] == "gpt-3.5-turbo-0125" for r in recs),
           "--alias: the requests' model name is served")
    p = gen("--batch", ex, "--chat-template", tpl, "--alias", "mine", "-n", "2")
    recs = loads(p.stdout)
    report(p.returncode == 1 and all(r["response"]["status_code"] == 404 and
                                     r["response"]["body"]["error"]["code"] == "model_not_found" for r in recs),
           "--alias: another model name is a 404 model_not_found", json.dumps(recs)[:200])
    # no chat template: a chat request is a 400 naming the problem, a completion still runs
    p = gen("--batch", "-", inp=(json.dumps(oai_chat) + "\n" + json.dumps(oai_c) + "\n").encode())
    recs = loads(p.stdout)
    report(p.returncode == 1 and len(recs) == 2 and recs[0]["response"]["status_code"] == 400 and
           "template" in recs[0]["response"]["body"]["error"]["message"] and
           recs[1]["response"]["status_code"] == 200, "chat request without a template: 400, the rest run",
           json.dumps(recs)[:200])


def choices(gen, alone, tpl):
    """OpenAI lines with "n" and prompt lists (token ids too): one result line each, choice p n + j = prompt p
    alone with seed + j, in one run with records around them; --parallel 1, so the choices wait for room."""
    prompts = ["And God said", "In the beginning"]
    ids = [list(p.encode()) for p in prompts]  # the default model's byte vocabulary, no BOS
    line = lambda cid, body: json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/completions",
                                         "body": dict({"max_tokens": 16, "temperature": 0.9, "seed": 21}, **body)})
    chat = json.dumps({"custom_id": "chat", "method": "POST", "url": "/v1/chat/completions",
                       "body": {"messages": [{"role": "user", "content": "Who made the light?"}], "n": 3,
                                "max_tokens": 16, "temperature": 0.9, "seed": 5}})
    lines = [line("lists", {"prompt": prompts, "n": 3}), line("one", {"prompt": prompts[1]}),
             line("tokens", {"prompt": ids, "temperature": 0}), chat, line("bad", {"prompt": [ids[0], [99999]]}),
             line("long", {"prompt": [prompts[0], "x" * 2000], "n": 2})]
    want = {}
    for par in ("1", "4"):
        p = gen("--batch", "-", "--parallel", par, "--chat-template", tpl, inp=("\n".join(lines) + "\n").encode())
        recs = {r["custom_id"]: r for r in loads(p.stdout)}
        if not want:
            alone_p = lambda pr, *f: alone(pr, "-n", "16", *f)
            want = {"lists": [alone_p(pr, "--temp", "0.9", "-s", str(21 + j)) for pr in prompts for j in range(3)],
                    "one": [alone_p(prompts[1], "--temp", "0.9", "-s", "21")],
                    "tokens": [alone_p(pr, "--temp", "0") for pr in prompts],
                    "chat": [alone_p("Who made the light?", "--chat", "--chat-template", tpl, "--temp", "0.9",
                                     "-s", str(5 + j)) for j in range(3)]}
        texts = lambda r: [c.get("text", (c.get("message") or {}).get("content"))
                           for c in r["response"]["body"].get("choices", [])]
        got = {k: texts(recs[k]) for k in want if k in recs}
        u = recs.get("lists", {}).get("response", {}).get("body", {}).get("usage", {})
        report(p.returncode == 1 and len(recs) == len(lines) and
               got == {k: [w["text"] for w in ws] for k, ws in want.items()} and
               [c["index"] for c in recs["lists"]["response"]["body"]["choices"]] == list(range(6)) and
               u.get("prompt_tokens") == sum(w["tokens_prompt"] for w in want["lists"][::3]) and
               u.get("completion_tokens") == sum(w["tokens_generated"] for w in want["lists"]),
               f"OpenAI lines with n and prompt lists (--parallel {par}): choice p*n+j = prompt p alone with seed "
               "+j; token prompts = their texts; usage counts each prompt once", json.dumps(got)[:300])
        errs = {k: recs[k]["response"]["body"].get("error", {}) for k in ("bad", "long") if k in recs}
        report(errs.get("bad", {}).get("param") == "prompt" and "99999" in errs["bad"].get("message", "") and
               "context" in errs.get("long", {}).get("message", ""),
               "a token beyond the vocabulary, a prompt past the context: the line's 400", json.dumps(errs)[:300])


def log_softmax(np, bindir, model, ctx, V):
    """NumPy's float64 log-softmax of the model's logits (tests/tools/dump_logits) after each of ctx's tokens."""
    d = subprocess.run([os.path.join(bindir, "dump_logits"), model, "auto", "1", "batch",
                        ",".join(map(str, ctx))], capture_output=True)
    z = np.frombuffer(d.stdout, dtype=np.float32).reshape(len(ctx), V).astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def echo(bindir, model, gen):
    """Completions lines with "echo": the prompt's text before the choice's; with logprobs, the prompt's tokens
    first (the first null, each other's log-probability and top alternatives against NumPy's log-softmax of
    dump_logits at the position before it), across several of the scheduler's echo calls (32 rows each); with
    max_tokens 0 (scoring a text, as lm-eval-harness does) and with a greedy completion after it, which is the
    one the same line gives without echo; token-id prompts echoed as their text."""
    try:
        import numpy as np
    except ImportError:
        report(False, "echo in batch lines: no NumPy for this Python (make test installs python3-numpy)")
        return
    prompt = "And God said, Let there be light: and there was light. And God saw the light, that it was good."
    line = lambda cid, body: json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/completions",
                                         "body": dict({"prompt": prompt, "temperature": 0}, **body)})
    lines = [line("plain", {"max_tokens": 6}), line("score", {"max_tokens": 0, "echo": True, "logprobs": 2}),
             line("gen", {"max_tokens": 6, "echo": True, "logprobs": 1}),
             line("ids", {"prompt": [list(b"Hello"), list(b"And")], "max_tokens": 3, "echo": True}),
             line("again", {"max_tokens": 6})]
    p = gen("--batch", "-", "--parallel", "3", inp=("\n".join(lines) + "\n").encode())
    recs = {r["custom_id"]: r["response"]["body"] for r in loads(p.stdout)}
    first = lambda cid: ((recs.get(cid) or {}).get("choices") or [{}])[0]
    ids = list(prompt.encode())
    ls = log_softmax(np, bindir, model, ids, 256)  # the default model: a token's id is its byte
    bad = []
    plain = first("plain").get("text")
    for cid, k, n_gen in (("score", 2, 0), ("gen", 1, 6)):
        c = first(cid)
        lp = c.get("logprobs") or {}
        toks, lps, tops = lp.get("tokens", []), lp.get("token_logprobs", []), lp.get("top_logprobs", [])
        if c.get("text") != prompt + ("" if cid == "score" else plain or "?") or \
                len(toks) != len(ids) + n_gen or len(lps) != len(toks) or len(tops) != len(toks):
            bad.append(f"{cid}: text {c.get('text')!r}, {len(toks)} tokens")
            continue
        if [t.encode("latin-1")[0] for t in toks[:len(ids)]] != ids or lps[0] is not None or tops[0] is not None:
            bad.append(f"{cid}: the prompt's tokens {toks[:4]} {lps[:2]} {tops[:2]}")
        for i in range(1, len(ids)):
            row = ls[i - 1]
            best = [int(j) for j in np.argsort(-row, kind="stable")[:k]]
            got = sorted(((t.encode("latin-1")[0], v) for t, v in tops[i].items()), key=lambda e: -e[1])
            if abs(lps[i] - row[ids[i]]) > 2e-3 or [b for b, _ in got] != best or \
                    any(abs(v - row[b]) > 2e-3 for b, v in got):
                bad.append(f"{cid}: prompt token {i}: {lps[i]} vs {row[ids[i]]:.6g}, top {got} vs {best}")
                break
        if cid == "score" and (c.get("finish_reason") != "length" or
                               (recs["score"].get("usage") or {}).get("completion_tokens") != 0):
            bad.append(f"score: {c.get('finish_reason')}, usage {recs['score'].get('usage')}")
    texts = [c.get("text") for c in (recs.get("ids") or {}).get("choices", [])]
    if len(texts) != 2 or not texts[0].startswith("Hello") or not texts[1].startswith("And") or \
            any(len(t) < 4 for t in texts) or (recs["ids"]["choices"][0].get("logprobs", 0) is not None):
        bad.append(f"ids: {texts}")
    report(p.returncode == 0 and len(recs) == 5 and not bad and first("again").get("text") == plain,
           "OpenAI completions lines with echo: prompt text first; its tokens' log-probabilities (first null) = "
           "NumPy's log-softmax of dump_logits over 3 calls; max_tokens 0; the completion as without echo; "
           "token prompts echoed as text", "; ".join(bad)[:400] or p.stderr[-300:])


def logprobs(bindir, model, gen, tpl):
    """OpenAI lines with logprobs: each choice's tokens, their log-probabilities and the best alternatives
    against NumPy's log-softmax of the model's logits (tests/tools/dump_logits) at each position of the prompt
    and the tokens chosen; greedy and sampled (n 2), completions' lists and chat's content entries."""
    try:
        import numpy as np
    except ImportError:
        report(False, "logprobs in batch lines: no NumPy for this Python (make test installs python3-numpy)")
        return
    prompt = "And God said"
    line = lambda cid, url, body: json.dumps({"custom_id": cid, "method": "POST", "url": url,
                                              "body": dict({"max_tokens": 8}, **body)})
    lines = [line("greedy", "/v1/completions", {"prompt": prompt, "temperature": 0, "logprobs": 3}),
             line("sampled", "/v1/completions", {"prompt": prompt, "temperature": 0.9, "seed": 7, "n": 2,
                                                 "logprobs": 0}),
             line("chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Who?"}],
                                                   "temperature": 0, "logprobs": True, "top_logprobs": 2}),
             line("plain", "/v1/completions", {"prompt": prompt, "temperature": 0})]
    p = gen("--batch", "-", "--parallel", "3", "--chat-template", tpl, inp=("\n".join(lines) + "\n").encode())
    recs = {r["custom_id"]: r["response"]["body"] for r in loads(p.stdout)}
    V = 256  # the default model's byte vocabulary: a token's id is its byte, no BOS

    def ref(ctx):
        return log_softmax(np, bindir, model, ctx, V)

    def check(ctx, toks, lps, tops, k):  # toks: byte strings chosen after ctx; tops: [[(bytes, lp)]]
        ids = [t[0] for t in toks]
        if not ids or any(len(t) != 1 for t in toks):
            return f"tokens {toks!r}"
        ls = ref(ctx + ids[:-1])
        for i, (t, lp, top) in enumerate(zip(ids, lps, tops)):
            row = ls[len(ctx) - 1 + i]
            best = [int(j) for j in np.argsort(-row, kind="stable")[:k]]
            if abs(lp - row[t]) > 2e-3 or [b[0] for b, _ in top] != best or \
                    any(abs(v - row[b[0]]) > 2e-3 for b, v in top):
                return f"token {i}: {lp} vs {row[t]:.6g}, top {top} vs {best}"
        return None

    bad = []
    pctx = list(prompt.encode())
    for cid in ("greedy", "sampled"):
        for c in (recs.get(cid) or {}).get("choices", []):
            lp = c.get("logprobs") or {}
            toks = [t.encode("latin-1") for t in lp.get("tokens", [])]
            tops = [sorted(((t.encode("latin-1"), v) for t, v in d.items()), key=lambda e: -e[1])
                    for d in lp.get("top_logprobs", [])]
            why = check(pctx, toks, lp.get("token_logprobs", []), tops, 3 if cid == "greedy" else 0)
            if why or b"".join(toks).decode() != c["text"] or len(toks) != 8:
                bad.append(f"{cid}: {why or c['text']}")
    chat = ((recs.get("chat") or {}).get("choices") or [{}])[0]
    ents = (chat.get("logprobs") or {}).get("content") or []
    cctx = list("<user>Who?\n<assistant>".encode())
    why = check(cctx, [bytes(e["bytes"]) for e in ents], [e["logprob"] for e in ents],
                [[(bytes(t["bytes"]), t["logprob"]) for t in e["top_logprobs"]] for e in ents], 2)
    if why or "".join(e["token"] for e in ents) != (chat.get("message") or {}).get("content"):
        bad.append(f"chat: {why}")
    plain = ((recs.get("plain") or {}).get("choices") or [{}])[0]
    report(p.returncode == 0 and len(recs) == 4 and len(recs.get("sampled", {}).get("choices", [])) == 2 and
           not bad and "logprobs" in plain and plain["logprobs"] is None,
           "OpenAI lines with logprobs: every token's log-probability and top alternatives = NumPy's log-softmax "
           "of dump_logits (greedy, sampled n 2, chat); none asked: null", "; ".join(bad)[:400] or p.stderr[-300:])


def errors_and_formats(sm, M, tmp, gen):
    good = {"custom_id": "ok", "method": "POST", "url": "/v1/completions", "body": {"prompt": "And", "max_tokens": 2}}
    bad = [
        ("invalid_url", {"custom_id": "u", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}}),
        ("invalid_method", {"custom_id": "m", "method": "GET", "url": "/v1/completions", "body": {}}),
        ("missing_custom_id", {"method": "POST", "url": "/v1/completions", "body": {"prompt": "x"}}),
        (400, {"custom_id": "t", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x", "temperature": "hot"}}),
        (400, {"custom_id": "n", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x", "n": 129}}),
        (400, {"custom_id": "f", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x", "frobnicate": 1}}),
        (400, {"custom_id": "s", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": []}}),
        (400, {"custom_id": "j", "method": "POST", "url": "/v1/chat/completions",
               "body": {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}}}),
        (400, {"custom_id": "pl", "method": "POST", "url": "/v1/completions", "body": {"prompt": [[1], "b"]}}),
    ]
    path = os.path.join(tmp, "bad.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps(good) + "\n" + "\n".join(json.dumps(b) for _, b in bad) + "\n")
    p = gen("--batch", path)
    recs = loads(p.stdout)
    ok = len(recs) == 1 + len(bad) and recs[0]["response"]["status_code"] == 200
    detail = []
    for (want, _), r in zip(bad, recs[1:]):
        if isinstance(want, str):
            good_one = r["response"] is None and r["error"]["code"] == want and r["error"]["message"]
        else:
            e = (r["response"] or {}).get("body", {}).get("error", {})
            good_one = r["error"] is None and r["response"]["status_code"] == want and e.get("message") and \
                e.get("type") == "invalid_request_error" and "param" in e
        if not good_one:
            detail.append(r)
        ok = ok and good_one
    report(p.returncode == 1 and ok, "OpenAI lines: line errors (code) and request errors (400, param)",
           json.dumps(detail)[:300])
    report([r["response"]["body"]["error"]["param"] for r in recs[4:7]] == ["temperature", "n", "frobnicate"],
           "request errors name the field", json.dumps([r["response"] for r in recs[4:7]])[:200])
    report(recs[-1]["response"]["body"]["error"]["param"] == "prompt",
           "a prompt list mixing token lists and strings: a 400 naming prompt", json.dumps(recs[-1])[:200])
    # --errors FILE: the failed records go there, the rest to the results
    errs = os.path.join(tmp, "errors.jsonl")
    p = gen("--batch", path, "--errors", errs)
    with open(errs, "rb") as f:
        erecs = loads(f.read())
    report(p.returncode == 1 and [r["custom_id"] for r in loads(p.stdout)] == ["ok"] and
           len(erecs) == len(bad), "--errors: failed records in their own file")

    # --input-format: text takes '{' lines as prompts, jsonl and openai require their form
    line = json.dumps(good)
    p = gen("--batch", "-", "--input-format", "text", "-n", "3", inp=(line + "\n").encode())
    r = loads(p.stdout)
    report(p.returncode == 0 and r[0].get("tokens_prompt", 0) > 40 and "text" in r[0],
           "--input-format text: a line starting with '{' is a prompt")
    p = gen("--batch", "-", "--input-format", "jsonl", inp=(line + "\n").encode())
    r = loads(p.stdout)
    report(p.returncode == 1 and "custom_id" in r[0].get("error", ""), "--input-format jsonl: OpenAI keys refused")
    p = gen("--batch", "-", "--input-format", "openai", inp=b"just a prompt\n")
    r = loads(p.stdout)
    report(p.returncode == 1 and r[0]["error"]["code"] == "invalid_json_line" and r[0]["custom_id"] is None,
           "--input-format openai: a plain line is an invalid_json_line", json.dumps(r)[:160])
    p = gen("--batch", "-", "--input-format", "yaml", inp=b"x\n")
    report(p.returncode == 2 and b"--input-format expects" in p.stderr, "--input-format: a bad value is a usage error")
    for flags, needle in ((["--resume", "-p", "x"], b"--resume goes with --batch"),
                          (["--batch", path, "--resume"], b"--resume goes with --output"),
                          (["--batch", path, "--output", path], b"names the input file"),
                          (["--batch", path, "--ordered", "--unordered"], b"not both")):
        p = gen(*flags)
        report(p.returncode == 2 and needle in p.stderr, f"usage: {' '.join(flags[-2:])}", p.stderr.decode()[:120])

    # --progress: a plain progress line on stderr (the last one with the count), nothing on stdout
    p = gen("--batch", path, "--progress", "-n", "2")
    last = [ln for ln in p.stderr.decode().splitlines() if ln.startswith("records ")]
    report(last and last[-1].startswith(f"records {1 + len(bad)}/{1 + len(bad)} ({len(bad)} failed)") and
           len(loads(p.stdout)) == 1 + len(bad), "--progress: records done/total on stderr", str(last)[-160:])


def resume(sm, M, tmp, gen):
    recs = [{"id": f"r{i}", "prompt": f"And the {i} day", "max_tokens": 10 + 3 * i} for i in range(24)]
    recs[5] = {"id": "r5", "prompt": 7}  # a bad record: its error is a result too
    path = os.path.join(tmp, "jobs.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(r) for r in recs) + "\n")
    flags = ["--batch", path, "--temp", "0", "-q", "--parallel", "3"]
    p = gen(*flags)
    full = [norm(r) for r in loads(p.stdout)]
    report(p.returncode == 1 and len(full) == 24, "resume: the whole run (one bad record)")
    out = os.path.join(tmp, "out.jsonl")
    bad = []
    for k in (0, 1, 7, 15, 23):
        if os.path.exists(out):
            os.unlink(out)
        if k:  # killed once the results file holds k whole lines
            q = subprocess.Popen([sm, "generate", *M, *flags, "--output", out], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)

            def lines():
                try:
                    with open(out, "rb") as f:
                        return f.read().count(b"\n")
                except OSError:
                    return 0
            wait_until(lambda: lines() >= k or q.poll() is not None)
            q.send_signal(signal.SIGKILL)
            q.wait()
            with open(out, "ab") as f:  # a torn line, as a crash of the machine leaves
                f.write(b'{"id": "r9", "line": 10, "te')
        p = gen(*flags, "--output", out, "--resume")
        with open(out, "rb") as f:
            got = sorted((norm(r) for r in loads(f.read())), key=lambda r: r["line"])
        if p.returncode != 1 or p.stdout or got != full:
            bad.append((k, p.returncode, p.stderr.decode()[-200:]))
    report(not bad, "resume after kills at 0, 1, 7, 15, 23 results and a torn line: the whole run's results",
           str(bad)[:400])
    p = gen(*flags, "--output", out, "--resume", "--stats")
    with open(out, "rb") as f:
        n = len(loads(f.read()))
    report(p.returncode == 1 and n == 24 and b"0 records written" in p.stderr and
           b"24 skipped as done (1 of them failed)" in p.stderr,
           "resume of a finished job: nothing runs, nothing is added, exit 1 for its failed record",
           p.stderr.decode()[-200:])
    # --shard composes with --resume: each shard resumed into its own file, merged = the whole run
    parts = []
    for i in (1, 2, 3):
        part = os.path.join(tmp, f"part-{i}.jsonl")
        with open(part, "w") as f:  # as if a first try had written this shard's first result
            pass
        gen(*flags, "--shard", f"{i}/3", "--output", part, "--resume", "-n", "5")
        parts.append(part)
    p = subprocess.run([os.path.join(ROOT, "scripts", "merge_shards.sh"), *parts], capture_output=True)
    report([norm(r) for r in loads(p.stdout)] == full, "--shard I/3 --resume, merged by merge_shards.sh = the whole run")
    # a results file that is not ours is refused, and left as it is
    alien = os.path.join(tmp, "alien.jsonl")
    with open(alien, "w") as f:
        f.write("hello\n")
    p = gen(*flags, "--output", alien, "--resume")
    with open(alien) as f:
        kept = f.read()
    report(p.returncode == 1 and b"line 1 is not a result line" in p.stderr and kept == "hello\n",
           "resume into a file that is not results: refused, untouched", p.stderr.decode()[:160])


def duplicates(sm, M, tmp, gen):
    path = os.path.join(tmp, "dup.jsonl")
    with open(path, "w") as f:
        f.write('{"id": "a", "prompt": "And"}\n{"id": "b", "prompt": "God"}\n{"id": "a", "prompt": "said"}\n')
    out = os.path.join(tmp, "dup-out.jsonl")
    with open(out, "w") as f:
        f.write("old results\n")
    p = gen("--batch", path, "-n", "3", "--output", out)
    with open(out) as f:
        kept = f.read()
    report(p.returncode == 1 and b"line 3: id \"a\" repeats line 1's" in p.stderr and kept == "old results\n",
           "a repeated id refuses the run before anything is written", p.stderr.decode()[:200])
    p = gen("--batch", path, "-n", "3", "--allow-duplicate-ids")
    report(p.returncode == 0 and [r["id"] for r in loads(p.stdout)] == ["a", "b", "a"],
           "--allow-duplicate-ids runs both")
    # resuming with duplicates: the second "a" is not taken as done by the first's result
    os.unlink(out)
    q = gen("--batch", path, "-n", "3", "--allow-duplicate-ids", "--output", out, "--shard", "1/3")
    p = gen("--batch", path, "-n", "3", "--allow-duplicate-ids", "--output", out, "--resume")
    with open(out) as f:
        got = [json.loads(x)["line"] for x in f]
    report(q.returncode == 0 and p.returncode == 0 and sorted(got) == [1, 2, 3],
           "--allow-duplicate-ids with --resume counts each id's results", str(got))
    # a line without an id is known by its line number, so an explicit id can repeat it
    p = gen("--batch", "-", "-n", "2", inp=b'first\n{"id": 1, "prompt": "x"}\n')
    r = loads(p.stdout)
    report(p.returncode == 1 and len(r) == 2 and "repeats line 1" in r[1].get("error", ""),
           "a stream: a repeated id is an error result for the repeat", json.dumps(r)[:160])


def scale_out(sm, model, tmp):
    recs = []
    for i in range(30):
        if i % 3 == 0:
            recs.append({"custom_id": f"q{i}", "method": "POST", "url": "/v1/completions",
                         "body": {"prompt": f"And {i} men", "max_tokens": 6 + i % 7, "temperature": 0}})
        else:
            recs.append({"id": i, "prompt": f"The {i} sons of", "max_tokens": 4 + i % 5, "seed": i})
    path = os.path.join(tmp, "scale.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(r) for r in recs) + "\n")
    base = ["generate", "-m", model, "-q"]
    p = subprocess.run([sm, *base, "--batch", path], capture_output=True)
    full = [norm(r) for r in loads(p.stdout)]
    report(p.returncode == 0 and len(full) == 30, "scale-out: the single run")

    par = shutil.which("parallel")
    if not par:
        skip("GNU parallel", "not installed (apt-get install parallel)")
    else:
        out = os.path.join(tmp, "gp")
        os.mkdir(out)
        p = subprocess.run([par, "--will-cite", "-j", "2", sm, *base, "--batch", path, "-t", "1", "--shard", "{}/2",
                            "--output", os.path.join(out, "part-{}.jsonl"), "--resume", ":::", "1", "2"],
                           capture_output=True)
        m = subprocess.run([os.path.join(ROOT, "scripts", "merge_shards.sh"), os.path.join(out, "part-1.jsonl"),
                            os.path.join(out, "part-2.jsonl")], capture_output=True)
        report(p.returncode == 0 and [norm(r) for r in loads(m.stdout)] == full,
               "GNU parallel: 2 processes x --shard, merged = the single run", p.stderr.decode()[-200:])
        with open(path, "rb") as f:
            p = subprocess.run([par, "--will-cite", "--pipe", "--keep-order", "-N", "7", "-j", "2", sm, *base,
                                "--batch", "-", "-t", "1"], stdin=f, capture_output=True)

        def content(r):  # a chunk's lines are numbered from its own start
            r = json.loads(json.dumps(r))
            r.pop("line", None)
            if "custom_id" in r:
                r.pop("id")
                r["response"]["body"].pop("id"), r["response"].pop("request_id")
            return r
        got = [content(norm(r)) for r in loads(p.stdout)]
        report(p.returncode == 0 and got == [content(r) for r in full],
               "GNU parallel --pipe: chunks through 2 processes, in order = the single run's results",
               p.stderr.decode()[-200:])

    slurm(sm, model, path, full, tmp)


def slurm(sm, model, path, full, tmp):
    tools = [shutil.which(t) for t in ("slurmctld", "slurmd", "sbatch", "munged")]
    if not all(tools):
        skip("Slurm job array", "slurm-wlm and munge are not installed (apt-get install slurm-wlm munge)")
        return
    if os.geteuid() != 0:
        skip("Slurm job array", "starting a Slurm cluster needs root")
        return
    ctld, slurmd, sbatch, munged = tools
    d = tempfile.mkdtemp(prefix="smslurm-", dir="/tmp")  # short paths: munge's socket path
    procs = []
    try:
        os.makedirs(f"{d}/state"), os.makedirs(f"{d}/spool")
        with open(f"{d}/munge.key", "wb") as f:
            f.write(os.urandom(128))
        os.chmod(f"{d}/munge.key", 0o600)
        sock = f"{d}/munge.sock"
        r = subprocess.run([munged, "--force", f"--socket={sock}", f"--key-file={d}/munge.key",
                            f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log",
                            f"--seed-file={d}/munge.seed"], capture_output=True)
        if r.returncode != 0:
            skip("Slurm job array", f"munged did not start: {r.stderr.decode().strip()[:120]}")
            return
        host = socket.gethostname().split(".")[0]
        p1, p2 = free_port(), free_port()
        conf = f"{d}/slurm.conf"
        with open(conf, "w") as f:
            f.write(f"""ClusterName=smtest
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldPort={p1}
SlurmdPort={p2}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
NodeName={host} CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=smtest Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
        env = dict(os.environ, SLURM_CONF=conf)
        for daemon in (ctld, slurmd):  # in the foreground (-D), killed at the end
            procs.append(subprocess.Popen([daemon, "-D", "-f", conf], env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))

        def node_idle():
            r = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True)
            return r.returncode == 0 and r.stdout.strip() == b"idle"
        if not wait_until(node_idle, limit=120, every=0.2):
            skip("Slurm job array", "the one-node cluster did not come up (see its logs)")
            return
        out = os.path.join(tmp, "slurm-out")
        job = os.path.join(ROOT, "scripts", "slurm_batch.sh")
        r = subprocess.run([sbatch, "--wait", "--array=1-3", "--cpus-per-task=1", "-o", f"{d}/task-%a.log",
                            job, model, path, out], env=dict(env, SMALLMIND=sm), capture_output=True,
                           timeout=LIMIT)
        parts = [os.path.join(out, f"part-{i}.jsonl") for i in (1, 2, 3)]
        m = subprocess.run([os.path.join(ROOT, "scripts", "merge_shards.sh"), *parts], capture_output=True)
        report(r.returncode == 0 and [norm(x) for x in loads(m.stdout)] == full,
               "Slurm job array of 3 (scripts/slurm_batch.sh), merged = the single run",
               f"sbatch exit {r.returncode}: " + (r.stdout + r.stderr).decode()[-200:])
        # the array again: every task resumes its finished file and adds nothing
        r = subprocess.run([sbatch, "--wait", "--array=1-3", "--cpus-per-task=1", "-o", f"{d}/task2-%a.log",
                            job, model, path, out], env=dict(env, SMALLMIND=sm), capture_output=True,
                           timeout=LIMIT)
        m2 = subprocess.run([os.path.join(ROOT, "scripts", "merge_shards.sh"), *parts], capture_output=True)
        report(r.returncode == 0 and m2.stdout == m.stdout, "Slurm: the array submitted again resumes, adds nothing")
    finally:
        if os.environ.get("SM_KEEP_SLURM"):
            print("slurm dir kept:", d)
            return
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        try:
            with open(f"{d}/munged.pid") as f:
                os.kill(int(f.read().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
