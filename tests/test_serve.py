#!/usr/bin/python3
"""smallmind serve (issue 38): the OpenAI API over HTTP, driven by the
official openai npm client (chat completions streamed and not, completions,
models), curl for the other endpoints, a load of 64 concurrent streamed
requests x 3 rounds each equal to its `generate` twin, 100+ hostile requests
with the server answering correctly afterwards, a client that leaves freeing
its slot, the queue's 503, the API key, SIGTERM, and two servers behind
nginx. Nothing waits on a clock: the server is waited for until /health
answers, and states are polled for (with a generous overall limit).

    test_serve.py --bin build --model models/default --shared ../shared
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc import LIMIT, wait_until  # noqa: E402
from tally import Tally  # noqa: E402

TALLY = Tally("serve")
report, skip = TALLY.report, TALLY.skip
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, sm, model, *flags, port=None):
        self.port = port or free_port()
        self.p = subprocess.Popen([sm, "serve", "-m", model, "--port", str(self.port), *flags],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.up = wait_until(lambda: self.p.poll() is not None or self.get("/health")[0] == 200, limit=120)

    def request(self, method, path, body=None, headers=None, timeout=LIMIT):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            c.request(method, path, body=data, headers=headers or {"Content-Type": "application/json"})
            r = c.getresponse()
            out = r.status, r.read()
            c.close()
            return out
        except OSError as e:
            return None, str(e).encode()

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, body, headers=None):
        return self.request("POST", path, body, headers)

    def metric(self, name):
        return self.metrics().get(name)

    def metrics(self):
        """One scrape of /metrics: {name: value}."""
        st, text = self.get("/metrics")
        return {ln.split()[0]: float(ln.split()[1]) for ln in text.decode().splitlines()
                if ln and not ln.startswith("#") and len(ln.split()) == 2}

    def stop(self, sig=signal.SIGTERM):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            self.p.wait(timeout=LIMIT)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return self.p.returncode


def stream(port, path, body):
    """A streamed completion read event by event: (text, finish_reason, events, usage, error)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=LIMIT)
    c.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        return None, None, 0, None, r.read().decode()
    text, finish, n, usage, buf = "", None, 0, None, b""
    done = False
    while not done:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            data = ev.decode()[len("data: "):]
            if data == "[DONE]":
                done = True
                break
            j = json.loads(data)
            n += 1
            if j.get("usage"):
                usage = j["usage"]
            for ch in j["choices"]:
                text += ch["delta"].get("content", "") if "delta" in ch else ch["text"]
                if ch.get("finish_reason"):
                    finish = ch["finish_reason"]
    c.close()
    return text, finish, n, usage, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--shared", required=True)
    a = ap.parse_args()
    sm = os.path.abspath(os.path.join(a.bin, "smallmind"))
    model = os.path.abspath(a.model)
    node = shutil.which("node")
    npm_dir = os.path.join(ROOT, "build", "npm")
    have_client = node and os.path.exists(os.path.join(npm_dir, "node_modules", "openai", "package.json"))
    with tempfile.TemporaryDirectory() as tmp:
        tpl = os.path.join(tmp, "chat.jinja")
        with open(tpl, "w") as f:
            f.write(TEMPLATE)
        s = Server(sm, model, "--chat-template", tpl, "--parallel", "4", "--alias", "smallmind-default")
        report(s.up, "the server answers /health", s.p.stderr.read1(2000).decode() if not s.up else "")
        if not s.up:
            return TALLY.close()
        try:
            if have_client:
                client(sm, model, tpl, s, node, npm_dir, tmp)
                choices(sm, model, tpl, s, node, npm_dir)
                echo(sm, model, s, node, npm_dir)
                stories = os.path.join(a.shared, "models", "stories260K")
                if os.path.exists(os.path.join(stories, "stories260K.bin")):
                    client_stories(sm, stories, node, npm_dir, tmp)
            else:
                skip("the openai npm client", "node or npm's openai package is not installed")
            endpoints(s, sm, model)
            load(sm, model, s, tmp)
            hostile(sm, model, s)
            leaving(sm, model, tmp)
        finally:
            rc = s.stop()
        report(rc == 0, "SIGTERM: the server stops and exits 0", f"exit {rc}")
        stopping(sm, tmp)
        api_key(sm, model)
        balancer(sm, model, tmp)
    return TALLY.close()


def twin(sm, model, prompt, *flags):
    p = subprocess.run([sm, "generate", "-m", model, "-p", prompt, "--json", *flags], capture_output=True)
    return json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr.decode()}


