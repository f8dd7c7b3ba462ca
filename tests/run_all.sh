#!/usr/bin/env bash
# Runs the three test stages in order and prints one closing tally:
# C unit tests, the NumPy reference checks, the CLI tests.
#   tests/run_all.sh BUILD_DIR PYTHON
set -u
B=${1:-build} PY=${2:-python3}
TM=$B/test-models
status=0 P=0 F=0 S=0
stage() {
    local log t0; log=$(mktemp); t0=$SECONDS
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]} # the stage's own status (read before any other command)
    echo "[stage took $((SECONDS - t0)) s]"
    [ "$rc" -eq 0 ] || status=1
    local tally; tally=$(grep -E '^[a-z]+: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -1)
    if [ -z "$tally" ]; then echo "stage '$*' printed no tally"; status=1; F=$((F + 1)); rm -f "$log"; return; fi
    set -- $(echo "$tally" | grep -oE '[0-9]+')
    P=$((P + $1)) F=$((F + $2)) S=$((S + $3))
    rm -f "$log"
}
stage env SM_TEST_MODELS="$TM" "$B/test_runner"
stage bash tests/test_fuzz_corpus.sh "$B"
stage "$PY" tests/test_reference.py --bin "$B" --models "$TM"
stage "$PY" tests/test_quant.py --bin "$B" --models "$TM" --shared "${SM_SHARED:-../shared}"
stage "$PY" tests/test_train.py --bin "$B"
stage "$PY" tests/test_tokenizers.py --bin "$B" --shared "${SM_SHARED:-../shared}"
stage "$PY" tests/test_models.py --bin "$B" --shared "${SM_SHARED:-../shared}"
stage "$PY" tests/test_gguf.py --bin "$B" --shared "${SM_SHARED:-../shared}"
stage "$PY" tests/test_sampling.py --bin "$B"
stage "$PY" tests/test_chat.py --bin "$B" --shared "${SM_SHARED:-../shared}"
stage "$PY" tests/test_generate.py --bin "$B" --model models/default
stage "$PY" tests/test_batch.py --bin "$B" --model models/default
stage "$PY" tests/test_structured.py --bin "$B" --shared "${SM_SHARED:-../shared}" --models "$TM"
stage "$PY" tests/test_serve.py --bin "$B" --model models/default --shared "${SM_SHARED:-../shared}"
stage "$PY" tests/test_prefix_cache.py --bin "$B" --shared "${SM_SHARED:-../shared}" --models "$TM"
stage "$PY" tests/test_threads.py --bin "$B" --model "$TM/seed"
stage "$PY" tests/test_hostile.py --bin "$B" --shared "${SM_SHARED:-../shared}"
stage env SM_SANITIZED="${SM_SANITIZED:-}" "$PY" tests/test_robust.py --bin "$B" --shared "${SM_SHARED:-../shared}"
stage env SM_BIN="$B/smallmind" bash tests/test_lib.sh
stage env SM_BIN="$B/smallmind" SM_TEST_MODELS="$TM" SM_ALLOC_SO="$B/alloc_count.so" \
      SM_SKIP_ALLOC="${SM_SKIP_ALLOC:-}" bash tests/test_cli.sh
echo
echo "all: $P passed, $F failed, $S skipped"
[ "$F" -eq 0 ] || status=1
exit $status
