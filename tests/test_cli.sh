#!/usr/bin/env bash
# CLI tests: prompt sources, flags and exit codes, malformed models, pipes,
# output errors, context limits and allocations per token.
#   SM_BIN=build/smallmind SM_TEST_MODELS=build/test-models [SM_ALLOC_SO=...] tests/test_cli.sh
set -u
BIN=${SM_BIN:-build/smallmind}
MODELS=${SM_TEST_MODELS:-build/test-models}
M=$MODELS/seed
HERE=$(cd "$(dirname "$0")" && pwd)
PY=$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 )
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0 skip=0

ok()   { pass=$((pass + 1)); echo "ok   $1"; }
bad()  { fail=$((fail + 1)); echo "FAIL $1: $2"; }
skp()  { skip=$((skip + 1)); echo "skip $1: $2"; }
# run CMD...: stdout -> $T/out, stderr -> $T/err, exit code -> $rc (stdin from /dev/null)
run()  { "$@" >"$T/out" 2>"$T/err" </dev/null; rc=$?; }
lines() { wc -l <"$1" | tr -d ' '; }

# --- help and version
for c in "" generate score info bench; do
    run $BIN $c --help
    if [ $rc -eq 0 ] && [ -s "$T/out" ] && [ ! -s "$T/err" ]; then ok "help $c"; else bad "help $c" "rc=$rc"; fi
done
run $BIN --version
if [ $rc -eq 0 ] && grep -q '^smallmind [0-9]' "$T/out"; then ok "version"; else bad version "rc=$rc"; fi

# --- the prompt from -p, -f FILE, -f - and stdin gives the same output
P='Hello, world. Ünïcödé 中文 🙂'
printf '%s' "$P" >"$T/prompt"
$BIN generate -m $M -p "$P" -n 60 -s 3 >"$T/a" 2>"$T/e1"; r1=$?
$BIN generate -m $M -f "$T/prompt" -n 60 -s 3 >"$T/b" 2>/dev/null; r2=$?
printf '%s' "$P" | $BIN generate -m $M -n 60 -s 3 >"$T/c" 2>/dev/null; r3=$?
printf '%s' "$P" | $BIN generate -m $M -f - -n 60 -s 3 >"$T/d" 2>/dev/null; r4=$?
if [ $r1$r2$r3$r4 = 0000 ] && [ "$(wc -c <"$T/a")" -eq 60 ] && cmp -s "$T/a" "$T/b" && cmp -s "$T/a" "$T/c" && cmp -s "$T/a" "$T/d"; then
    ok "-p, -f, -f - and stdin give the same text"
else bad "prompt sources" "rc=$r1$r2$r3$r4 $(wc -c <"$T/a") bytes; $(cat "$T/e1")"; fi
# -p wins over stdin (stdin is not read)
echo "other text" | $BIN generate -m $M -p "$P" -n 60 -s 3 >"$T/e" 2>/dev/null
if cmp -s "$T/a" "$T/e"; then ok "-p with stdin: -p is used"; else bad "-p with stdin" "differs"; fi

# --- reproducibility: seeds and threads
$BIN generate -m $M -p "$P" -n 200 -s 11 -t 1 >"$T/t1" 2>/dev/null
$BIN generate -m $M -p "$P" -n 200 -s 11 -t 2 >"$T/t2" 2>/dev/null
$BIN generate -m $M -p "$P" -n 200 -s 12 -t 2 >"$T/t3" 2>/dev/null
if cmp -s "$T/t1" "$T/t2"; then ok "same seed, 1 and 2 threads: same text"; else bad "threads" "1 and 2 threads differ"; fi
if ! cmp -s "$T/t2" "$T/t3"; then ok "another seed: other text"; else bad "seed" "seeds 11 and 12 agree"; fi
$BIN generate -m $M -p "$P" -n 100 --temp 0 -s 1 >"$T/g1" 2>/dev/null
$BIN generate -m $M -p "$P" -n 100 --temp 0 -s 2 -t 1 >"$T/g2" 2>/dev/null
if cmp -s "$T/g1" "$T/g2"; then ok "greedy ignores the seed"; else bad greedy "differs"; fi

# fails CODE LABEL WANT CMD...: exit CODE, nothing on stdout, one stderr line containing WANT
fails() {
    local code=$1 label=$2 want=$3; shift 3
    run "$@"
    if [ $rc -eq "$code" ] && [ ! -s "$T/out" ] && [ "$(lines "$T/err")" -eq 1 ] && grep -qF -- "$want" "$T/err"; then
        ok "$label"
    else bad "$label" "rc=$rc err=$(head -c 300 "$T/err") want: $want"; fi
}

