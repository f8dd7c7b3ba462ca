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
declare -A name_of=() started=() # by the stage's process id

# One stage that has ended (process id, exit status): its output, its time, its tally.
finish() {
    local pid=$1 rc=$2 name=${name_of[$1]} tally
    echo "== $name"
    cat "$OUT/$name.log"
    echo "[stage $name took $((SECONDS - started[$pid])) s]"
    unset "name_of[$pid]" "started[$pid]"
    [ "$rc" -eq 0 ] || status=1
    tally=$(grep -E '^[a-z]+: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$OUT/$name.log" | tail -1)
    if [ -z "$tally" ]; then echo "stage $name printed no tally (exit $rc)"; status=1; F=$((F + 1)); return; fi
    set -- $(echo "$tally" | grep -oE '[0-9]+')
    P=$((P + $1)) F=$((F + $2)) S=$((S + $3))
}
# Waits for any stage to end and finishes it.
reap() {
    local pid rc
    wait -n -p pid
    rc=$?
    finish "$pid" "$rc"
}
# stage NAME COMMAND...: started in the background once fewer than JOBS run.
stage() {
    local name=$1; shift
    while [ ${#name_of[@]} -ge "$JOBS" ]; do reap; done
    "$@" >"$OUT/$name.log" 2>&1 </dev/null &
    name_of[$!]=$name started[$!]=$SECONDS
}

# the longest (under ASan, on 2 cores) first
stage unit env SM_TEST_MODELS="$TM" "$B/test_runner"
stage robust env SM_SANITIZED="${SM_SANITIZED:-}" "$PY" tests/test_robust.py --bin "$B" --shared "$SH"
stage tokenizers "$PY" tests/test_tokenizers.py --bin "$B" --shared "$SH"
stage chat "$PY" tests/test_chat.py --bin "$B" --shared "$SH"
stage structured "$PY" tests/test_structured.py --bin "$B" --shared "$SH" --models "$TM"
stage prefix_cache "$PY" tests/test_prefix_cache.py --bin "$B" --shared "$SH" --models "$TM"
stage batch "$PY" tests/test_batch.py --bin "$B" --model models/default
stage serve "$PY" tests/test_serve.py --bin "$B" --model models/default --shared "$SH"
stage models "$PY" tests/test_models.py --bin "$B" --shared "$SH"
stage gguf "$PY" tests/test_gguf.py --bin "$B" --shared "$SH"
stage quant "$PY" tests/test_quant.py --bin "$B" --models "$TM" --shared "$SH"
stage cli env SM_BIN="$B/smallmind" SM_TEST_MODELS="$TM" SM_ALLOC_SO="$B/alloc_count.so" \
    SM_SKIP_ALLOC="${SM_SKIP_ALLOC:-}" bash tests/test_cli.sh
stage hostile "$PY" tests/test_hostile.py --bin "$B" --shared "$SH"
stage reference "$PY" tests/test_reference.py --bin "$B" --models "$TM"
stage train "$PY" tests/test_train.py --bin "$B"
stage generate "$PY" tests/test_generate.py --bin "$B" --model models/default
stage threads "$PY" tests/test_threads.py --bin "$B" --model "$TM/seed"
stage sampling "$PY" tests/test_sampling.py --bin "$B"
stage fuzz_corpus bash tests/test_fuzz_corpus.sh "$B"
stage lib env SM_BIN="$B/smallmind" bash tests/test_lib.sh
while [ ${#name_of[@]} -gt 0 ]; do reap; done

echo
echo "all: $P passed, $F failed, $S skipped"
[ "$F" -eq 0 ] || status=1
exit $status
