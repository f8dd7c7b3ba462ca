#!/usr/bin/env bash
# Side by side with the peers: the rows of docs/performance.md's "beside
# llama.cpp and llama2.c" table, each program run in turn within every
# sample (interleaved, so a noisy moment of a shared machine hits all of
# them), median of N samples. Benchmarks, not tests.
#
#   LLAMA_CPP=/path/llama.cpp/build/bin LLAMA2C=/path/llama2.c scripts/bench_peers.sh [ROWS...]
#
# BIN_BEFORE may name a second smallmind binary (a build before a change):
# every smallmind sampler of a row runs again with it, interleaved with the
# rest, so before and after are measured side by side in the same samples.
# IK_LLAMA may name ik_llama.cpp's build/bin (the prefill rows run its llama-bench with
# -rtr 1; it aborts on GPT-2 models, so it is on the Llama rows only).
# LLAMA_CPP_AVX2 may name a second llama.cpp build made without AVX-512
# (-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF), to set beside
# smallmind's AVX2 table on a machine that has AVX-512.
# The peers are yours to build (docs/performance.md says how and at which
# commits); this script only runs them. Without them it prints smallmind's
# figures alone. ROWS: l15 l15-1t l15-f16 l15-f16-1t seed gpt2-f16 gpt2-f32 prefill batch batch-total batch-tl batch-tl-q4_k_m batch-tl-q5_k_m
# batch-tl-q6_k batch-tl-f16 batch-tl-bf16 batch-gpt2-q8_0 batch-gpt2-q4_k_m gemm (default all), and the quantized ones (issue 17; a 1.1B model takes 4 GB
# of disk): tl-q4_0 tl-q8_0 tl-q4_0-1t tl-q8_0-1t tl-f16 tl-bf16 tl-pre-q4_0 tl-pre-q8_0
# tl-pre-f16 tl-pre-bf16 tl-pre512-q4_0 tl-pre512-q8_0 tl-pre512-q4_k_m tl-pre512-f16 tl-pre512-bf16 gpt2-q8_0 gpt2-q4_0 gpt2-pre-q8_0, and the k mixes: tl-q4_k_m tl-q5_k_m
# tl-q6_k tl-q4_k_m-1t tl-pre-q4_k_m tl-pre-q6_k tl-pre512-q6_k gpt2-q4_k_m; prefix reuse (issue 35):
# prefix-gpt2 prefix-tl noprefix-gpt2 noprefix-tl ttft-tl (llama-server too). Quantized GGUF files are made by the
# given llama.cpp build's llama-quantize, ours by `smallmind convert --dtype`,
# each from random weights of the same shape. N (default 5; 0: only make the rows' models), MD (model
# folder, default build/peer-models).
set -eu
BIN=${BIN:-build/smallmind}
N=${N:-5}
MD=${MD:-build/peer-models}
LC=${LLAMA_CPP:-}
LC2=${LLAMA_CPP_AVX2:-}
L2=${LLAMA2C:-}
IK=${IK_LLAMA:-}
B0=${BIN_BEFORE:-}
SHARED=$(realpath ${SHARED:-../shared/models})
PY=$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 )
ROWS=${*:-l15 l15-1t l15-f16 l15-f16-1t seed gpt2-f16 gpt2-f32 prefill batch batch-total gemm}
mkdir -p $MD
jget() { $PY -c 'import json,sys; r=json.load(sys.stdin); r=r[0] if isinstance(r,list) else r; print(round(r[sys.argv[1]], 1))' "$1"; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2); else print "-" }'; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs," \
    "$(grep -ow -m1 avx512f /proc/cpuinfo || echo 'no AVX-512')"
echo "$($BIN --version | head -1)${B0:+; before: $($B0 --version | head -1) ($B0)}; llama.cpp: ${LC:-not given}; llama.cpp AVX2: ${LC2:-not given}; llama2.c: ${L2:-not given}; ik_llama.cpp: ${IK:-not given}"