# --- usage errors: exit 2
usage_case() { local want=$1; shift; fails 2 "usage: $*" "$want" "$@"; }
usage_case "usage:" $BIN
usage_case "unknown command 'frobnicate'" $BIN frobnicate
usage_case "--kv-type expects f32 or f16, got 'q8_0'" $BIN generate -p x --kv-type q8_0
usage_case "--dtype expects f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k, q4_k, q5_k, q4_1, q5_0, q5_1, q2_k, q3_k, iq4_nl or iq4_xs, got 'q5_9'" $BIN convert $M "$T/never" --dtype q5_9
usage_case "unknown flag '--bogus'" $BIN generate -m $M -p x --bogus
usage_case "unknown flag '-x'" $BIN generate -m $M -p x -x
usage_case "-p needs a value" $BIN generate -m $M -p
usage_case "--temp expects a number from 0 to 1000, got '-1'" $BIN generate -m $M -p x --temp -1
usage_case "got 'abc'" $BIN generate -m $M -p x --temp abc
usage_case "got '1e999'" $BIN generate -m $M -p x --temp 1e999
usage_case "got 'nan'" $BIN generate -m $M -p x --temperature nan
usage_case "--top-p expects a number in (0, 1], got '0'" $BIN generate -m $M -p x --top-p 0
usage_case "got '1.5'" $BIN generate -m $M -p x --top-p 1.5
usage_case "--top-k expects a whole number >= 0" $BIN generate -m $M -p x --top-k -1
usage_case "-t expects a whole number from 1 to 512, got '0'" $BIN generate -m $M -p x -t 0
usage_case "got '100000'" $BIN generate -m $M -p x --threads 100000
usage_case "got '-5'" $BIN generate -m $M -p x -n -5
usage_case "got '2.5'" $BIN generate -m $M -p x --max-tokens 2.5
usage_case "-c expects" $BIN generate -m $M -p x -c 0
usage_case "got '1.5'" $BIN generate -m $M -p x -s 1.5
usage_case "-p does not apply to 'info'" $BIN info -m $M -p x
usage_case "give -p or -f, not both" $BIN generate -m $M -p x -f "$T/prompt"
usage_case "-c 1000 exceeds the model's context of 256" $BIN generate -m $M -p x -c 1000
usage_case "--kernels 'neon': 'neon' is not a kernel table (this CPU runs" $BIN generate -m $M -p x --kernels neon
usage_case "--help takes no value" $BIN generate --help=yes
usage_case "unexpected argument 'hello'" $BIN generate -m $M hello
SMALLMIND_THREADS=abc usage_case "SMALLMIND_THREADS must be a whole number" $BIN generate -m $M -p x

# --- no prompt while stdin is a terminal: a hint, not a silent wait
if command -v script >/dev/null; then
    script -qec "$BIN generate -m $M -n 5" /dev/null >"$T/out" 2>&1; rc=$?
    if [ $rc -eq 2 ] && grep -q "no prompt" "$T/out"; then ok "no prompt on a terminal: exit 2 with a hint"
    else bad "no prompt on a terminal" "rc=$rc $(head -c 200 "$T/out")"; fi
else skp "no prompt on a terminal" "script(1) is not installed"; fi

# --- data errors: exit 1 with one line naming the problem
data_case() { local want=$1; shift; fails 1 "data error: $want" "$want" "$@"; }
head -c 300 /dev/zero | tr '\0' 'a' >"$T/long"
data_case "prompt is 300 tokens, context is 256" $BIN generate -m $M -f "$T/long"
data_case "prompt is 300 tokens, context is 100" $BIN generate -m $M -f "$T/long" -c 100
data_case "empty prompt" $BIN generate -m $M -p ""
data_case "cannot open '$T/nope': No such file or directory" $BIN generate -m "$T/nope" -p x
data_case "$T/prompt: not a GGUF file (no GGUF magic; a model is a GGUF file or a directory with config.json)" $BIN info -m "$T/prompt"
data_case "cannot open '$T/missing.txt'" $BIN generate -m $M -f "$T/missing.txt"
data_case "at least 2 tokens" $BIN score -m $M -p "a"
mkdir -p "$T/hfdir" && echo '{"model_type": "llama", "hidden_size": 8}' >"$T/hfdir/config.json"
# a Hugging Face directory runs as it is; this one has no weights
data_case "$T/hfdir: no model.safetensors or model.safetensors.index.json" \
    $BIN generate -m "$T/hfdir" -p x

if [ -n "${SM_SKIP_BAD_MODELS:-}" ]; then skp "malformed models" "SM_SKIP_BAD_MODELS is set"
else
    "$PY" "$HERE/make_bad_models.py" "$M" "$T/bad" >/dev/null
    while IFS=$'\t' read -r name num cmd needle; do
        args=(-m "$T/bad/$name")
        [ "$cmd" = generate ] && args+=(-p "Hi" -n 5)
        fails 1 "malformed model ($num) $name" "$needle" $BIN "$cmd" "${args[@]}"
    done <"$T/bad/cases.tsv"
