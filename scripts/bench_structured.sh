#!/usr/bin/env bash
# Structured output's cost: decode tokens/s with and without a JSON Schema on
# the TinyLlama-1.1B shape (q4_0, random weights) with Qwen 2.5's and Llama 3's
# vocabularies, smallmind and llama.cpp (llama-completion --json-schema) on the
# same GGUF file, each run in turn within every sample (interleaved), medians
# of N. smallmind's masks are timed one by one (--stats: median, p99);
# llama.cpp prints only its sampling time in all, so its cost per token is
# (sampling time with the schema - without) / tokens. A benchmark, not a test.
#
#   LLAMA_CPP=/path/llama.cpp/build/bin N=3 scripts/bench_structured.sh [BIN]
#
# The models: a vocabulary GGUF written by `smallmind convert` from a tiny
# model carrying the tokenizer (tests/vocab_models.py), random TinyLlama-shape
# weights by scripts/gguf_random.py, quantized by llama.cpp's llama-quantize
# (else smallmind convert --dtype q4_0). MD (default build/bench-models/structured).
set -eu
BIN=$(realpath "${1:-build/smallmind}")
N=${N:-3}
MD=${MD:-build/bench-models/structured}
LC=${LLAMA_CPP:-}
PY=$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 )
SHARED=$(realpath "${SHARED:-../shared/models}")
TOKENS=${TOKENS:-128}
mkdir -p "$MD"
SCHEMA='{"type": "array", "minItems": 30, "maxItems": 40, "items": {"type": "object", "required": ["name", "age", "tags"], "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}, "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 6}}}}}'
echo "$SCHEMA" > "$MD/schema.json"
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2); else print "-" }'; }

model() { # model VOCAB: the TinyLlama-shape q4_0 GGUF with that vocabulary
    local v=$1 f=$MD/tl-$1-q4_0.gguf
    [ -f "$f" ] && { echo "$f"; return; }
    $PY - "$SHARED" "$MD" "$v" >&2 <<'EOF'
import sys, os
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
from vocab_models import vocab_models
vocab_models(sys.argv[1], sys.argv[2])
EOF
    "$BIN" convert "$MD/vocab-$v" "$MD/vocab-$v.gguf" -q >&2
    $PY scripts/gguf_random.py --arch llama --out "$MD/tl-$v-f16.gguf" --vocab-from "$MD/vocab-$v.gguf" --layers 22 \
        --heads 32 --kv-heads 4 --embd 2048 --ff 5632 --ctx 2048 --dtype f16 >&2
    if [ -n "$LC" ]; then "$LC/llama-quantize" "$MD/tl-$v-f16.gguf" "$f" Q4_0 2 >/dev/null 2>&1
    else "$BIN" convert "$MD/tl-$v-f16.gguf" "$f" --dtype q4_0 -q >&2; fi
    rm -f "$MD/tl-$v-f16.gguf"
    echo "$f"
}

# llama.cpp's time per token in its sampler (common_sampler_sample: the grammar's masks and
# checks, and the sampling), call by call, from perf uprobes at its entry and return (root
# and linux-perf; else only its total is known). Prints "median p99" in ms.
PROBED=""
if [ -n "$LC" ] && command -v perf >/dev/null && [ "$(id -u)" = 0 ]; then
    LIBC=$(readlink -f "$LC/libllama-common.so" 2>/dev/null || true)
    ADDR=$(nm -D "$LIBC" 2>/dev/null | awk '/ T _Z21common_sampler_sampleP14common_samplerP13llama_contextib$/ {print $1}')
    if [ -n "$ADDR" ] && perf probe -q -x "$LIBC" --add "smsample=0x$ADDR" 2>/dev/null &&
        perf probe -q -x "$LIBC" --add "smsample=0x$ADDR%return" 2>/dev/null; then
        PROBED=1
        trap 'perf probe -q -d "probe_libllama:smsample*" 2>/dev/null || true' EXIT
    else
        perf probe -q -d "probe_libllama:smsample*" 2>/dev/null || true
    fi