# Models: smallmind directories from sm_random_model.py; GGUF from
# gguf_random.py (GPT-2) or llama.cpp's converter (the 15M Llama, from the
# llama2.c checkpoint that llama2.c itself runs).
mk() { local d=$MD/$1; shift; [ -f $d/config.json ] || $PY scripts/sm_random_model.py --out $d --force --seed 1 "$@" >/dev/null; }
mkg() { local f=$MD/$1.gguf; shift; [ -f $f ] || $PY scripts/gguf_random.py --out $f --tokenizer $SHARED/tokenizers/gpt2 "$@"; }
need_l15() {
    [ -f $MD/s15.bin ] || $PY -c "
import numpy as np, struct
dim,hid,L,H,KVH,V,ctx=288,768,6,6,6,32000,256; hs=dim//H; r=np.random.default_rng(1)
n=V*dim+L*dim+4*L*dim*dim+L*dim+3*L*dim*hid+dim+ctx*hs
open('$MD/s15.bin','wb').write(struct.pack('<7i',dim,hid,L,H,KVH,V,ctx)+(r.standard_normal(n,dtype=np.float32)*0.05).tobytes())"
    [ -f $MD/s15/config.json ] || $BIN convert $MD/s15.bin $MD/s15 --tokenizer $SHARED/tokenizers/llama2/tokenizer.bin >/dev/null
    if [ -n "$LC" ] && [ ! -f $MD/s15.gguf ]; then
        $LC/llama-convert-llama2c-to-ggml --copy-vocab-from-model $SHARED/llamacpp-vocab/ggml-vocab-llama-spm.gguf \
            --llama2c-model $MD/s15.bin --llama2c-output-model $MD/s15.gguf >/dev/null 2>&1
    fi
}

# The TinyLlama-1.1B shape (22 x 2048, ff 5632, 32 heads / 4 KV, vocab 32,000)
# and GPT-2 small, quantized: ours from an f16 model, llama.cpp's from an f16 GGUF.
need_tl_gguf() { # the TinyLlama shape at q4_0 as one GGUF file (llama.cpp's quantizer, else ours)
    [ -f $MD/tl-f16.gguf ] || $PY scripts/gguf_random.py --arch llama --out $MD/tl-f16.gguf --layers 22 --heads 32 \
        --kv-heads 4 --embd 2048 --ff 5632 --ctx 2048 --dtype f16 \
        --vocab-from $SHARED/llamacpp-vocab/ggml-vocab-llama-spm.gguf
    [ -f $MD/tl-q4_0.gguf ] || { [ -n "$LC" ] && $LC/llama-quantize $MD/tl-f16.gguf $MD/tl-q4_0.gguf Q4_0 2 >/dev/null 2>&1; } ||
        $BIN convert $MD/tl-f16.gguf $MD/tl-q4_0.gguf --dtype q4_0 -q -t 2
}
need_q() { # need_q NAME QTYPE (f16: the f16 sources every other type is made from)
    local n=$1 q=$2
    if [ $n = tl ]; then
        mk tl-f16 --arch llama --layers 22 --heads 32 --kv-heads 4 --embd 2048 --ff 5632 --ctx 2048 \
            --vocab 32000 --untied --no-bias --dtype f16
        if [ -n "$LC" ] && [ ! -f $MD/tl-f16.gguf ]; then
            $PY scripts/gguf_random.py --arch llama --out $MD/tl-f16.gguf --layers 22 --heads 32 --kv-heads 4 \
                --embd 2048 --ff 5632 --ctx 2048 --dtype f16 \
                --vocab-from $SHARED/llamacpp-vocab/ggml-vocab-llama-spm.gguf
        fi
    else
        mk gpt2-small-f16 --layers 12 --heads 12 --embd 768 --ctx 1024 --vocab 50257 --dtype f16
        [ -n "$LC" ] && mkg gpt2-small-f16 --dtype f16
    fi
    local src=$MD/$n-f16; [ $n = gpt2 ] && src=$MD/gpt2-small-f16
    [ $q = f16 ] && return 0
    [ -f $MD/$n-$q/config.json ] || $BIN convert $src $MD/$n-$q --dtype $q -q -t 2
    if [ -n "$LC" ] && [ ! -f $MD/$n-$q.gguf ]; then
        $LC/llama-quantize $src.gguf $MD/$n-$q.gguf ${q^^} 2 >/dev/null 2>&1
    fi
}
sm_pre() { $BIN bench -m $1 -t 2 --prompt-tokens $2 -n 1 --reps 1 --json ${3:+--kernels $3} "${@:4}" | jget prefill_tokens_per_s; }
lc_pre() { $3/llama-bench -m $1 -p $2 -n 0 -t 2 -r 1 -o json 2>/dev/null | jget avg_ts; }
# ik_llama.cpp with its weights repacked for this CPU at load (-rtr 1), as its README advises
ik_pre() { $IK/llama-bench -m $1 -p $2 -n 0 -t 2 -r 1 -rtr 1 -o json 2>/dev/null | jget avg_ts; }