fi

# --- the context running out ends with finish length, said with --stats
run $BIN generate -m $M -p "a" -n 1000 --stats
if [ $rc -eq 0 ] && [ "$(wc -c <"$T/out")" -eq 256 ] && grep -q "context of 256 tokens is full" "$T/err" && grep -q "finish: length" "$T/err"; then
    ok "context full: 256 tokens, finish length"
else bad "context full" "rc=$rc $(wc -c <"$T/out") bytes; $(cat "$T/err")"; fi

# --- pipes and unwritable output
$BIN generate -m $M -p "a" -n 255 2>"$T/err" | head -c 10 >/dev/null; rc=${PIPESTATUS[0]}
if [ $rc -eq 0 ] && [ ! -s "$T/err" ]; then ok "closed pipe (head -c 10): exit 0, quiet"; else bad "closed pipe" "rc=$rc $(cat "$T/err")"; fi
$BIN generate -m $M -p "a" -n 255 2>"$T/err" | true; rc=${PIPESTATUS[0]}
if [ $rc -eq 0 ] && [ ! -s "$T/err" ]; then ok "closed pipe (true): exit 0, quiet"; else bad "closed pipe (true)" "rc=$rc $(cat "$T/err")"; fi
if [ -w /dev/full ]; then
    $BIN generate -m $M -p "a" -n 20 >/dev/full 2>"$T/err"; rc=$?
    if [ $rc -eq 1 ] && grep -q "cannot write output" "$T/err"; then ok "/dev/full: exit 1 naming the error"
    else bad "/dev/full" "rc=$rc $(cat "$T/err")"; fi
else skp "/dev/full" "not available"; fi

# --- Ctrl-C: the text so far, a newline, stats, exit 130 (sent once the text has begun;
#     the slow scalar path on 255 tokens leaves it in the middle of the run)
$BIN generate -m $M -p "a" -n 255 --kernels scalar -t 1 --stats >"$T/out" 2>"$T/err" &
pid=$!
for _ in $(seq 9000); do [ -s "$T/out" ] || ! kill -0 $pid 2>/dev/null && break; sleep 0.01; done
kill -INT $pid 2>/dev/null
wait $pid; rc=$?
n=$(wc -c <"$T/out")
if [ $rc -eq 130 ] && [ "$(tail -c 1 "$T/out" | od -An -c | tr -d ' ')" = '\n' ] && grep -q "finish: interrupted" "$T/err" && [ "$n" -gt 1 ] && [ "$n" -lt 256 ]; then
    ok "Ctrl-C: $((n - 1)) bytes flushed, newline, stats, exit 130"
else bad "Ctrl-C" "rc=$rc bytes=$n $(cat "$T/err")"; fi

# --- odd bytes in the prompt are used as they are (byte tokenizer)
printf 'a\0b\377\300\n' >"$T/odd"
run $BIN generate -m $M -f "$T/odd" -n 10
if [ $rc -eq 0 ] && [ "$(wc -c <"$T/out")" -eq 10 ]; then ok "NUL and invalid UTF-8 in the prompt"; else bad "odd bytes" "rc=$rc"; fi

# --- info reports the right parameter count; score prints a summary
run $BIN info -m $M
want=$((256*256 + 256*256 + 4*(12*256*256 + 13*256) + 2*256))
if [ $rc -eq 0 ] && grep -q "parameters:   $want\$" "$T/out" && grep -q "kv-cache  *2097152 bytes" "$T/out"; then
    ok "info: $want parameters, 2 MiB KV-cache"
