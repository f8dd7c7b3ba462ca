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