# One sample of each program: decode tokens/s from an empty context (the
# first token excluded), 128 tokens.
# The read bound `smallmind bench` measures beside it: read bandwidth over
# the bytes of a decode step / those bytes (the ceiling for any program).
# Greedy (--temp 0), as llama2.c -t 0 takes the argmax (llama-bench samples nothing); a build
# before bench took --temp gets the default sampler (top-k 40 at temperature 0.8).
sm_greedy() { $BIN bench --help | grep -q -- --temp && echo --temp 0; }
sm_bound() { $BIN bench -m $1 -t $2 --prompt-tokens 1 -n 128 --reps 1 --json | jget read_bound_tokens_per_s; }
sm_dec() { $BIN bench -m $1 -t $2 --prompt-tokens 1 -n 128 --reps 1 --json $(sm_greedy) ${3:+--kernels $3} "${@:4}" | jget decode_tokens_per_s; }
lc_dec() { ${3:-$LC}/llama-bench -m $1 -p 0 -n 128 -t $2 -r 1 -o json 2>/dev/null | jget avg_ts; }
# peers NAME ARGS: the llama.cpp builds given, each as one more program of the row
lcs() { local f=$1; shift; [ -n "$LC" ] && P+=("$f $* $LC"); [ -n "$LC2" ] && P+=("$f $* $LC2"); return 0; }
l2_dec() { (cd $L2 && OMP_NUM_THREADS=$2 ./run $1 -z $SHARED/tokenizers/llama2/tokenizer.bin -n 129 -t 0 -i "Once" 2>&1 >/dev/null |
    sed -n 's/.*achieved tok\/s: \([0-9.]*\).*/\1/p'); }

# row NAME GOAL: runs the sampler functions named after it, N samples
# interleaved, and prints each program's median and samples.
row() {
    local name=$1 goal=$2; shift 2
    local -a progs=("$@") more=() ; declare -A got=()
    if [ -n "$B0" ]; then # each smallmind sampler again with the build before a change
        for p in "${progs[@]}"; do case $p in sm_bound*) ;; sm_*) more+=("BIN=$B0 $p") ;; esac; done
        progs+=("${more[@]}")
    fi
    for i in $(seq $N); do
        for p in "${progs[@]}"; do got[$p]+=" $(eval "$p" || echo)"; done
    done
    printf '%s (goal: %s)\n' "$name" "$goal"
    for p in "${progs[@]}"; do
        printf '  %-58s median %8s   samples%s\n' "$p" "$(echo ${got[$p]:-} | median)" "${got[$p]:-}"
    done
}

