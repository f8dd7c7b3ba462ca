#!/usr/bin/env bash
# Threads on a shared machine: what `generate` costs when the CPUs are busy,
# beside the same command on one thread, and N processes at once beside the
# same N one after another; with the idle figures, so that nothing is lost
# when the machine is free. Several binaries (a before and an after) run
# interleaved in every sample; each figure is the median of N samples.
#
#   scripts/bench_load.sh [BIN ...]        (default build/smallmind)
#   N=5 LOOPS=2 PROCS=4 TOKENS=250 scripts/bench_load.sh /tmp/before/smallmind build/smallmind
#
# Scenarios, each for models/default (4 x 256, byte vocabulary) and a 15M
# Llama (6 x 288, vocabulary 32,000, random weights), `generate -n TOKENS`:
#   idle    wall time at -t 1 and at the default threads; `bench` prefill
#           (128 tokens) and decode (64 tokens) rates at the default threads
#   busy    the same next to LOOPS spinning shell loops (`while :; do :; done`)
#   procs   PROCS processes at once with the default threads (xargs -P), and
#           the same PROCS one after another
#   one CPU -t 1 and -t 2 with the process's CPUs set to one (taskset -c): two
#           threads on one CPU
# Benchmarks, not tests: nothing here asserts a time.
set -eu
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=(build/smallmind)
N=${N:-5} LOOPS=${LOOPS:-2} PROCS=${PROCS:-4} TOKENS=${TOKENS:-250}
PY=$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 )
MD=build/bench-models
SHARED=${SM_SHARED:-../shared}
mkdir -p $MD
B0=${BINS[0]}

# The 15M Llama: a llama2.c checkpoint of random weights, converted.
if [ ! -f $MD/s15/config.json ]; then
    $PY -c "
import random, struct, array
dim,hid,L,H,KVH,V,ctx=288,768,6,6,6,32000,256; hs=dim//H; r=random.Random(1)
n=V*dim+L*dim+4*L*dim*dim+L*dim+3*L*dim*hid+dim+ctx*hs
a=array.array('f', (r.gauss(0, 0.05) for _ in range(n)))
open('$MD/s15.bin','wb').write(struct.pack('<7i',dim,hid,L,H,KVH,V,ctx)+a.tobytes())"
    $B0 convert $MD/s15.bin $MD/s15 --tokenizer $SHARED/models/tokenizers/llama2/tokenizer.bin >/dev/null
fi
MODELS=(models/default $MD/s15)
NAMES=(default 15M)

ms() { date +%s%N; }
elapsed() { echo $(( ($(ms) - $1) / 1000000 )); }
gen() { # gen BIN MODEL [THREADS]: one generate, quiet
    "$1" generate -m "$2" -p "And God said" -n $TOKENS --temp 0 -q ${3:+-t $3} >/dev/null
}
busy_on() { PIDS=(); for _ in $(seq $LOOPS); do sh -c 'while :; do :; done' & PIDS+=($!); done; sleep 0.2; }
busy_off() { kill "${PIDS[@]}" 2>/dev/null; wait "${PIDS[@]}" 2>/dev/null || true; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

R=$(mktemp -d)
trap 'busy_off 2>/dev/null; rm -rf $R' EXIT
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, kernel $(uname -r)"
echo "default threads: $($B0 generate -m models/default -p a -n 1 --stats 2>&1 >/dev/null | sed -n 's/.*kernels, \([0-9]*\) thread.*/\1/p')"
echo "$N samples, medians; generate -n $TOKENS; busy = $LOOPS spinning loops; procs = $PROCS at once"
for s in $(seq $N); do
    for b in "${!BINS[@]}"; do
        bin=${BINS[$b]}
        for m in 0 1; do
            M=${MODELS[$m]} k=$b.$m
            t=$(ms); gen $bin $M 1; elapsed $t >>$R/idle1.$k
            t=$(ms); gen $bin $M; elapsed $t >>$R/idle.$k
            $bin bench -m $M --json -n 64 --prompt-tokens 128 >$R/bj 2>/dev/null # (a pipe would run beside it)
            $PY -c 'import json,sys; r=json.load(sys.stdin); print(r["prefill_tokens_per_s"], r["decode_tokens_per_s"])' <$R/bj >$R/b
            cut -d' ' -f1 $R/b >>$R/pre.$k; cut -d' ' -f2 $R/b >>$R/dec.$k
            busy_on
            t=$(ms); gen $bin $M 1; elapsed $t >>$R/busy1.$k
            t=$(ms); gen $bin $M; elapsed $t >>$R/busy.$k
            busy_off
            if command -v taskset >/dev/null; then
                c=$($PY -c 'import os; print(min(os.sched_getaffinity(0)))')
                t=$(ms); taskset -c $c "$bin" generate -m $M -p "And God said" -n $TOKENS --temp 0 -q -t 1 >/dev/null
                elapsed $t >>$R/one1.$k
                t=$(ms); taskset -c $c "$bin" generate -m $M -p "And God said" -n $TOKENS --temp 0 -q -t 2 >/dev/null
                elapsed $t >>$R/one2.$k
            fi
            t=$(ms); for _ in $(seq $PROCS); do gen $bin $M; done; elapsed $t >>$R/seq.$k
            t=$(ms)
            for _ in $(seq $PROCS); do gen $bin $M & done; wait
            elapsed $t >>$R/par.$k
        done
    done
done

printf '\n%-24s %-7s %9s %9s %9s %9s %9s %9s %7s %9s %9s %7s %9s %9s\n' binary model \
    "idle -t1" "idle def" "prefill/s" "decode/s" "busy -t1" "busy def" ratio "${PROCS} seq" "${PROCS} at once" ratio \
    "1 CPU -t1" "1 CPU -t2"
for b in "${!BINS[@]}"; do
    for m in 0 1; do
        k=$b.$m
        i1=$(median <$R/idle1.$k) id=$(median <$R/idle.$k) pr=$(median <$R/pre.$k) de=$(median <$R/dec.$k)
        b1=$(median <$R/busy1.$k) bd=$(median <$R/busy.$k) sq=$(median <$R/seq.$k) pa=$(median <$R/par.$k)
        o1=$( [ -f $R/one1.$k ] && median <$R/one1.$k || echo -) o2=$( [ -f $R/one2.$k ] && median <$R/one2.$k || echo -)
        printf '%-24s %-7s %6s ms %6s ms %9.0f %9.0f %6s ms %6s ms %6.2fx %6s ms %6s ms %6.2fx %6s ms %6s ms\n' \
            "${BINS[$b]}" ${NAMES[$m]} $i1 $id $pr $de $b1 $bd \
            "$(echo "$bd $b1" | awk '{print $1 / $2}')" $sq $pa "$(echo "$pa $sq" | awk '{print $1 / $2}')" $o1 $o2
    done
done
