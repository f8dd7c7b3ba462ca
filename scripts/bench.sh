#!/usr/bin/env bash
# make bench: what this machine can do and how close smallmind comes to it.
#   1. memory bandwidth (STREAM-like triad, `smallmind bench`) on 1 and 2 threads;
#   2. smallmind's matrix-matrix product against OpenBLAS sgemm (build/bench_gemm,
#      when libopenblas-dev is installed) on 512^3, 768^3 and the models' shapes;
#      matrix-vector products against a read probe (build/bench_gemv); each kernel
#      table's operations and the choice per operation (`smallmind bench --pick-kernels`);
#   3. for each model shape (random weights): decode tokens/s beside the bound
#      memory bandwidth sets (bandwidth / weight bytes read per token), prefill,
#      load and allocations per token, 2 threads; written to
#      build/bench-models/decode.tsv for scripts/plot_decode.sh;
#   4. every kernel table on the seed shape, 1 and 2 threads;
#   5. training, and batched decoding;
#   6. the rows of docs/performance.md's side-by-side table (scripts/bench_peers.sh,
#      3 samples; with the peers too when LLAMA_CPP / LLAMA2C name their builds);
#   7. tokenizers encoding 1 MB (scripts/bench_tokenizer.sh);
#   8. threads on a busy machine: next to spinning processes, and four processes
#      at once (scripts/bench_load.sh);
#   9. batch jobs: an OpenAI batch file by 1 process and by GNU parallel (scripts/bench_batch.sh).
# Figures go to docs/performance.md by hand, with this command. Benchmarks,
# not tests: nothing here asserts a time.
#   scripts/bench.sh [BIN]
set -eu
BIN=${1:-build/smallmind}
BDIR=$(dirname "$BIN")
PY=$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 )
MD=build/bench-models
mkdir -p $MD
jget() { $PY -c 'import json,sys; r=json.load(sys.stdin); print(" ".join(str(eval(e, {}, r)) for e in sys.argv[1:]))' "$@"; }
mk() { # mk DIR ARGS...: a random model unless DIR has one
    local d=$1; shift
    [ -f $d/config.json ] || $PY scripts/sm_random_model.py --out $d --force --seed 1 "$@" >/dev/null
}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"

M=$MD/seed
mk $M --layers 4 --heads 8 --embd 256 --ctx 256 --vocab 256
echo
echo "memory bandwidth (triad, 3 x 64 MiB, best of 5)"
for t in 1 2; do
    printf '  %d thread%s  %6s GB/s\n' $t "$([ $t = 1 ] || echo s)" \
        "$($BIN bench -m $M -t $t -n 1 --prompt-tokens 1 --reps 1 --json | jget 'round(bandwidth_gb_per_s, 1)')"
done

echo
if [ -x $BDIR/bench_gemm ]; then
    # OpenBLAS picks its kernels from the CPU model; a virtual CPU that names no
    # model ("Intel Xeon Processor") makes it fall back to Prescott (SSE3) kernels
    # at a fifth of its speed. Name the AVX-512 kernels when the CPU has AVX-512,
    # so the comparison is against OpenBLAS at its best.
    # (An OPENBLAS_CORETYPE already in the environment is overridden there:
    # the AVX-512 table is set beside OpenBLAS's AVX-512 kernels.)
    core=${OPENBLAS_CORETYPE:-}
    grep -qw avx512f /proc/cpuinfo && core=SkylakeX
    echo "matrix-matrix products, out (T x N) = x (T x K) . w (N x K)^T, f32 (OpenBLAS core: ${core:-auto})"
    env ${core:+OPENBLAS_CORETYPE=$core} $BDIR/bench_gemm 1 2 | sed "s/^/  /"
    if grep -qw avx512f /proc/cpuinfo; then
        echo "the AVX2 table beside OpenBLAS's AVX2 (Haswell) kernels, which it uses on Zen 1-3"
        OPENBLAS_CORETYPE=Haswell $BDIR/bench_gemm --kernels avx2 1 2 | sed 's/^/  /'
    fi
else
    echo "no GEMM comparison: OpenBLAS is not installed (apt-get install libopenblas-dev; make bench builds it)"
fi

echo
if [ -x $BDIR/bench_gemv ]; then
    echo "matrix-vector products (decode) beside a read probe over the same bytes"
    $BDIR/bench_gemv 1 2 | sed 's/^/  /'
fi

echo
echo "kernels per operation: every table on fixed cases (smallmind bench --pick-kernels)"
$BIN bench --pick-kernels -t 2 | sed 's/^/  /'