for r in $ROWS; do case $r in
l15|l15-1t)
    need_l15; t=2; [ $r = l15-1t ] && t=1
    P=("sm_dec $MD/s15 $t" "sm_dec $MD/s15 $t avx2" "sm_bound $MD/s15 $t"); lcs lc_dec $MD/s15.gguf $t
    [ -n "$L2" ] && P+=("l2_dec $(realpath $MD)/s15.bin $t")
    row "decode, 15M Llama shape (6x288, vocab 32,000), f32, $t thread(s), tokens/s" ">= 1.3x the best peer" "${P[@]}" ;;
l15-f16|l15-f16-1t) # ours and llama.cpp's f16; llama2.c runs f32 only
    need_l15; t=2; [ $r = l15-f16-1t ] && t=1
    [ -f $MD/s15-f16/config.json ] || $BIN convert $MD/s15 $MD/s15-f16 --dtype f16 -q -t 2
    if [ -n "$LC" ] && [ ! -f $MD/s15-f16.gguf ]; then
        $LC/llama-quantize $MD/s15.gguf $MD/s15-f16.gguf F16 2 >/dev/null 2>&1
    fi
    P=("sm_dec $MD/s15-f16 $t" "sm_dec $MD/s15-f16 $t avx2" "sm_bound $MD/s15-f16 $t"); lcs lc_dec $MD/s15-f16.gguf $t
    [ -n "$L2" ] && P+=("l2_dec $(realpath $MD)/s15.bin $t")
    row "decode, 15M Llama shape, f16 weights (llama2.c: f32), $t thread(s), tokens/s" ">= 1.3x llama2.c" "${P[@]}" ;;
seed)
    mk seed-gpt2vocab --layers 4 --heads 8 --embd 256 --ctx 256 --vocab 50257
    P=("sm_dec $MD/seed-gpt2vocab 2" "sm_dec $MD/seed-gpt2vocab 2 avx2" "sm_bound $MD/seed-gpt2vocab 2"); lcs lc_dec $MD/seed-gpt2vocab.gguf 2
    [ -n "$LC$LC2" ] && mkg seed-gpt2vocab --layers 4 --heads 8 --embd 256 --ctx 256
    row "decode, seed shape with GPT-2 vocabulary (4x256, vocab 50,257), f32, 2 threads, tokens/s" ">= 1.5x llama.cpp" "${P[@]}" ;;
gpt2-f16|gpt2-f32)
    d=${r#gpt2-}; mk gpt2-small-$d --layers 12 --heads 12 --embd 768 --ctx 1024 --vocab 50257 --dtype $d
    P=("sm_dec $MD/gpt2-small-$d 2" "sm_dec $MD/gpt2-small-$d 2 avx2" "sm_bound $MD/gpt2-small-$d 2"); lcs lc_dec $MD/gpt2-small-$d.gguf 2
    [ -n "$LC$LC2" ] && mkg gpt2-small-$d --dtype $d
    row "decode, GPT-2 small shape, $d, 2 threads, tokens/s" "f16: >= 1.3x llama.cpp; f32: >= 90% of the read bound" "${P[@]}" ;;
prefill)
    mk gpt2-small-f32 --layers 12 --heads 12 --embd 768 --ctx 1024 --vocab 50257
    P=("sm_pre $MD/gpt2-small-f32 512" "sm_pre $MD/gpt2-small-f32 512 avx2"); lcs lc_pre $MD/gpt2-small-f32.gguf 512
    [ -n "$LC$LC2" ] && mkg gpt2-small-f32
    row "prefill 512 tokens, GPT-2 small shape, f32, 2 threads, tokens/s" ">= 650" "${P[@]}" ;;