else bad info "$(cat "$T/out" "$T/err")"; fi
run $BIN score -m $M -p "Hello there"
if [ $rc -eq 0 ] && [ "$(lines "$T/out")" -eq 11 ] && tail -1 "$T/out" | grep -q "^# tokens 11, scored 10"; then ok "score text output"
else bad score "rc=$rc $(tail -2 "$T/out")"; fi
SMALLMIND_MODEL=$M run $BIN generate -p "x" -n 3
if [ $rc -eq 0 ] && [ "$(wc -c <"$T/out")" -eq 3 ]; then ok "SMALLMIND_MODEL sets the default model"; else bad "SMALLMIND_MODEL" "rc=$rc"; fi
run $BIN generate -m $M -p "x" -n 3 -v
if [ $rc -eq 0 ] && [ "$(wc -c <"$T/out")" -eq 3 ] && grep -q "3290624 parameters" "$T/err"; then ok "-v reports the load on stderr"; else bad "-v" "rc=$rc $(cat "$T/err")"; fi
run $BIN generate -m $M -p "a" -n 1000 -q
if [ $rc -eq 0 ] && [ ! -s "$T/err" ]; then ok "-q: no notice when the context fills"; else bad "-q" "$(cat "$T/err")"; fi
# --- kernels per operation: info names where each comes from; a composition of one table is it
run $BIN info -m $M --kernels rows=scalar
if [ $rc -eq 0 ] && grep -q "^operations: .*rows scalar, qrows" "$T/out" && grep -qE "^kernels: .*CPU: (.* family [0-9]+ model [0-9]+|not identified by this build)" "$T/out"
then ok "info --kernels rows=scalar: rows from scalar, the CPU named"; else bad "info --kernels" "rc=$rc $(cat "$T/out" "$T/err" | head -c 400)"; fi
a=$($BIN generate -m $M -p "And" -n 24 --temp 0 --kernels scalar 2>&1)
b=$($BIN generate -m $M -p "And" -n 24 --temp 0 --kernels scalar,rows=scalar,attention=scalar 2>&1)
if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "--kernels scalar,rows=scalar,attention=scalar is the scalar table"
else bad "composition of one table" "'$a' vs '$b'"; fi
usage_case "--kernels 'rows=neon': 'neon' is not a kernel table (this CPU runs" $BIN generate -m $M -p x --kernels rows=neon
usage_case "--kernels 'lines=scalar': 'lines' is not an operation" $BIN generate -m $M -p x --kernels lines=scalar
usage_case "--pick-kernels takes no model, reports or arguments" $BIN bench --pick-kernels x.json
usage_case "--peaks takes no model, reports or arguments" $BIN bench --peaks x.json
run $BIN generate -m $M -p "x" -n 3 --no-mmap --kernels scalar
if [ $rc -eq 0 ] && [ "$(wc -c <"$T/out")" -eq 3 ]; then ok "--no-mmap --kernels scalar"; else bad "--no-mmap" "rc=$rc $(cat "$T/err")"; fi

