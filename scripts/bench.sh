#!/usr/bin/env bash
# make bench: speed of the seed shape (4 layers, 8 heads, 256 wide, context
# 256, 256-byte vocabulary; random weights) on 1 and 2 threads, with every
# kernel table this CPU runs. Figures go to docs/performance.md by hand, with
# this command. Benchmarks, not tests: nothing here asserts a time.
#   scripts/bench.sh [BIN]
set -eu
BIN=${1:-build/smallmind}
PY=$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 )
M=build/bench-models/seed
if [ ! -f $M/config.json ]; then
    $PY scripts/sm_random_model.py --out $M --force --layers 4 --heads 8 --embd 256 --ctx 256 --vocab 256 --seed 1 >/dev/null
fi
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"
printf '%-8s %-7s %14s %14s %12s %10s\n' kernels threads "prefill tok/s" "decode tok/s" "ms/token" "load ms"
for k in avx512 avx2 scalar; do
    for t in 1 2; do
        out=$($BIN bench -m $M --kernels $k -t $t --prompt-tokens 128 -n 128 --reps 5 --json 2>/dev/null) || continue
        echo "$out" | $PY -c 'import json,sys; r=json.load(sys.stdin); print("%-8s %-7d %14.0f %14.0f %12.4f %10.2f" % (r["kernels"], r["threads"], r["prefill_tokens_per_s"], r["decode_tokens_per_s"], r["ms_per_token"], r["load_ms"]))'
    done
done

# Training: tokens/s of `smallmind train` on the default shape (batch 16 x 256
# tokens), steps 3..8 of a run (the first steps warm the caches), beside the
# PyTorch script on the same shape and thread count when python3-torch exists.
TEXT=build/bench-models/train.txt
if [ ! -f $TEXT ]; then
    for i in $(seq 3000); do printf 'And the evening and the morning were the %d day. ' $i; done >$TEXT
fi
echo
echo "training, 4 layers, 8 heads, 256 wide, batch 16 x 256 tokens"
printf '%-24s %-7s %12s\n' program threads "tokens/s"
for t in 1 2; do
    rm -rf build/bench-models/train-out
    $BIN train --data $TEXT --out build/bench-models/train-out --steps 8 --eval-every 0 \
        --checkpoint-every 0 --val-fraction 0 -t $t -q
    tps=$(awk -F, 'NR > 3 { s += $6; n++ } END { printf "%.0f", s / n }' build/bench-models/train-out/loss.csv)
    printf '%-24s %-7d %12s\n' "smallmind train" $t "$tps"
    if $PY -c 'import torch' 2>/dev/null; then
        $PY scripts/train_ref.py bench --threads $t --steps 4 | sed 's/^/    /'
    fi
done

# Batches: 16 prompts of 32 bytes, 64 tokens each, on the GPT-2-small shape
# (12 layers, 768 wide, 50,257 vocabulary, context 1024; random f32 weights),
# 2 threads: aggregate tokens/s of `generate --batch` decoding 1 record at a
# time and 16 together (each record's text is identical either way).
G=build/bench-models/gpt2-small
if [ ! -f $G/config.json ]; then
    $PY scripts/sm_random_model.py --out $G --force --layers 12 --heads 12 --embd 768 --ctx 1024 --vocab 50257 --seed 1 >/dev/null
fi
$PY -c '
import random
random.seed(1)
words = "the of and to in that he shall unto for his a I they be is him not them it with all thou".split()
for i in range(16):
    s = ""
    while len(s) < 32: s += random.choice(words) + " "
    print(s[:32])' >build/bench-models/prompts16.txt
echo
echo "batch of 16 prompts x 32 tokens, 64 tokens each, GPT-2-small shape, 2 threads"
for p in 1 16; do
    $BIN generate -m $G --batch build/bench-models/prompts16.txt -n 64 --parallel $p -t 2 --stats -q --temp 0 \
        2>&1 >build/bench-models/batch-$p.jsonl | sed 's/^/    /'
done
cmp -s <(sed 's/"timing.*//' build/bench-models/batch-1.jsonl) <(sed 's/"timing.*//' build/bench-models/batch-16.jsonl) \
    && echo "    records identical at --parallel 1 and 16" || echo "    RECORDS DIFFER between --parallel 1 and 16"

# 16-bit weights: the GPT-2-small shape with its matrices f32, f16 and bf16
# (same random values rounded; vectors f32), decode and prefill, 2 threads.
# Decoding reads every weight once per token, so half the bytes should be up
# to twice the tokens/s.
echo
echo "GPT-2-small shape, weight matrices f32 / f16 / bf16, 2 threads (128-token prompt, 64 decoded)"
printf '%-6s %12s %14s %14s\n' dtype "weights MB" "prefill tok/s" "decode tok/s"
for d in f32 f16 bf16; do
    D=build/bench-models/gpt2-small-$d
    [ $d = f32 ] && D=$G
    if [ ! -f $D/config.json ]; then
        $PY scripts/sm_random_model.py --out $D --force --layers 12 --heads 12 --embd 768 --ctx 1024 --vocab 50257 --seed 1 --dtype $d >/dev/null
    fi
    out=$($BIN bench -m $D -t 2 --prompt-tokens 128 -n 64 --reps 3 --json 2>/dev/null) || continue
    mb=$(( $(stat -c %s $D/model.bin) / 1000000 ))
    echo "$out" | $PY -c 'import json,sys; r=json.load(sys.stdin); print("%-6s %12s %14.0f %14.1f" % (sys.argv[1], sys.argv[2], r["prefill_tokens_per_s"], r["decode_tokens_per_s"]))' $d $mb
done