batch|batch-total|batch-tl|batch-tl-q4_k_m|batch-tl-q5_k_m|batch-tl-q6_k|batch-tl-f16|batch-tl-bf16|batch-gpt2-q8_0|batch-gpt2-q4_k_m)
    # batch-tl: the same on the TinyLlama-1.1B shape at q4_0, every program on one GGUF file
    # (batch-tl-q4_k_m, batch-tl-q5_k_m, batch-tl-q6_k: llama.cpp's q4_k_m, q5_k_m, q6_k of it;
    # batch-gpt2-q8_0, batch-gpt2-q4_k_m: llama.cpp's of the GPT-2 small shape, its output tied)
    SBM=$MD/gpt2-small-f32 LBM=$MD/gpt2-small-f32.gguf tq= # tq: the TinyLlama rows' type
    case $r in
    batch-tl) tq=q4_0; need_tl_gguf; SBM=$MD/tl-q4_0.gguf LBM=$SBM ;;
    batch-tl-q?_k*|batch-tl-f16|batch-tl-bf16) tq=${r#batch-tl-}; need_q tl $tq; SBM=$MD/tl-$tq.gguf LBM=$SBM
        [ -f $SBM ] || SBM=$MD/tl-$tq ;; # (no llama.cpp: ours from the same f16 weights)
    batch-gpt2-*) tq=${r#batch-gpt2-}; need_q gpt2 $tq; SBM=$MD/gpt2-$tq.gguf LBM=$SBM
        [ -f $SBM ] || SBM=$MD/gpt2-$tq ;;
    *) mk gpt2-small-f32 --layers 12 --heads 12 --embd 768 --ctx 1024 --vocab 50257 ;;
    esac
    # 16 records of 16 tokens (bytes of the byte tokenizer, as -npp 16), 64
    # tokens each, decoded together. batch: generated tokens over the decode
    # time (the first token comes with the prompt), as llama-batched-bench's
    # S_TG; batch-total: prompt and generated tokens over prefill + decode,
    # as its S, and our wall clock with the model load beside it.
    for i in $(seq 16); do printf 'record %02d batch.\n' $i; done >$MD/prompts16.txt
    sm_batch() { # MODE [KERNELS [FLAGS...]]
        local s e; s=$(date +%s.%N)
        $BIN generate -m $SBM --batch $MD/prompts16.txt -n 64 --parallel 16 -t 2 --temp 0 -q \
            ${2:+--kernels $2} "${@:3}" >$MD/batch.out
        e=$(date +%s.%N)
        $PY -c '
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
mode, wall = sys.argv[2], float(sys.argv[4]) - float(sys.argv[3])
dec = max(r["timing"]["decode_ms"] for r in rs) / 1e3
pre = max(r["timing"]["prefill_ms"] for r in rs) / 1e3
gen = sum(r["tokens_generated"] for r in rs)
if mode == "decode": v = (gen - len(rs)) / dec
elif mode == "total": v = (gen + sum(r["tokens_prompt"] for r in rs)) / (pre + dec)
else: v = gen / wall
print(round(v, 1))' $MD/batch.out $1 $s $e
    }
    lc_batch() { $2/llama-batched-bench -m $LBM -c 2048 -b 2048 -ub 512 -npp 16 -ntg 64 -npl 16 -t 2 2>/dev/null |
        awk -F'|' -v c=$([ $1 = decode ] && echo 9 || echo 11) '$2 ~ /^ *16 *$/ { gsub(/ /, "", $c); print $c }'; }
    # ik_llama.cpp's, its weights repacked at load (-rtr; its table goes to stderr); it aborts on GPT-2, so the Llama rows only
    ik_batch() { $IK/llama-batched-bench -m $LBM -c 2048 -b 2048 -ub 512 -npp 16 -ntg 64 -npl 16 -t 2 -rtr 2>&1 |
        awk -F'|' '$2 ~ /^ *16 *$/ { gsub(/ /, "", $9); print $9 }'; }
    nm="GPT-2 small f32"
    if [ -n "$tq" ]; then
        P=("sm_batch decode" "sm_batch decode auto --no-repack" "sm_batch decode avx2")
        case $tq in f16) P[1]="sm_batch decode auto,f16=bf16" ;; bf16) P[1]="sm_batch decode auto,bf16=bf16" ;; esac
        lcs lc_batch decode
        name="decode tokens/s (generated over the decode time)"; goal=">= 1.5x llama.cpp"
        nm="TinyLlama-1.1B shape $tq"
        if [ ${r#batch-gpt2} != $r ]; then nm="GPT-2 small shape $tq"; goal=">= 2x llama.cpp"
        elif [ -n "$IK" ] && [ -x $IK/llama-batched-bench ]; then P+=("ik_batch"); fi
    elif [ $r = batch ]; then
        P=("sm_batch decode" "sm_batch decode avx2"); lcs lc_batch decode
        name="decode tokens/s (generated over the decode time)"; goal=">= 2x llama.cpp"
    else
        P=("sm_batch total" "sm_batch total avx2" "sm_batch wall"); lcs lc_batch total
        name="prompt + generated tokens over prefill + decode (sm_batch wall: generated over the wall clock, load included)"
        goal="the same row, whole runs"
    fi
    [ -n "$LC$LC2" ] && [ -z "$tq" ] && mkg gpt2-small-f32
    row "16 prompts x 64 tokens together, $nm, 2 threads, $name" "$goal" "${P[@]}" ;;
gemm)
    G=$(dirname $BIN)/bench_gemm
    if [ ! -x $G ]; then echo "gemm: $G is missing (make bench builds it when libopenblas-dev is installed)"; continue; fi
    # each table beside OpenBLAS's kernels for the same instructions (what it
    # picks on a CPU with them: Haswell's on Zen 1-3, SkylakeX's with AVX-512)
    echo "GEMM 768^3, GFLOPS (build/bench_gemm, best of 15; goal >= 1.0x OpenBLAS)"
    for k in avx512 avx2; do
        c=SkylakeX; [ $k = avx2 ] && c=Haswell
        OPENBLAS_CORETYPE=$c $G --kernels $k 1 2 2>/dev/null | grep -E '^768' |
            awk -v k=$k -v c=$c '{ printf "  %-7s OpenBLAS %-8s threads %s  smallmind %7s  OpenBLAS %7s  ratio %s\n", k, c, $2, $3, $4, $5 }'
    done ;;
tl-q4_0|tl-q8_0|tl-q4_k_m|tl-q5_k_m|tl-q6_k|tl-q4_0-1t|tl-q8_0-1t|tl-q4_k_m-1t|tl-f16|tl-bf16)
    q=${r#tl-}; q=${q%-1t}; t=2; [ ${r%-1t} != $r ] && t=1
    need_q tl $q
    P=("sm_dec $MD/tl-$q $t" "sm_dec $MD/tl-$q $t avx2" "sm_bound $MD/tl-$q $t"); lcs lc_dec $MD/tl-$q.gguf $t
    case $q in q4_0|q8_0|f16|bf16) P+=("sm_dec $MD/tl-$q $t auto --no-repack") ;; esac # the rows as stored
    row "decode, TinyLlama-1.1B shape, $q, $t thread(s), tokens/s" "q4_0, q4_k_m >= 1.5x llama.cpp, q8_0 >= 1.4x (16-bit: the read bound)" "${P[@]}" ;;