def node_calls(node, npm_dir, port, calls, key=""):
    p = subprocess.run([node, os.path.join(ROOT, "tests", "serve_client.mjs"), f"http://127.0.0.1:{port}/v1", key],
                       input=json.dumps(calls).encode(), capture_output=True, env=dict(os.environ, SM_NPM=npm_dir))
    out = [json.loads(x) for x in p.stdout.decode().splitlines() if x.strip()]
    return out, p.stderr.decode()


def client(sm, model, tpl, s, node, npm_dir, tmp):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who made the light?"}]
    calls = [
        {"op": "chat", "stream": False, "params": {"model": "smallmind-default", "messages": msgs, "max_tokens": 30,
                                                   "temperature": 0.7, "seed": 5, "top_p": 0.9}},
        {"op": "chat", "stream": True, "params": {"model": "smallmind-default", "messages": msgs, "max_tokens": 30,
                                                  "temperature": 0.7, "seed": 5, "top_p": 0.9,
                                                  "stream_options": {"include_usage": True}}},
        {"op": "completion", "stream": False, "params": {"model": "smallmind-default", "prompt": "And God said",
                                                         "max_tokens": 40, "temperature": 0}},
        {"op": "completion", "stream": True, "params": {"model": "smallmind-default", "prompt": "And God said",
                                                        "max_tokens": 40, "temperature": 0, "stop": ["LORD"]}},
        {"op": "models"},
        {"op": "chat", "stream": False, "params": {"model": "gpt-4o", "messages": msgs}},
        {"op": "chat", "stream": False, "params": {"model": "smallmind-default", "messages": msgs, "max_tokens": 5,
                                                   "logprobs": True, "top_logprobs": 3, "temperature": 0}},
        {"op": "chat", "stream": True, "params": {"model": "smallmind-default", "messages": msgs, "max_tokens": 30,
                                                  "temperature": 0, "logit_bias": {"32": -100, "101": -100,
                                                                                   "116": 5}}},
        {"op": "completion", "stream": False, "params": {"model": "smallmind-default", "prompt": "And God said",
                                                         "max_tokens": 5, "logit_bias": {"300": 1}}},
    ]
    out, err = node_calls(node, npm_dir, s.port, calls)
    if len(out) != len(calls):
        report(False, "the openai client ran every call", err[-300:])
        return
    want_chat = twin(sm, model, "Who made the light?", "--chat", "--chat-template", tpl, "--system", "Be brief.",
                     "-n", "30", "--temp", "0.7", "-s", "5", "--top-p", "0.9")
    want_c = twin(sm, model, "And God said", "-n", "40", "--temp", "0")
    want_cs = twin(sm, model, "And God said", "-n", "40", "--temp", "0", "--stop", "LORD")
    fin = lambda w: {"eos": "stop"}.get(w.get("finish_reason"), w.get("finish_reason"))
    report(out[0].get("text") == want_chat.get("text") and out[0].get("role") == "assistant" and
           out[0].get("object") == "chat.completion" and out[0]["finish_reason"] == fin(want_chat) and
           out[0]["usage"]["completion_tokens"] == want_chat.get("tokens_generated"),
           "openai client: chat completion = generate --chat", json.dumps(out[0])[:200])
    report(out[1].get("text") == want_chat.get("text") and out[1].get("role") == "assistant" and
           out[1]["finish_reason"] == fin(want_chat) and out[1].get("usage", {}).get("total_tokens") ==
           want_chat.get("tokens_prompt", 0) + want_chat.get("tokens_generated", 0),
           "openai client: streamed chat completion, include_usage = generate --chat", json.dumps(out[1])[:200])
    report(out[2].get("text") == want_c.get("text") and out[2]["finish_reason"] == fin(want_c) and
           out[2].get("object") == "text_completion", "openai client: completion = generate", json.dumps(out[2])[:200])
    report(out[3].get("text") == want_cs.get("text") and out[3]["finish_reason"] == fin(want_cs),
           "openai client: streamed completion with a stop string = generate --stop", json.dumps(out[3])[:200])
    report(out[4].get("ids") == ["smallmind-default"] and out[4].get("objects") == ["model"],
           "openai client: models.list", json.dumps(out[4]))
    report(out[5].get("status") == 404, "openai client: another model name is a 404", json.dumps(out[5])[:160])
    lp = (out[6].get("logprobs") or {}).get("content") or []
    report(len(lp) == 5 and all(len(t["top_logprobs"]) == 3 and t["logprob"] <= 0 and
                                abs(t["top_logprobs"][0]["logprob"] - t["logprob"]) < 1e-4 for t in lp),
           "openai client: logprobs with top_logprobs 3 (greedy: the chosen one is the best)", json.dumps(lp)[:200])
    want_b = twin(sm, model, "Who made the light?", "--chat", "--chat-template", tpl, "--system", "Be brief.",
                  "-n", "30", "--temp", "0", "--logit-bias", "32-100", "--logit-bias", "101-100", "-l", "116+5")
    report(out[7].get("text") == want_b.get("text") and not {" ", "e"} & set(out[7].get("text") or " "),
           "openai client: streamed chat with logit_bias = generate --logit-bias (no space, no 'e')",
           json.dumps(out[7])[:200] + json.dumps(want_b)[:100])
    report(out[8].get("status") == 400 and "token 300 is not in the vocabulary" in json.dumps(out[8]),
           "openai client: logit_bias of a token beyond the vocabulary is a 400", json.dumps(out[8])[:200])