# The model shapes: name, generator arguments. Decode with a 128-token prompt;
# prefill 512 tokens where the context allows.
G=$MD/gpt2-small
mk $G --layers 12 --heads 12 --embd 768 --ctx 1024 --vocab 50257
mk $MD/gpt2-small-f16 --layers 12 --heads 12 --embd 768 --ctx 1024 --vocab 50257 --dtype f16
mk $MD/gpt2-small-bf16 --layers 12 --heads 12 --embd 768 --ctx 1024 --vocab 50257 --dtype bf16
mk $MD/seed-gpt2vocab --layers 4 --heads 8 --embd 256 --ctx 256 --vocab 50257
mk $MD/llama-15m --arch llama --layers 6 --heads 6 --embd 288 --ff 768 --ctx 256 --vocab 32000
mk $MD/llama-15m-f16 --arch llama --layers 6 --heads 6 --embd 288 --ff 768 --ctx 256 --vocab 32000 --dtype f16
mk $MD/gpt2-medium-f16 --layers 24 --heads 16 --embd 1024 --ctx 1024 --vocab 50257 --dtype f16
echo
echo "decode against the memory-bandwidth bounds, 2 threads (128-token prompt, 128 tokens decoded, best of 3)"
echo "  triad: triad bandwidth / weight bytes per token (an estimate, not a bound: the triad also writes);"
echo "  read bound: read bandwidth over the working set of a decode step (weights + KV at the mean"
echo "  context) / that working set"
printf '  %-22s %8s %9s %10s %10s %8s %10s %8s %11s %9s %8s\n' model "params M" "MB/token" "decode t/s" "triad t/s" "of triad" \
    "read bound" "of read" "prefill t/s" "load ms" "allocs/t"
TSV=$MD/decode.tsv
printf 'model\tparams\tbytes_per_token\tdecode\tbound\tread_bound\n' >$TSV
for m in seed seed-gpt2vocab llama-15m llama-15m-f16 gpt2-small gpt2-small-bf16 gpt2-small-f16 gpt2-medium-f16; do
    D=$MD/$m
    P=$($BIN info -m $D | sed -n 's/^parameters: *//p')
    ptok=512; ctx=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["n_ctx"])' $D/config.json)
    [ $ctx -lt 640 ] && ptok=128
    pre=$($BIN bench -m $D -t 2 --prompt-tokens $ptok -n 1 --reps 2 --json | jget 'round(prefill_tokens_per_s)')
    read -r dec bound bpt load apt rb < <($BIN bench -m $D -t 2 --prompt-tokens 128 -n 128 --reps 3 --json |
        jget decode_tokens_per_s bound_tokens_per_s weight_bytes_per_token load_ms allocs_per_token \
            read_bound_tokens_per_s)
    awk -v m=$m -v p=$P -v b=$bpt -v d=$dec -v u=$bound -v r=$rb -v pre="$pre ($ptok)" -v l=$load -v a=$apt \
        'BEGIN { printf "  %-22s %8.1f %9.1f %10.1f %10.1f %7.0f%% %10.1f %7.0f%% %11s %9.2f %8s\n", m, p / 1e6, b / 1e6, d, u, 100 * d / u, r, 100 * d / r, pre, l, a }'
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' $m $P $bpt $dec $bound $rb >>$TSV
done
echo "  (decode above the triad rate: the weights fit in cache, or the reads outrun the triad's mix; $TSV has the table)"

echo
echo "seed shape (4 layers, 256 wide, 256-byte vocabulary), every kernel table"
printf '  %-8s %-7s %14s %14s %12s %10s\n' kernels threads "prefill tok/s" "decode tok/s" "ms/token" "load ms"
for k in avx512 avx2 scalar; do
    for t in 1 2; do
        out=$($BIN bench -m $M --kernels $k -t $t --prompt-tokens 128 -n 128 --reps 5 --json 2>/dev/null) || continue
        echo "$out" | $PY -c 'import json,sys; r=json.load(sys.stdin); print("  %-8s %-7d %14.0f %14.0f %12.4f %10.2f" % (r["kernels"], r["threads"], r["prefill_tokens_per_s"], r["decode_tokens_per_s"], r["ms_per_token"], r["load_ms"]))'
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
        # Debian's torch multiplies through the system BLAS: netlib's reference
        # BLAS (a tenth of the speed) unless OpenBLAS is installed, whose kernels
        # are named as for bench_gemm above (it takes Zen 5 for Haswell)
        blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)
        case $blas in *openblas*) ;; *) echo "    (PyTorch's BLAS is $blas, not OpenBLAS: apt-get install libopenblas0-pthread for a fair figure)" ;; esac
        core=${OPENBLAS_CORETYPE:-}; grep -qw avx512f /proc/cpuinfo && core=SkylakeX
        env ${core:+OPENBLAS_CORETYPE=$core} $PY scripts/train_ref.py bench --threads $t --steps 4 | sed 's/^/    /'
    fi
done

# Batches: 16 prompts of 32 bytes, 64 tokens each, on the GPT-2-small shape
# (12 layers, 768 wide, 50,257 vocabulary, context 1024; random f32 weights),
# 2 threads: aggregate tokens/s of `generate --batch` decoding 1 record at a
# time and 16 together (each record's text is identical either way).
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

echo
echo "the side-by-side rows (scripts/bench_peers.sh, 3 samples each)"
N=${N:-3} BIN=$BIN bash scripts/bench_peers.sh | sed 's/^/  /'

echo
echo "tokenizers: tokens/s encoding 1 MB (scripts/bench_tokenizer.sh, 3 samples)"
N=${N:-3} bash scripts/bench_tokenizer.sh $BIN | sed 's/^/  /'

echo
echo "threads on a busy machine (scripts/bench_load.sh, 3 samples)"
N=${N:-3} bash scripts/bench_load.sh $BIN | sed 's/^/  /'

echo
echo "batch jobs: an OpenAI batch file by 1 process x 1 or 2 threads and by GNU parallel (scripts/bench_batch.sh)"
N=${N:-3} bash scripts/bench_batch.sh $BIN | sed 's/^/  /'