tl-pre-q4_0|tl-pre-q8_0|tl-pre-q4_k_m|tl-pre-q6_k|tl-pre-f16|tl-pre-bf16|tl-pre512-q4_0|tl-pre512-q8_0|tl-pre512-q4_k_m|tl-pre512-q6_k|tl-pre512-f16|tl-pre512-bf16)
    q=${r#tl-pre*-}; pp=128; [ ${r#tl-pre512} != $r ] && pp=512
    need_q tl $q
    P=("sm_pre $MD/tl-$q $pp" "sm_pre $MD/tl-$q $pp avx2"); lcs lc_pre $MD/tl-$q.gguf $pp
    case $q in q4_0|q8_0) P+=("sm_pre $MD/tl-$q $pp auto --no-repack") ;; esac # packed per call
    # 16-bit weights: also the other arithmetic of the avx512 table where the CPU has
    # AVX512-BF16 (f16 rounded to bf16 on vdpbf16ps, opt-in; bf16 widened exactly)
    case $q in f16) o=auto,f16=bf16 ;; bf16) o=auto,bf16=f32 ;; *) o= ;; esac
    [ -n "$o" ] && $BIN info -m $MD/tl-$q --kernels $o >/dev/null 2>&1 && P+=("sm_pre $MD/tl-$q $pp $o")
    [ -n "$IK" ] && P+=("ik_pre $MD/tl-$q.gguf $pp")
    row "prefill $pp tokens, TinyLlama-1.1B shape, $q, 2 threads, tokens/s" ">= 1.5x ik_llama.cpp" "${P[@]}" ;;