def choices(sm, model, tpl, s, node, npm_dir):
    """n completions of each prompt, lists of prompts, token prompts: choice j of prompt p (index p n + j)
    is the text of that prompt alone with seed + j."""
    prompts = ["And God said", "In the beginning"]
    ids = [json.loads(s.post("/tokenize", {"content": p, "add_special": True})[1])["tokens"] for p in prompts]
    msgs = [{"role": "user", "content": "Who made the light?"}]
    base = {"model": "smallmind-default", "max_tokens": 24, "temperature": 0.9, "seed": 11}
    calls = [
        {"op": "completion", "stream": False, "params": dict(base, prompt=prompts, n=2, logprobs=2)},
        {"op": "completion", "stream": True, "params": dict(base, prompt=prompts, n=2,
                                                            stream_options={"include_usage": True})},
        {"op": "chat", "stream": True, "params": {"model": "smallmind-default", "messages": msgs, "n": 3, "max_tokens": 20,
                                                  "temperature": 0.9, "seed": 5}},
        {"op": "chat", "stream": False, "params": {"model": "smallmind-default", "messages": msgs, "n": 3, "max_tokens": 20,
                                                   "temperature": 0.9, "seed": 5}},
        {"op": "completion", "stream": False, "params": {"model": "smallmind-default", "prompt": ids, "max_tokens": 20,
                                                         "temperature": 0}},
        {"op": "completion", "stream": True, "params": {"model": "smallmind-default", "prompt": ids[0], "max_tokens": 20,
                                                        "temperature": 0}},
        {"op": "completion", "stream": False, "params": {"model": "smallmind-default", "prompt": [prompts[0], "x" * 2000], "n": 2}},
    ]
    out, err = node_calls(node, npm_dir, s.port, calls)
    if len(out) != len(calls):
        report(False, "the openai client ran every call with n and prompt lists", err[-300:])
        return
    fin = lambda w: {"eos": "stop"}.get(w.get("finish_reason"), w.get("finish_reason"))
    want = [[twin(sm, model, p, "-n", "24", "--temp", "0.9", "-s", str(11 + j)) for j in range(2)] for p in prompts]
    flat = [w for ws in want for w in ws]
    usage = {"prompt_tokens": sum(ws[0]["tokens_prompt"] for ws in want),
             "completion_tokens": sum(w["tokens_generated"] for w in flat)}
    for k, name in ((0, "a completion"), (1, "a streamed completion")):
        ch = out[k].get("choices") or []
        u = out[k].get("usage") or {}
        ok = ([c["index"] for c in ch] == [0, 1, 2, 3] and [c["text"] for c in ch] == [w["text"] for w in flat] and
              [c["finish_reason"] for c in ch] == [fin(w) for w in flat] and
              {x: u.get(x) for x in usage} == usage and (k == 0 or all(c["finishes"] == 1 for c in ch)))
        report(ok, f"openai client: {name} of 2 prompts with n 2: choice p*2+j = generate of prompt p with seed "
                   "11+j; usage counts each prompt once", json.dumps(out[k])[:300])
    lp = [len(((c.get("logprobs") or {}).get("tokens") or [])) for c in out[0].get("choices") or []]
    report(lp == [w["tokens_generated"] for w in flat], "n 2 with logprobs: each choice its own tokens", str(lp))
    wc = [twin(sm, model, "Who made the light?", "--chat", "--chat-template", tpl, "-n", "20", "--temp", "0.9",
               "-s", str(5 + j)) for j in range(3)]
    for k in (2, 3):
        ch = out[k].get("choices") or []
        report([c["text"] for c in ch] == [w["text"] for w in wc] and [c["index"] for c in ch] == [0, 1, 2] and
               (k == 3 or all(c["role"] == "assistant" for c in ch)),
               f"openai client: {'streamed ' if k == 2 else ''}chat with n 3 = generate --chat with seeds 5, 6, 7",
               json.dumps(out[k])[:300])
    greedy = [twin(sm, model, p, "-n", "20", "--temp", "0") for p in prompts]
    report([c["text"] for c in out[4].get("choices") or []] == [w["text"] for w in greedy],
           "openai client: a list of token-id prompts (from /tokenize) = generate of their texts", json.dumps(out[4])[:300])
    report(out[5].get("text") == greedy[0]["text"], "openai client: one token-id prompt, streamed = generate",
           json.dumps(out[5])[:200])
    report(out[6].get("status") == 400 and "context" in out[6].get("error", ""),
           "a list whose second prompt is longer than the context: the whole request is a 400", json.dumps(out[6])[:200])
    st, b = s.post("/v1/completions", {"prompt": prompts[0], "max_tokens": 24, "temperature": 0.9, "seed": 12})
    report(st == 200 and json.loads(b)["choices"][0]["text"] == want[0][1]["text"] and
           s.metric("smallmind_requests_processing") == 0,
           "after it the server runs on: nothing left in its slots, seed 12 alone = choice 1 of seed 11")


