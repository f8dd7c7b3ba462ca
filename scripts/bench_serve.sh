#!/usr/bin/env bash
# Server throughput: smallmind serve and llama.cpp's llama-server on the same
# GGUF file, the same load from the same client on loopback: C concurrent
# streamed /v1/completions requests, R rounds, M tokens each (usage counted
# from the responses). The servers run one after the other within every
# sample (interleaved), medians of N; each is started once per sample and
# waited for until /health answers. A benchmark, not a test.
#
#   LLAMA_CPP=/path/llama.cpp/build/bin MODEL=F.gguf C=64 R=3 M=32 N=3 scripts/bench_serve.sh [BIN]
set -eu
BIN=$(realpath "${1:-build/smallmind}")
MODEL=${MODEL:-../shared/models/gguf/stories260K-f32.gguf}
C=${C:-64} R=${R:-3} M=${M:-32} N=${N:-3} P=${P:-8}
LC=${LLAMA_CPP:-}
PY=$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 )
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2); else print "-" }'; }
port=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
load() { # load PORT: C concurrent streamed requests x R rounds; prints "requests/s tokens/s"
    $PY - "$1" "$C" "$R" "$M" <<'EOF'
import http.client, json, sys, threading, time
port, C, R, M = (int(x) for x in sys.argv[1:5])
def one(i, out):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    body = {"prompt": f"Once upon a time {i}", "max_tokens": M, "temperature": 0.8, "seed": i, "stream": True,
            "stream_options": {"include_usage": True}}
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    toks = 0
    for line in r.read().decode().split("\n"):
        if line.startswith("data: {"):
            u = json.loads(line[6:]).get("usage")
            if u: toks = u["completion_tokens"]
    out[i] = toks
t0 = time.time()
total = 0
for _ in range(R):
    out = [0] * C
    ts = [threading.Thread(target=one, args=(i, out)) for i in range(C)]
    for t in ts: t.start()
    for t in ts: t.join()
    total += sum(out)
el = time.time() - t0
print(f"{C * R / el:.2f} {total / el:.1f}")
EOF
}
wait_up() { for _ in $(seq 600); do curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"
echo "$MODEL: $C concurrent streamed completions x $R rounds, $M tokens each, --parallel $P, 2 threads, medians of $N"
ours="" theirs="" ours_t="" theirs_t=""
ctx=$("$BIN" info -m "$MODEL" 2>/dev/null | sed -n 's/.* context \([0-9]*\),.*/\1/p')
for s in $(seq "$N"); do
    "$BIN" serve -m "$MODEL" --port "$port" --parallel "$P" -t 2 -q & pid=$!
    wait_up "$port"; set -- $(load "$port"); ours="$ours $1" ours_t="$ours_t $2"
    kill "$pid"; wait "$pid" || true
    if [ -n "$LC" ]; then
        "$LC/llama-server" -m "$MODEL" --port "$port" -np "$P" -t 2 -c $((P * ctx)) --log-disable >/dev/null 2>&1 & pid=$!
        wait_up "$port"; set -- $(load "$port"); theirs="$theirs $1" theirs_t="$theirs_t $2"
        kill "$pid"; wait "$pid" || true
    fi
done
printf '  smallmind serve: %8s requests/s, %8s tokens/s   (samples:%s)\n' "$(echo $ours | median)" "$(echo $ours_t | median)" "$ours_t"
[ -n "$LC" ] && printf '  llama-server:    %8s requests/s, %8s tokens/s   (samples:%s)\n' "$(echo $theirs | median)" \
    "$(echo $theirs_t | median)" "$theirs_t"
exit 0