# --- train: bad inputs fail with one line, never touching what is not a checkpoint
for i in $(seq 400); do printf 'In the beginning was the word. '; done >"$T/words.txt"
SMALL="--layers 1 --heads 2 --embd 16 --ctx 16 --batch 2"
usage_case "--data FILE is required" $BIN train --out "$T/m"
usage_case "--out DIR is required" $BIN train --data "$T/words.txt"
usage_case "--lr expects a number in (0, 10], got '0'" $BIN train --data "$T/words.txt" --out "$T/m" --lr 0
usage_case "--lr expects a number in (0, 10], got 'nan'" $BIN train --data "$T/words.txt" --out "$T/m" --lr nan
usage_case "--steps expects a whole number from 0" $BIN train --data "$T/words.txt" --out "$T/m" --steps -1
usage_case "--batch expects a whole number from 1" $BIN train --data "$T/words.txt" --out "$T/m" --batch 0
usage_case "--grad-clip expects a number in [0" $BIN train --data "$T/words.txt" --out "$T/m" --grad-clip -1
usage_case "--weight-decay expects a number" $BIN train --data "$T/words.txt" --out "$T/m" --weight-decay abc
usage_case "--val-fraction expects a number in [0, 0.5], got '0.9'" $BIN train --data "$T/words.txt" --out "$T/m" --val-fraction 0.9
usage_case "--embd 100 is not a multiple of --heads 3" $BIN train --data "$T/words.txt" --out "$T/m" --embd 100 --heads 3
usage_case "--lr-min" $BIN train --data "$T/words.txt" --out "$T/m" --lr 1e-3 --lr-min 1e-2
usage_case "-m does not apply to 'train'" $BIN train --data "$T/words.txt" --out "$T/m" -m x
: >"$T/empty.txt"
fails 1 "train: empty data" "'$T/empty.txt' is empty" $BIN train --data "$T/empty.txt" --out "$T/m"
fails 1 "train: missing data" "cannot open '$T/nope.txt'" $BIN train --data "$T/nope.txt" --out "$T/m"
fails 1 "train: data is a directory" "cannot read '$T'" $BIN train --data "$T" --out "$T/m"
printf 'too short' >"$T/short.txt"
fails 1 "train: data too short" "leaves 9 bytes for training" $BIN train --data "$T/short.txt" --out "$T/m" $SMALL --val-fraction 0
fails 1 "train: held-out part too short" "--val-fraction 0.001 holds out 12 bytes" $BIN train --data "$T/words.txt" --out "$T/m" $SMALL --val-fraction 0.001
mkdir -p "$T/notmodel" && echo keep >"$T/notmodel/precious.txt"
fails 1 "train: --out is a non-model directory" "is not a smallmind training checkpoint; not overwriting" $BIN train --data "$T/words.txt" --out "$T/notmodel" $SMALL --steps 1
echo keep >"$T/afile"
fails 1 "train: --out is a file" "'$T/afile' exists and is not a smallmind training checkpoint" $BIN train --data "$T/words.txt" --out "$T/afile" $SMALL --steps 1
if [ "$(cat "$T/notmodel/precious.txt")" = keep ] && [ "$(cat "$T/afile")" = keep ]; then ok "train: refused outputs are untouched"; else bad "train overwrote" "precious files changed"; fi
printf '{"n_layer": 2, "n_heads": 4}' >"$T/shape.json"
fails 1 "train: --config unknown key" 'unsupported key "n_heads"' $BIN train --data "$T/words.txt" --out "$T/m" --config "$T/shape.json"
printf '{"n_layer": 2,\n "n_embd": }' >"$T/shape.json"
fails 1 "train: --config bad JSON" "invalid JSON at line 2" $BIN train --data "$T/words.txt" --out "$T/m" --config "$T/shape.json"
printf '{"n_layer": 0}' >"$T/shape.json"
fails 1 "train: --config bad value" '"n_layer" is 0, expected 1 to 1024' $BIN train --data "$T/words.txt" --out "$T/m" --config "$T/shape.json"
fails 1 "train: --resume of a non-checkpoint" "cannot open '$T/notmodel/optimizer.bin'" $BIN train --data "$T/words.txt" --resume "$T/notmodel"
run $BIN train --data "$T/words.txt" --out "$T/ck" $SMALL --steps 3 -q
if [ $rc -eq 0 ] && [ ! -s "$T/err" ] && [ -f "$T/ck/optimizer.bin" ]; then ok "train: a 3-step run, quiet"; else bad "train 3 steps" "rc=$rc $(cat "$T/err")"; fi
run $BIN generate -m "$T/ck" -p "In" -n 5
if [ $rc -eq 0 ] && [ "$(wc -c <"$T/out")" -eq 5 ]; then ok "train: its output is a model generate loads"; else bad "generate from trained" "rc=$rc $(cat "$T/err")"; fi
usage_case "--layers cannot change when resuming" $BIN train --data "$T/words.txt" --resume "$T/ck" --layers 2
usage_case "--steps 2 is below the checkpoint's step 3" $BIN train --data "$T/words.txt" --resume "$T/ck" --steps 2
fails 1 "train: --resume with other data" "is not the text checkpoint '$T/ck' was trained on" $BIN train --data "$T/short.txt" --resume "$T/ck"
cp "$T/ck/optimizer.bin" "$T/opt.bak" && head -c 300 "$T/opt.bak" >"$T/ck/optimizer.bin"
fails 1 "train: truncated optimizer state" "optimizer.bin: truncated" $BIN train --data "$T/words.txt" --resume "$T/ck" --steps 4
printf 'SMOPTIMX' | dd of="$T/ck/optimizer.bin" conv=notrunc status=none
fails 1 "train: optimizer state with a bad magic" "not a smallmind optimizer state" $BIN train --data "$T/words.txt" --resume "$T/ck" --steps 4
cp "$T/opt.bak" "$T/ck/optimizer.bin"
run $BIN train --data "$T/words.txt" --resume "$T/ck" --steps 5 -q
if [ $rc -eq 0 ] && [ "$(tail -1 "$T/ck/loss.csv" | cut -d, -f1)" = 5 ] && [ "$(grep -c . "$T/ck/loss.csv")" -eq 6 ]; then ok "train: --resume continues to step 5"; else bad "resume" "rc=$rc $(cat "$T/err")"; fi
ls -d "$T"/ck.* >/dev/null 2>&1 && bad "train left temporary directories" "$(ls -d "$T"/ck.*)" || ok "train: no temporary directories left behind"

# --- zero heap allocations per generated token
if [ -n "${SM_SKIP_ALLOC:-}" ] || [ -z "${SM_ALLOC_SO:-}" ]; then
    skp "allocations per token" "LD_PRELOAD counting is off in this build (sanitizers replace malloc)"