def echo(sm, model, s, node, npm_dir):
    """Completions with "echo" through the openai client: the prompt's text before the choice's, and with logprobs
    its tokens first (the first null), each log-probability against NumPy's log-softmax of dump_logits; max_tokens
    0 (scoring); streamed, the chunks' text and tokens together are prompt + the greedy completion."""
    try:
        import numpy as np
    except ImportError:
        report(False, "echo: no NumPy for this Python (make test installs python3-numpy)")
        return
    prompt = "And God said, Let there be light: and there was light. And God saw the light."
    base = {"model": "smallmind-default", "prompt": prompt, "temperature": 0, "echo": True}
    calls = [{"op": "completion", "stream": False, "params": dict(base, max_tokens=0, logprobs=1)},
             {"op": "completion", "stream": True, "params": dict(base, max_tokens=12, logprobs=0)},
             {"op": "completion", "stream": False, "params": dict(base, max_tokens=12, n=2)}]
    out, err = node_calls(node, npm_dir, s.port, calls)
    if len(out) != len(calls):
        report(False, "the openai client ran every echo call", err[-300:])
        return
    ids = list(prompt.encode())  # the default model: a token's id is its byte, no BOS
    d = subprocess.run([os.path.join(os.path.dirname(sm), "dump_logits"), model, "auto", "1", "batch",
                        ",".join(map(str, ids))], capture_output=True)
    z = np.frombuffer(d.stdout, dtype=np.float32).reshape(len(ids), 256).astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    ls = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    lp = out[0].get("logprobs") or {}
    lps, tops = lp.get("token_logprobs") or [], lp.get("top_logprobs") or []
    ok = (out[0].get("text") == prompt and "".join(lp.get("tokens") or []) == prompt and len(lps) == len(ids) and
          len(tops) == len(ids) and lps[0] is None and tops[0] is None and out[0].get("finish_reason") == "length" and
          (out[0].get("usage") or {}).get("completion_tokens") == 0)
    worst = max((abs(lps[i] - ls[i - 1][ids[i]]) for i in range(1, len(ids))), default=1) if ok else 1
    best = all(list(tops[i]) == [chr(int(np.argmax(ls[i - 1])))] for i in range(1, len(ids))) if ok else False
    report(ok and worst < 2e-3 and best, "openai client: echo with max_tokens 0 and logprobs 1: the prompt's text and "
           "tokens, the first null, each log-probability and best alternative = NumPy's log-softmax of dump_logits",
           f"worst {worst}; " + json.dumps(out[0])[:300])
    want = twin(sm, model, prompt, "-n", "12", "--temp", "0").get("text")
    st = out[1]
    tl = ((st.get("choices") or [{}])[0]).get("token_logprobs") or [0]
    report(st.get("text") == prompt + want and "".join(st.get("logprobs") or []) == st.get("text") and
           tl[0] is None and len(tl) == len(ids) + 12 and all(x <= 0 for x in tl[1:]),
           "openai client: streamed echo with logprobs: chunks' text and tokens = the prompt + generate's completion",
           json.dumps(st)[:300])
    report([c.get("text") for c in out[2].get("choices") or []] == [prompt + want] * 2,
           "openai client: echo with n 2: each choice's text after the prompt's", json.dumps(out[2])[:300])