fi
call_times() { # call_times ARGS...: llama-completion under the probes; "median p99" of its sampler calls, ms
    perf record -q -o "$MD/perf.data" -e probe_libllama:smsample -e probe_libllama:smsample__return -- \
        "$LC/llama-completion" "$@" </dev/null >/dev/null 2>&1
    perf script -i "$MD/perf.data" -F event,time 2>/dev/null | $PY -c '
import sys
t0, d = None, []
for ln in sys.stdin:
    t = float(ln.split(":")[0])
    if "return" in ln:
        if t0 is not None: d.append((t - t0) * 1e3)
        t0 = None
    else: t0 = t
d.sort()
print("%.3f %.3f" % (d[len(d) // 2], d[min(len(d) - 1, int(len(d) * 0.99))]) if d else "- -")'
    rm -f "$MD/perf.data"
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"
echo "$("$BIN" --version); llama.cpp: ${LC:-not given}; $TOKENS tokens from a 3-token prompt, greedy, 2 threads, medians of $N"
for v in qwen2_5 llama3; do
    f=$(model $v)
    plain="" con="" med="" p99="" lplain="" lcon="" lsamp0="" lsamp1="" cmed0="" cp990="" cmed1="" cp991=""
    for s in $(seq "$N"); do
        o=$("$BIN" generate -m "$f" -p "List people:" -n "$TOKENS" --temp 0 -t 2 --stats 2>&1 >/dev/null)
        plain="$plain $(echo "$o" | sed -n 's/^generated: .*(\([0-9.]*\) tokens\/s.*/\1/p')"
        o=$("$BIN" generate -m "$f" -p "List people:" -n "$TOKENS" --temp 0 -t 2 --stats --json-schema "$MD/schema.json" 2>&1 >/dev/null)
        con="$con $(echo "$o" | sed -n 's/^generated: .*(\([0-9.]*\) tokens\/s.*/\1/p')"
        med="$med $(echo "$o" | sed -n 's/^grammar: .*median \([0-9.]*\) ms.*/\1/p')"
        p99="$p99 $(echo "$o" | sed -n 's/^grammar: .*p99 \([0-9.]*\) ms.*/\1/p')"
        if [ -n "$LC" ]; then
            for k in 0 1; do
                extra=()
                [ $k = 1 ] && extra=(--json-schema "$SCHEMA")
                o=$("$LC/llama-completion" -m "$f" -p "List people:" -n "$TOKENS" --temp 0 -t 2 -no-cnv --ignore-eos \
                    "${extra[@]}" 2>&1 </dev/null)
                tps=$(echo "$o" | sed -n 's/.* eval time = .* runs.*, *\([0-9.]*\) tokens per second.*/\1/p' | tail -1)
                samp=$(echo "$o" | sed -n 's/.*sampling time = *\([0-9.]*\) ms.*/\1/p' | tail -1)
                if [ $k = 0 ]; then lplain="$lplain $tps" lsamp0="$lsamp0 $samp"; else lcon="$lcon $tps" lsamp1="$lsamp1 $samp"; fi
                if [ -n "$PROBED" ]; then
                    read -r cm cp < <(call_times -m "$f" -p "List people:" -n "$TOKENS" --temp 0 -t 2 -no-cnv --ignore-eos "${extra[@]}")
                    if [ $k = 0 ]; then cmed0="$cmed0 $cm" cp990="$cp990 $cp"; else cmed1="$cmed1 $cm" cp991="$cp991 $cp"; fi
                fi
            done
        fi
    done
    printf '  %-8s smallmind: %6.2f tokens/s plain, %6.2f with the schema (%.3fx); masks median %s ms, p99 %s ms\n' \
        "$v" "$(echo $plain | median)" "$(echo $con | median)" \
        "$(awk "BEGIN { print $(echo $con | median) / $(echo $plain | median) }")" "$(echo $med | median)" "$(echo $p99 | median)"
    if [ -n "$LC" ]; then
        printf '  %-8s llama.cpp: %6.2f tokens/s plain, %6.2f with the schema (%.3fx); sampling %.1f ms plain, %.1f ms with the schema: %.2f ms per token for the grammar\n' \
            "$v" "$(echo $lplain | median)" "$(echo $lcon | median)" \
            "$(awk "BEGIN { print $(echo $lcon | median) / $(echo $lplain | median) }")" "$(echo $lsamp0 | median)" \
            "$(echo $lsamp1 | median)" "$(awk "BEGIN { print ($(echo $lsamp1 | median) - $(echo $lsamp0 | median)) / $TOKENS }")"
    fi
    if [ -n "$PROBED" ]; then
        printf '  %-8s llama.cpp sampler per token (perf uprobes): median %s ms, p99 %s ms plain; median %s ms, p99 %s ms with the schema\n' \
            "$v" "$(echo $cmed0 | median)" "$(echo $cp990 | median)" "$(echo $cmed1 | median)" "$(echo $cp991 | median)"
    fi
done
