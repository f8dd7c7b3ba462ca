#!/usr/bin/env bash
# Runs the test stages and prints one closing tally: C unit tests, the fuzz
# corpus, the NumPy/PyTorch reference checks, the CLI tests.
#   tests/run_all.sh BUILD_DIR PYTHON
# Stages are independent (each has its own temporary folders and free ports), so
# SM_TEST_JOBS of them (default: the number of cores) run at once, longest first;
# each stage's output is printed whole when it ends, with its time. SM_TEST_JOBS=1
# runs them one after another. Every test waits for events, never for time, so
# a loaded machine changes how long a stage takes, not what it finds.
set -u
B=${1:-build} PY=${2:-python3}
TM=$B/test-models
SH=${SM_SHARED:-../shared}
JOBS=${SM_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
status=0 P=0 F=0 S=0
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# name|command, the longest (under ASan, on 2 cores) first
STAGES=(
  "unit|env SM_TEST_MODELS=$TM $B/test_runner"
  "robust|env SM_SANITIZED=${SM_SANITIZED:-} $PY tests/test_robust.py --bin $B --shared $SH"
  "tokenizers|$PY tests/test_tokenizers.py --bin $B --shared $SH"
  "chat|$PY tests/test_chat.py --bin $B --shared $SH"
  "structured|$PY tests/test_structured.py --bin $B --shared $SH --models $TM"
  "prefix_cache|$PY tests/test_prefix_cache.py --bin $B --shared $SH --models $TM"
  "batch|$PY tests/test_batch.py --bin $B --model models/default"
  "serve|$PY tests/test_serve.py --bin $B --model models/default --shared $SH"
  "models|$PY tests/test_models.py --bin $B --shared $SH"
  "gguf|$PY tests/test_gguf.py --bin $B --shared $SH"
  "quant|$PY tests/test_quant.py --bin $B --models $TM --shared $SH"
  "cli|env SM_BIN=$B/smallmind SM_TEST_MODELS=$TM SM_ALLOC_SO=$B/alloc_count.so SM_SKIP_ALLOC=${SM_SKIP_ALLOC:-} bash tests/test_cli.sh"
  "hostile|$PY tests/test_hostile.py --bin $B --shared $SH"
  "reference|$PY tests/test_reference.py --bin $B --models $TM"
  "train|$PY tests/test_train.py --bin $B"
  "generate|$PY tests/test_generate.py --bin $B --model models/default"
  "threads|$PY tests/test_threads.py --bin $B --model $TM/seed"
  "sampling|$PY tests/test_sampling.py --bin $B"
  "fuzz_corpus|bash tests/test_fuzz_corpus.sh $B"
  "lib|env SM_BIN=$B/smallmind bash tests/test_lib.sh"
)

# one stage in the background: its output in $OUT/NAME.log, its status and time after it
run_stage() {
    local name=$1 cmd=$2 t0=$SECONDS rc
    $cmd >"$OUT/$name.log" 2>&1 </dev/null
    rc=$?
    echo "$rc $((SECONDS - t0))" >"$OUT/$name.rc"
}

# a finished stage: its output, its time, its tally added to the total
report() {
    local name=$1 rc secs tally
    read -r rc secs <"$OUT/$name.rc"
    echo "== $name"
    cat "$OUT/$name.log"
    echo "[stage $name took $secs s]"
    [ "$rc" -eq 0 ] || status=1
    tally=$(grep -E '^[a-z]+: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$OUT/$name.log" | tail -1)
    if [ -z "$tally" ]; then echo "stage $name printed no tally (exit $rc)"; status=1; F=$((F + 1)); return; fi
    set -- $(echo "$tally" | grep -oE '[0-9]+')
    P=$((P + $1)) F=$((F + $2)) S=$((S + $3))
}

declare -A pid_of=()
reported=()
collect() { # report every stage whose status file is written
    local n
    for n in "${!pid_of[@]}"; do
        if [ -f "$OUT/$n.rc" ]; then wait "${pid_of[$n]}" 2>/dev/null; unset "pid_of[$n]"; report "$n"; fi
    done
}
for entry in "${STAGES[@]}"; do
    name=${entry%%|*} cmd=${entry#*|}
    while [ ${#pid_of[@]} -ge "$JOBS" ]; do wait -n 2>/dev/null; collect; done
    run_stage "$name" "$cmd" &
    pid_of[$name]=$!
done
while [ ${#pid_of[@]} -gt 0 ]; do wait -n 2>/dev/null; collect; done

echo
echo "all: $P passed, $F failed, $S skipped"
[ "$F" -eq 0 ] || status=1
exit $status