def client_stories(sm, stories, node, npm_dir, tmp):
    """stories260K (a real llama2.c model, its SentencePiece tokenizer) through the client."""
    tok = os.path.join(stories, "tok512.bin")
    s = Server(sm, os.path.join(stories, "stories260K.bin"), "--tokenizer", tok)
    try:
        calls = [{"op": "completion", "stream": s_, "params": {"model": "smallmind-default", "prompt": "Once upon a time",
                                                               "max_tokens": 60, "temperature": 0}}
                 for s_ in (False, True)]
        out, err = node_calls(node, npm_dir, s.port, calls)
        want = twin(sm, os.path.join(stories, "stories260K.bin"), "Once upon a time", "--tokenizer", tok, "-n", "60",
                    "--temp", "0")
        report(s.up and len(out) == 2 and out[0].get("text") == want.get("text") == out[1].get("text"),
               "openai client on stories260K: completion, streamed and not, = generate", (json.dumps(out) + err)[:200])
    finally:
        s.stop()


def endpoints(s, sm, model):
    st, b = s.get("/health")
    report(st == 200 and json.loads(b) == {"status": "ok"}, "GET /health")
    st, b = s.post("/tokenize", {"content": "And God said", "with_pieces": True})
    toks = json.loads(b)["tokens"] if st == 200 else []
    p = subprocess.run([sm, "tokenize", "-m", model, "-p", "And God said"], capture_output=True)
    want = [int(x) for x in p.stdout.split()]
    report(st == 200 and [t["id"] for t in toks] == want and "".join(t["piece"] for t in toks) == "And God said",
           "POST /tokenize = smallmind tokenize (with pieces)", b.decode()[:200])
    st, b = s.post("/detokenize", {"tokens": want})
    report(st == 200 and json.loads(b) == {"content": "And God said"}, "POST /detokenize", b.decode()[:120])
    st, b = s.post("/detokenize", {"tokens": [99, 97, 102, 195, 169]})  # a character's two bytes, two tokens
    report(st == 200 and json.loads(b) == {"content": "caf\u00e9"},
           "POST /detokenize: a character whose bytes span tokens comes out whole", b.decode()[:120])
    st, b = s.get("/metrics")
    text = b.decode()
    names = ["smallmind_requests_total", "smallmind_tokens_generated_total", "smallmind_requests_waiting",
             "smallmind_prompt_tokens_cached_total", "smallmind_requests_processing"]
    report(st == 200 and all(f"# TYPE {n} " in text for n in names) and s.metric("smallmind_requests_total") is not None,
           "GET /metrics: Prometheus text with requests, tokens, queue and cache hits", text[:200])
    st, b = s.post("/v1/completions", {"prompt": "x", "max_tokens": 2}, headers={"Content-Type": "application/json"})
    report(st == 200, "POST /v1/completions with curl-style headers")