else
    for t in 1 2; do
        SM_ALLOC_OUT=$T/a16 LD_PRELOAD=$SM_ALLOC_SO $BIN generate -m $M -p "a" -n 16 -t $t >/dev/null 2>&1
        SM_ALLOC_OUT=$T/a256 LD_PRELOAD=$SM_ALLOC_SO $BIN generate -m $M -p "a" -n 256 -t $t >/dev/null 2>&1
        a=$(cat "$T/a16" 2>/dev/null) b=$(cat "$T/a256" 2>/dev/null)
        if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "allocations: 16 tokens = 256 tokens ($a) with $t thread(s)"
        else bad "allocations per token ($t threads)" "16 tokens: '$a', 256 tokens: '$b'"; fi
    done
    # every sampling transform on: penalties, top-p over the whole vocabulary, min-p
    SAMP="--top-k 0 --top-p 0.9 --min-p 0.02 --repeat-penalty 1.2 --presence-penalty 0.3 --frequency-penalty 0.2"
    for n in 16 256; do
        SM_ALLOC_OUT=$T/p$n LD_PRELOAD=$SM_ALLOC_SO $BIN generate -m $M -p "a" -n $n -t 2 $SAMP >/dev/null 2>&1
    done
    a=$(cat "$T/p16" 2>/dev/null) b=$(cat "$T/p256" 2>/dev/null)
    if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "allocations: penalties, top-p, min-p: 16 tokens = 256 tokens ($a)"
    else bad "allocations per token with penalties" "16 tokens: '$a', 256 tokens: '$b'"; fi
    for s in 2 12; do
        SM_ALLOC_OUT=$T/s$s LD_PRELOAD=$SM_ALLOC_SO $BIN train --data "$T/words.txt" --out "$T/al$s" $SMALL \
            --steps $s --eval-every 0 --checkpoint-every 0 -q -t 2 >/dev/null 2>&1
    done
    a=$(cat "$T/s2" 2>/dev/null) b=$(cat "$T/s12" 2>/dev/null)
    if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "allocations: 2 training steps = 12 steps ($a)"
    else bad "allocations per training step" "2 steps: '$a', 12 steps: '$b'"; fi
    # batches decoded together: per record, never per token
    printf 'a\nb\nc\nd\n' >"$T/b4"
    for n in 16 64; do
        SM_ALLOC_OUT=$T/b$n LD_PRELOAD=$SM_ALLOC_SO $BIN generate -m $M --batch "$T/b4" --parallel 4 \
            -n $n -t 2 >/dev/null 2>&1
    done
    a=$(cat "$T/b16" 2>/dev/null) b=$(cat "$T/b64" 2>/dev/null)
    if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "allocations: batch of 4 at --parallel 4, 16 tokens = 64 tokens ($a)"
    else bad "allocations per batch token" "16 tokens: '$a', 64 tokens: '$b'"; fi
    # under a JSON Schema (masks from the matcher's planned storage), sampled: none per token either
    S='{"type":"array","items":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string","maxLength":8}},"required":["a","b"]}}'
    for n in 16 200; do
        SM_ALLOC_OUT=$T/s$n LD_PRELOAD=$SM_ALLOC_SO $BIN generate -m $M -p "a" -n $n --json-schema "$S" \
            --temp 0.9 -s 3 >/dev/null 2>&1
    done
    a=$(cat "$T/s16" 2>/dev/null) b=$(cat "$T/s200" 2>/dev/null)
    if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "allocations: under a JSON Schema, 16 tokens = 200 tokens ($a)"
    else bad "allocations per token under a schema" "16 tokens: '$a', 200 tokens: '$b'"; fi
fi

# --- (14) --check-weights names the tensor holding NaN; a clean model passes
if [ -z "${SM_SKIP_BAD_MODELS:-}" ] && [ -d "$T/bad/weights_nan" ]; then
    fails 1 "--check-weights: NaN tensor named" "tensor ln_f.bias: 256 of 256 weights are NaN or infinite" \
        $BIN info -m "$T/bad/weights_nan" --check-weights
    fails 1 "--check-weights: NaN scale of a q8_0 tensor named" "tensor tok_embd: block 0 has a NaN or infinite scale" \
        $BIN info -m "$T/bad/q8_0_scale_nan" --check-weights
    fails 1 "--check-weights: NaN d of a q6_k tensor (last in its block)" "tensor tok_embd: block 0 has a NaN or infinite scale" \
        $BIN info -m "$T/bad/q6_k_scale_nan" --check-weights
    fails 1 "--check-weights: infinite dmin of a q4_k tensor" "tensor tok_embd: block 3 has a NaN or infinite scale" \
        $BIN info -m "$T/bad/q4_k_dmin_inf" --check-weights
fi
run $BIN generate -m $M -p "x" -n 3 --check-weights
if [ $rc -eq 0 ] && [ "$(wc -c <"$T/out")" -eq 3 ]; then ok "--check-weights: a finite model runs"; else bad "--check-weights" "rc=$rc $(cat "$T/err")"; fi