gpt2-q8_0|gpt2-q4_0|gpt2-q4_k_m)
    q=${r#gpt2-}; need_q gpt2 $q
    P=("sm_dec $MD/gpt2-$q 2" "sm_dec $MD/gpt2-$q 2 avx2" "sm_bound $MD/gpt2-$q 2"); lcs lc_dec $MD/gpt2-$q.gguf 2
    row "decode, GPT-2 small shape, $q, 2 threads, tokens/s" "q8_0 >= 1.4x llama.cpp, q4_0 >= 1.5x" "${P[@]}" ;;
gpt2-pre-q8_0)
    need_q gpt2 q8_0
    P=("sm_pre $MD/gpt2-q8_0 512" "sm_pre $MD/gpt2-q8_0 512 avx2"); lcs lc_pre $MD/gpt2-q8_0.gguf 512
    row "prefill 512 tokens, GPT-2 small shape, q8_0, 2 threads, tokens/s" ">= 1.5x llama.cpp" "${P[@]}" ;;
prefix-gpt2|prefix-tl|noprefix-gpt2|noprefix-tl)
    # 256 records: one 400-token instruction shared by all (prefix-*) or a
    # different one per record (noprefix-*), then a 20-40-token item; 16
    # tokens out, greedy. Records/s over the wall clock: ours
    # load the model in each run; llama-server's is loaded before its clock
    # starts (--parallel 8, prompts cached per slot, 8 curl clients).
    # Every program runs the same GGUF file, so the token counts agree.
    case $r in *gpt2) g=$MD/gpt2-small-f32.gguf; mkg gpt2-small-f32; nm="GPT-2 small f32" ;;
               *) need_tl_gguf; g=$MD/tl-q4_0.gguf; nm="TinyLlama-1.1B shape q4_0" ;; esac
    shared=1; [ ${r#no} != $r ] && shared=0
    $PY scripts/prefix_records.py --model $g --bin $BIN --shared $shared --out $MD/$r.jsonl --curl $MD/$r.curl
    sm_recs() { # [FLAGS...]: records/s of one --batch run
        local s e; s=$(date +%s.%N)
        $BIN generate -m $g --batch $MD/$r.jsonl -n 16 -t 2 --temp 0 -q "$@" >$MD/$r.out || return 1
        e=$(date +%s.%N); $PY -c "import sys; print(round(256 / (float(sys.argv[2]) - float(sys.argv[1])), 3))" $s $e
    }
    ls_recs() { # records/s of llama-server, started and loaded before the clock
        local port=$((18000 + RANDOM % 1000)) s e pid
        $1/llama-server -m $g --parallel 8 -c $((8 * 1024)) -t 2 --port $port >$MD/$r.lslog 2>&1 & pid=$!
        until curl -sf http://127.0.0.1:$port/health >/dev/null; do kill -0 $pid 2>/dev/null || return 1; sleep 0.5; done
        s=$(date +%s.%N)
        xargs -P 8 -I{} curl -s http://127.0.0.1:$port/completion -H 'Content-Type: application/json' -d @{} \
            <$MD/$r.curl >$MD/$r.lsout
        e=$(date +%s.%N); kill $pid; wait $pid 2>/dev/null || true
        # every request ran (on random weights the server answers some with a 500 about the
        # text's format after generating it: the work is done, so those count)
        [ $(grep -c 'print_timing.*total time' $MD/$r.lslog) = 256 ] || return 1
        $PY -c "import sys; print(round(256 / (float(sys.argv[2]) - float(sys.argv[1])), 3))" $s $e
    }
    # the GPT-2 rows also run ours at --parallel 16 and 32 and without the cache (a TinyLlama
    # run without it takes as long as the build before the change: ten minutes)
    # ours as a user runs it (--parallel as memory allows: 32 here) and at llama-server's 8
    P=("sm_recs" "sm_recs --parallel 8"); [ $shared = 1 ] && [ $r = prefix-gpt2 ] && P+=("sm_recs --parallel 16" "sm_recs --cache-ram 0")
    [ $r = prefix-tl ] && P+=("sm_recs --no-repack") # q4_0 as stored
    [ -n "$LC" ] && P+=("ls_recs $LC")
    row "256 records ($([ $shared = 1 ] && echo "a shared 400-token instruction" || echo "400 different tokens each") + 20-40-token item, 16 out), $nm, 2 threads, records/s" \
        "$([ $shared = 1 ] && echo ">= 4x smallmind before, >= 3x llama-server" || echo "no slower than before")" "${P[@]}" ;;
ttft-tl)
    # generate with a 1,500-token prompt: the first run writes --prompt-cache,
    # the second loads it. Time to the first token: wall clock of -n 1 (load
    # included) and the prefill_ms generate --json reports.
    need_tl_gguf; g=$MD/tl-q4_0.gguf
    $PY scripts/prefix_records.py --model $g --bin $BIN --long 1500 --out $MD/long1500.txt
    ttft() { # first|second|none: wall ms of -n 1
        local s e; [ $1 = first ] && rm -f $MD/long1500.pcache
        s=$(date +%s.%N)
        $BIN generate -m $g -f $MD/long1500.txt -n 1 -t 2 --temp 0 --json \
            $([ $1 != none ] && echo --prompt-cache $MD/long1500.pcache) >$MD/ttft.json || return 1
        e=$(date +%s.%N); $PY -c "import sys; print(round((float(sys.argv[2]) - float(sys.argv[1])) * 1e3))" $s $e
    }
    P=("ttft none" "ttft first" "ttft second")
    row "time to first token, 1,500-token prompt, TinyLlama-1.1B shape q4_0, 2 threads, ms (wall clock of generate -n 1)" \
        "second <= 10% of first" "${P[@]}" ;;
*) echo "unknown row $r (rows: l15 l15-1t l15-f16 l15-f16-1t seed gpt2-f16 gpt2-f32 prefill batch batch-total batch-tl batch-tl-q4_k_m batch-tl-q5_k_m batch-tl-q6_k batch-gpt2-q8_0 batch-gpt2-q4_k_m gemm prefix-gpt2 prefix-tl noprefix-gpt2 noprefix-tl ttft-tl tl-q4_0 tl-q8_0 tl-q4_k_m tl-q5_k_m tl-q6_k tl-q4_0-1t tl-q8_0-1t tl-q4_k_m-1t tl-f16 tl-bf16 tl-pre-q4_0 tl-pre-q8_0 tl-pre-q4_k_m tl-pre-q6_k tl-pre-f16 tl-pre-bf16 tl-pre512-q4_0 tl-pre512-q8_0 tl-pre512-q4_k_m tl-pre512-q6_k tl-pre512-f16 tl-pre512-bf16 gpt2-q8_0 gpt2-q4_0 gpt2-q4_k_m gpt2-pre-q8_0)" >&2; exit 2 ;;
esac; done