def load(sm, model, s, tmp):
    """64 concurrent streamed requests x 3 rounds, each = its generate twin (one batch run gives the twins)."""
    n = 64
    bodies = [{"prompt": f"And the {i} sons of", "max_tokens": 8 + i % 17, "temperature": 0.8, "seed": i,
               "stream": True} for i in range(n)]
    recs = "".join(json.dumps({"id": i, "prompt": b["prompt"], "max_tokens": b["max_tokens"],
                               "temperature": 0.8, "seed": i}) + "\n" for i, b in enumerate(bodies))
    p = subprocess.run([sm, "generate", "-m", model, "--batch", "-", "-q"], input=recs.encode(), capture_output=True)
    want = {r["id"]: r for r in map(json.loads, p.stdout.decode().splitlines())}
    bad = []
    for rnd in range(3):
        res = [None] * n

        def go(i):
            res[i] = stream(s.port, "/v1/completions", bodies[i])
        ts = [threading.Thread(target=go, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for i, r in enumerate(res):
            text, finish, events, usage, error = r
            w = want.get(i, {})
            if error or text != w.get("text") or finish != {"eos": "stop"}.get(w.get("finish_reason"),
                                                                               w.get("finish_reason")):
                bad.append((rnd, i, error, text, w.get("text")))
    report(not bad, "load: 64 concurrent streamed completions x 3 rounds, each = its generate twin", str(bad[:3])[:400])


HOSTILE = [
    ("POST", "/v1/chat/completions", b"{not json", 400),
    ("POST", "/v1/chat/completions", b"[1, 2]", 400),
    ("POST", "/v1/chat/completions", b"", 400),
    ("POST", "/v1/chat/completions", b'{"messages": "hi"}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": []}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user"}], "temperature": "hot"}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "n": 129}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "frob": 1}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "top_p": 7}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "model": "other"}', 404),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "stop": [1]}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "integer", "multipleOf": 0.5}}}}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "a": 1, "a": 2}', 400),
    ("POST", "/v1/completions", b'{"prompt": 5}', 400),
    ("POST", "/v1/completions", b'{"prompt": ["a", 5]}', 400),
    ("POST", "/v1/completions", b'{"prompt": [[1, 2], "b"]}', 400),
    ("POST", "/v1/completions", b'{"prompt": []}', 400),
    ("POST", "/v1/completions", b'{"prompt": [[]]}', 400),
    ("POST", "/v1/completions", b'{"prompt": [-1]}', 400),
    ("POST", "/v1/completions", b'{"prompt": [1.5]}', 400),
    ("POST", "/v1/completions", b'{"prompt": [2147483648]}', 400),
    ("POST", "/v1/completions", b'{"prompt": [[5], [99999]]}', 400),  # beyond the vocabulary
    ("POST", "/v1/completions", b'{"prompt": [{"a": 1}]}', 400),
    ("POST", "/v1/completions", b'{"prompt": ' + json.dumps(["a"] * 100).encode() + b', "n": 21}', 400),
    ("POST", "/v1/completions", b'{}', 400),
    ("POST", "/v1/completions", b'{"prompt": "x", "echo": 1}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "echo": true}', 400),
    ("POST", "/v1/completions", b'{"prompt": "x", "logprobs": 9}', 400),
    ("POST", "/v1/completions", b'{"prompt": "x", "seed": 1.5}', 400),
    ("POST", "/v1/completions", b'{"prompt": "x", "stream_options": {"include_usage": true}}', 400),
    ("POST", "/v1/completions", b'{"prompt": "' + b"x" * 2000 + b'"}', 400),  # longer than the context
    ("GET", "/v1/completions", b"", 405),
    ("GET", "/v1/chat/completions", b"", 405),
    ("POST", "/v1/models", b"{}", 405),
    ("POST", "/health", b"{}", 405),
    ("GET", "/v1/nothing", b"", 404),
    ("GET", "/../../etc/passwd", b"", 404),
    ("PUT", "/v1/completions", b'{"prompt": "x"}', 405),
    ("DELETE", "/v1/models", b"", 405),
    ("POST", "/tokenize", b'{"content": 5}', 400),
    ("POST", "/detokenize", b'{"tokens": [99999999]}', 400),
    ("POST", "/detokenize", b'{"tokens": "x"}', 400),
    ("POST", "/tokenize", b"\xc3\x28", 400),
]


def raw(port, data, read=True):
    """Sends raw bytes; returns the status line's code (None if the server closed without one)."""
    with socket.create_connection(("127.0.0.1", port), timeout=LIMIT) as c:
        c.sendall(data)
        if not read:
            return None
        buf = b""
        while b"\r\n" not in buf:
            chunk = c.recv(4096)
            if not chunk:
                break
            buf += chunk
        try:
            return int(buf.split(b" ")[1])
        except (IndexError, ValueError):
            return None