# --- bench: the report's fields (no times asserted), zero allocations per
#     decoded token (counted by the binary's malloc wrappers), a profile whose
#     shares add up to 100% with matmul's arithmetic rate, --compare of two reports
run $BIN bench -m $M -t 2 -n 16 --prompt-tokens 16 --reps 2 --json
cp "$T/out" "$T/bench-a.json"
if [ $rc -eq 0 ] && "$PY" - "$T/out" "$M/config.json" <<'PYEOF' 2>"$T/err2"
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("prefill_tokens_per_s", "decode_tokens_per_s", "first_token_ms", "load_ms", "peak_rss_kb",
          "bandwidth_gb_per_s", "bound_tokens_per_s", "weight_bytes_per_token",
          "read_gb_per_s", "read_bound_tokens_per_s", "working_set_bytes"):
    assert r[k] > 0, k
# the working set is the weights plus keys and values at the mean context (16 + 16/2)
c = json.load(open(sys.argv[2]))
kv = 2 * c["n_layer"] * c["n_embd"] * 4 * 24
assert r["working_set_bytes"] == r["weight_bytes_per_token"] + kv, (r["working_set_bytes"], kv)
assert r["allocs_per_token"] == 0, r["allocs_per_token"]
for phase in ("prefill", "decode"):
    p = r["profile"][phase]
    assert set(p) == {"matmul", "attention", "norm", "activation", "output", "sampling"}, p
    assert abs(sum(v["share"] for v in p.values()) - 100) < 0.1, p
    assert p["matmul"]["gflops"] > 0 and p["matmul"]["share"] > 0, p
PYEOF
then ok "bench --json: fields, 0 allocations per token, per-step profile"; else bad "bench --json" "rc=$rc $(cat "$T/err" "$T/err2" | head -c 300)"; fi
run $BIN bench -m $M -t 1 -n 8 --prompt-tokens 8 --reps 1 --json
cp "$T/out" "$T/bench-b.json"
run $BIN bench --compare "$T/bench-a.json" "$T/bench-b.json"
if [ $rc -eq 0 ] && grep -qE '^decode_tokens_per_s +[0-9.e+]+ +[0-9.e+]+ +[0-9.]+$' "$T/out" &&
    grep -qE '^threads +2 +1 +0.500$' "$T/out" && grep -q '^profile.decode.matmul.gflops' "$T/out"; then
    ok "bench --compare: two reports side by side with B/A"
else bad "bench --compare" "rc=$rc $(head -c 300 "$T/out" "$T/err")"; fi
fails 2 "bench --compare with one file" "--compare takes two bench --json reports (got 1 files)" \
    $BIN bench --compare "$T/bench-a.json"
fails 1 "bench --compare of a non-report" "not a bench --json report" \
    $BIN bench --compare "$T/bench-a.json" "$M/config.json"
fails 2 "bench with a stray argument" "unexpected argument 'x.json'" $BIN bench -m $M x.json
# the sampler's flags: bench --temp 0 decodes greedily (as llama2.c -t 0 does), and says so
run $BIN bench -m $M -t 1 -n 8 --prompt-tokens 8 --reps 1 --json --temp 0 --top-k 7
if [ $rc -eq 0 ] && "$PY" -c '
import json, sys
r = json.load(open(sys.argv[1])); a = json.load(open(sys.argv[2]))
assert (r["temperature"], r["top_k"]) == (0, 7), r
assert (a["temperature"], a["top_k"], a["top_p"]) == (0.8, 40, 0.95), a' "$T/out" "$T/bench-a.json" 2>"$T/err2" &&
    $BIN bench -m $M -t 1 -n 4 --prompt-tokens 4 --reps 1 --temp 0 2>/dev/null | head -1 | grep -q ', greedy$'
then ok "bench --temp 0 --top-k 7: greedy, in the report"; else bad "bench --temp" "rc=$rc $(cat "$T/err" "$T/err2" | head -c 300)"; fi
fails 2 "bench --temp not a number" "--temp expects a number" $BIN bench -m $M --temp warm

# --- (24) --json is valid UTF-8 JSON even when the bytes generated are not UTF-8
#     (the random-weight model emits arbitrary bytes; invalid ones become U+FFFD)
run $BIN generate -m $M -p "x" -n 200 --temp 1.5 -s 5 --json
if [ $rc -eq 0 ] && "$PY" -c 'import json,sys; d=json.loads(open(sys.argv[1],"rb").read().decode("utf-8","strict")); assert d["tokens_generated"]==200' "$T/out" 2>"$T/err2"; then
    ok "--json output is strict UTF-8 JSON"
else bad "--json UTF-8" "rc=$rc $(cat "$T/err2")"; fi

