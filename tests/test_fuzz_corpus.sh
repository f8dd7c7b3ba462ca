#!/usr/bin/env bash
# Regression: every fuzz target over its seed corpus and the crashes fuzzing
# found (tests/fuzz/corpus/T, tests/fuzz/crashes/T), without libFuzzer.
#   tests/test_fuzz_corpus.sh BUILD_DIR
set -u
B=${1:-build}
pass=0 fail=0
for t in config weights tokenizer batch spm bpe hftok hfdir gguf template pcache grammar; do
    files=$(find tests/fuzz/corpus/$t tests/fuzz/crashes/$t -type f 2>/dev/null | sort)
    n=$(echo "$files" | grep -c .)
    if out=$(echo "$files" | xargs "$B/fuzz_$t" 2>&1) && echo "$out" | grep -q "^$n inputs ran clean"; then
        pass=$((pass + 1)); echo "ok   fuzz_$t: $n inputs"
    else
        fail=$((fail + 1)); echo "FAIL fuzz_$t: $(echo "$out" | tail -3)"
    fi
done
echo "fuzz: $pass passed, $fail failed, 0 skipped"
[ $fail -eq 0 ]