def hostile(sm, model, s):
    bad, n = [], 0
    for method, path, body, want in HOSTILE:
        st, b = s.request(method, path, body)
        n += 1
        shape = True
        if st and st >= 400 and st != 405:
            try:
                e = json.loads(b)["error"]
                shape = isinstance(e["message"], str) and "type" in e
            except (ValueError, KeyError, TypeError):
                shape = False
        if st != want or not shape:
            bad.append((method, path, body[:60], st, b[:120]))
    # variations: every field of a body with a wrong type
    fields = {"max_tokens": ["x", -5, 1.5], "temperature": [[], -1, "0.5"], "top_p": [{}, 1.5, -0.1],
              "seed": ["s", 2.5], "stop": [3, [1, 2], ["x" * 100]], "n": ["1", 0, 129, 2.5], "stream": [1, "yes"],
              "presence_penalty": ["p", 1000], "frequency_penalty": [True, -1000], "logprobs": ["y", 3.5],
              "top_k": [-3, "k"], "min_p": [2, "m"], "repeat_penalty": [0, -1], "user": [5], "metadata": [1, "m"],
              "response_format": ["json", {"type": "xml"}, {"type": "json_schema"}], "messages": [None],
              "logit_bias": [{"50": 500}, 3, {"x": 1}, {"999": 1}],
              "tools": [[{"type": "function", "function": {"name": "f"}}]],
              "suffix": ["x"], "best_of": [3]}
    for k, vals in fields.items():
        for v, kind in ((v, kind) for v in vals for kind in ("chat", "completion")):
            body = {"messages": [{"role": "user", "content": "x"}]} if kind == "chat" else {"prompt": "x"}
            body[k] = v
            st, b = s.post("/v1/chat/completions" if kind == "chat" else "/v1/completions", body)
            n += 1
            if st != 400 or b"error" not in b:
                bad.append((kind, k, v, st, b[:100]))
    # at the HTTP level
    st, b = s.post("/v1/completions", b'{"prompt": "' + b"x" * (5 << 20) + b'"}')
    n += 1
    if st != 413:
        bad.append(("5 MB body", st))
    for data in (b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Length: zz\r\n\r\n", b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n",
                 b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{\"pr", b"\x00\x01\x02\r\n\r\n"):
        n += 1
        try:
            code = raw(s.port, data)
        except OSError:
            code = None
        if code is not None and code < 400 and code != 200:
            bad.append((data[:40], code))
    # slowloris: a request that stops half-way is cut when idle, and does not hold others up
    slow = socket.create_connection(("127.0.0.1", s.port), timeout=LIMIT)
    slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
    n += 1
    st, b = s.post("/v1/completions", {"prompt": "And God said", "max_tokens": 5, "temperature": 0})
    closed = slow.recv(4096) is not None  # waits until the server cuts it (its idle limit)
    slow.close()
    if st != 200:
        bad.append(("a request beside a slow one", st))
    report(not bad and n >= 100, f"{n} hostile requests: each a 4xx in OpenAI's error shape (or the connection "
                                 "refused at the HTTP level), none a crash", str(bad[:4])[:400])
    report(closed, "a slow half-sent request is cut when idle, other requests go on")
    st, b = s.post("/v1/completions", {"prompt": "And God said", "max_tokens": 40, "temperature": 0})
    want = twin(sm, model, "And God said", "-n", "40", "--temp", "0")
    report(st == 200 and json.loads(b)["choices"][0]["text"] == want.get("text") and s.p.poll() is None,
           "after the hostile requests the server still answers correctly")


def long_model(tmp):
    """A random model with a context of 32768 tokens and the byte tokenizer (no end-of-text token): a request
    for all of them runs on for a minute or more (4 layers of 64: its attention alone is 2.7e11 multiply-adds),
    so it is still running when the test looks, however fast the attention (1 layer of 32 ran out in a few
    seconds once the AVX2 attention lost its masked loads). The default model's 256 tokens can end before
    the next request."""
    out = os.path.join(tmp, "long")
    if not os.path.exists(out):
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "sm_random_model.py"), "--out", out, "--arch",
                        "llama", "--layers", "4", "--heads", "2", "--embd", "64", "--ff", "128", "--ctx", "32768",
                        "--vocab", "256"], check=True, stdout=subprocess.DEVNULL)
    return out


def leaving(sm, model, tmp):
    """A client that goes away frees its slot at once (--parallel 1: the next request runs)."""
    s = Server(sm, long_model(tmp), "--parallel", "1", "--queue", "1")
    try:
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=LIMIT)
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": "And", "max_tokens": 100000, "stream": True,
                                                              "temperature": 1}).encode(),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read1(100)  # it runs
        busy = wait_until(lambda: s.metric("smallmind_requests_processing") == 1, limit=60)
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        freed = wait_until(lambda: s.metric("smallmind_requests_processing") == 0, limit=120)
        st, b = s.post("/v1/completions", {"prompt": "And God said", "max_tokens": 5, "temperature": 0})
        report(busy and freed and st == 200, "a streaming client that leaves frees its slot; the next request runs")
        # n 3 through one slot: the client leaves while its first choice runs, the others still to come
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=LIMIT)
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": "And", "max_tokens": 100000, "stream": True,
                                                              "n": 3, "temperature": 1}).encode(),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read1(100)
        busy = wait_until(lambda: s.metric("smallmind_requests_processing") == 1, limit=60)
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        freed = wait_until(lambda: (lambda m: m.get("smallmind_requests_processing") == 0 and
                                    m.get("smallmind_requests_waiting") == 0)(s.metrics()), limit=120)
        st, b = s.post("/v1/completions", {"prompt": "And God said", "max_tokens": 5, "temperature": 0, "n": 2})
        report(busy and freed and st == 200 and len(json.loads(b)["choices"]) == 2,
               "a client of n 3 that leaves: its running and waiting choices end; the next request runs",
               f"{busy} {freed} {st} {b[:100]}")
        # the queue: one running, one waiting, the third refused with 503
        conns = []
        for _ in range(2):
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=LIMIT)
            c.request("POST", "/v1/completions", body=json.dumps({"prompt": "And", "max_tokens": 100000,
                                                                  "stream": True}).encode(),
                      headers={"Content-Type": "application/json"})
            conns.append(c)
        queued = wait_until(lambda: (lambda m: m.get("smallmind_requests_processing") == 1 and
                                     m.get("smallmind_requests_waiting") == 1)(s.metrics()), limit=60)
        st, b = s.post("/v1/completions", {"prompt": "x", "max_tokens": 2})
        report(queued and st == 503 and b"error" in b, "past the queue's bound: 503 in OpenAI's error shape",
               f"{queued} {st} {b[:100]}")
        for c in conns:
            c.close()
    finally:
        s.stop()