# --- (30) Ctrl-C while a batch record is being written into a full pipe: the
#     record is finished (the process waits), a second Ctrl-C exits at once, 130
if command -v mkfifo >/dev/null; then
    mkfifo "$T/fifo"
    sleep 100000 <"$T/fifo" & reader=$!  # holds the pipe open, never reads (killed below)
    id=$(printf 'x%.0s' $(seq 240))
    for i in $(seq 200); do printf '{"id": "%s%d", "prompt": "a", "max_tokens": 60}\n' "$id" "$i"; done >"$T/many.jsonl"
    $BIN generate -m $M --batch "$T/many.jsonl" >"$T/fifo" 2>"$T/err" & pid=$!
    # until it blocks on the full pipe (slow under the sanitizers on a busy machine)
    # (the kernel names the wait pipe_write, or anon_pipe_write since 6.x)
    blocked() { case "$(cat /proc/$pid/wchan 2>/dev/null)" in *pipe_write) return 0 ;; esac; return 1; }
    pending() { local p; p=$(awk '/^(SigPnd|ShdPnd):/ {print $2}' /proc/$pid/status 2>/dev/null | tr '\n' ' ')
                for x in $p; do [ $(( 0x$x & 2 )) -ne 0 ] && return 0; done; return 1; } # bit of SIGINT
    for _ in $(seq 9000); do blocked || ! kill -0 $pid 2>/dev/null && break; sleep 0.01; done
    kill -INT $pid
    # the first Ctrl-C is taken (no longer pending) and the write still blocks: it waits
    for _ in $(seq 9000); do pending || break; sleep 0.01; done
    for _ in $(seq 9000); do blocked || ! kill -0 $pid 2>/dev/null && break; sleep 0.01; done
    alive=$(kill -0 $pid 2>/dev/null && blocked && echo yes || echo no)
    kill -INT $pid
    for _ in $(seq 9000); do kill -0 $pid 2>/dev/null || break; sleep 0.01; done
    gone=$(kill -0 $pid 2>/dev/null && echo no || echo yes)
    wait $pid; rc=$?
    kill $reader 2>/dev/null; wait $reader 2>/dev/null
    if [ "$alive" = yes ] && [ "$gone" = yes ] && [ $rc -eq 130 ]; then
        ok "Ctrl-C in a blocked write waits for the record; a second Ctrl-C exits 130 at once"
    else bad "second Ctrl-C" "alive after first: $alive, gone after second: $gone, rc=$rc"; fi
else skp "second Ctrl-C" "mkfifo is not available"; fi

# --- (33) the arena cannot be allocated: the bytes needed and the option that reduces them
for i in $(seq 256); do echo a; done >"$T/a256"
if [ -n "${SM_SKIP_ALLOC:-}" ]; then skp "allocation failure" "ulimit -v and AddressSanitizer's shadow memory do not mix"
else
(ulimit -v 400000; exec $BIN generate -m $M --batch "$T/a256" --parallel 256 -n 1) >"$T/out" 2>"$T/err"; rc=$?
if [ $rc -eq 1 ] && [ "$(lines "$T/err")" -eq 1 ] && grep -q "cannot allocate [0-9]* bytes for the run" "$T/err" && grep -q -- "-c\|--parallel" "$T/err" && [ ! -s "$T/out" ]; then
    ok "allocation failure: bytes needed and the option to reduce them"
else bad "allocation failure" "rc=$rc $(cat "$T/err")"; fi
fi

# --- make install: binary, man page and default model under DESTDIR/PREFIX;
#     the installed binary finds its model from any directory
ROOT=$(cd "$HERE/.." && pwd)
if make -s -C "$ROOT" install BUILD="$(cd "$(dirname "$BIN")" && pwd)" DESTDIR="$T/stage" PREFIX=/opt/sm >"$T/out" 2>&1; then
    got=$(cd "$T" && ./stage/opt/sm/bin/smallmind generate -p "And" -n 7 --temp 0 2>"$T/err" | wc -c)
    if [ "$got" = 7 ] && [ -f "$T/stage/opt/sm/share/man/man1/smallmind.1" ]; then
        ok "make install DESTDIR PREFIX: runs from anywhere with its default model"
    else bad "make install" "$got bytes; $(cat "$T/err")"; fi
    if command -v man >/dev/null; then
        warn=$(MANWIDTH=80 man --warnings -l "$T/stage/opt/sm/share/man/man1/smallmind.1" 2>&1 >/dev/null)
        if [ -z "$warn" ]; then ok "man page renders without warnings"; else bad "man page" "$warn"; fi
    else skp "man page" "man is not installed"; fi
    make -s -C "$ROOT" uninstall DESTDIR="$T/stage" PREFIX=/opt/sm >/dev/null 2>&1
    left=$(find "$T/stage" -type f | wc -l)
    if [ "$left" = 0 ]; then ok "make uninstall removes every file"; else bad "make uninstall" "$left files left"; fi
else bad "make install" "$(tail -3 "$T/out")"; fi

echo "cli: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