def stopping(sm, tmp):
    s = Server(sm, long_model(tmp), "--parallel", "2")
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=LIMIT)
    c.request("POST", "/v1/completions", body=json.dumps({"prompt": "And", "max_tokens": 100000,
                                                          "stream": True}).encode(),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read1(100)
    rc = s.stop(signal.SIGINT)
    try:
        rest = r.read()  # the stream ends: its last event, then [DONE]
    except (http.client.IncompleteRead, ConnectionError) as e:
        rest = repr(e).encode()
    report(rc == 0 and rest.rstrip().endswith(b"data: [DONE]"),
           "SIGINT with a request in flight: its stream ends whole, the server exits 0", f"exit {rc} {rest[-200:]}")
    c.close()


def api_key(sm, model):
    s = Server(sm, model, "--api-key", "s3cret")
    try:
        st1, _ = s.post("/v1/completions", {"prompt": "x", "max_tokens": 1})
        st2, b2 = s.post("/v1/completions", {"prompt": "x", "max_tokens": 1},
                         headers={"Authorization": "Bearer wrong", "Content-Type": "application/json"})
        st3, _ = s.post("/v1/completions", {"prompt": "x", "max_tokens": 1},
                        headers={"Authorization": "Bearer s3cret", "Content-Type": "application/json"})
        st4, _ = s.get("/health")
        report(st1 == 401 and st2 == 401 and b"invalid_api_key" in b2 and st3 == 200 and st4 == 200,
               "--api-key: 401 without it or with another, 200 with it; /health is open", f"{st1} {st2} {st3} {st4}")
    finally:
        s.stop()
    p = subprocess.run([sm, "serve", "-m", model, "--host", "not-an-address"], capture_output=True)
    report(p.returncode == 2 and b"--host" in p.stderr, "--host of something else: a usage error")


def balancer(sm, model, tmp):
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if not nginx:
        skip("two servers behind nginx", "nginx is not installed (apt-get install nginx-light)")
        return
    a, b = Server(sm, model), Server(sm, model)
    port = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    subprocess.run([os.path.join(ROOT, "scripts", "nginx_balance.sh"), str(port), f"127.0.0.1:{a.port}",
                    f"127.0.0.1:{b.port}"], stdout=open(conf, "w"), check=True)
    ng = subprocess.Popen([nginx, "-p", tmp, "-c", conf, "-g", "daemon off;"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    try:
        class Front(Server):
            def __init__(self, p):
                self.port, self.p = p, ng
        f = Front(port)
        up = wait_until(lambda: ng.poll() is not None or f.get("/health")[0] == 200, limit=60)
        want = twin(sm, model, "And God said", "-n", "12", "--temp", "0")
        ok = up
        for _ in range(12):
            st, body = f.post("/v1/completions", {"prompt": "And God said", "max_tokens": 12, "temperature": 0})
            ok = ok and st == 200 and json.loads(body)["choices"][0]["text"] == want.get("text")
        ra, rb = a.metric("smallmind_requests_total"), b.metric("smallmind_requests_total")
        report(ok and ra and rb and ra + rb >= 12, "two servers behind nginx (scripts/nginx_balance.sh): every answer "
               "right, both servers used", f"{ra} {rb} {ng.stderr.read1(300) if ng.poll() is not None else ''}")
    finally:
        ng.terminate()
        ng.wait()
        a.stop(), b.stop()


if __name__ == "__main__":
    sys.exit(main())
