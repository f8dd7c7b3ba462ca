#!/usr/bin/env bash
# Batch jobs as they run in the field: records/s of one OpenAI Batch API file
# (RECORDS /v1/completions requests of 16-40 tokens, TOKENS out, greedy) run
#   a. by one process with 1 thread,
#   b. by one process with 2 threads,
#   c. by GNU parallel as 2 processes x 1 thread (--shard {}/2, merged back),
# each configuration in turn within every sample (interleaved), medians of N,
# wall clock of the whole job including the model loads. The results of b and c
# are compared with a's (byte for byte but timing). A benchmark, not a test.
#
#   MODEL=models/default RECORDS=1000 TOKENS=32 N=3 scripts/bench_batch.sh [BIN]
set -eu
BIN=$(realpath "${1:-build/smallmind}")
MODEL=${MODEL:-models/default}
RECORDS=${RECORDS:-1000}
TOKENS=${TOKENS:-32}
N=${N:-3}
PY=$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 )
command -v parallel >/dev/null || { echo "GNU parallel is not installed (apt-get install parallel)"; exit 0; }
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
$PY - "$RECORDS" "$TOKENS" >"$D/in.jsonl" <<'EOF'
import json, random, sys
random.seed(7)
n, t = int(sys.argv[1]), int(sys.argv[2])
words = "the of and to in that he shall unto for his a I they be is him not them it with all thou".split()
for i in range(n):
    prompt = " ".join(random.choice(words) for _ in range(random.randint(4, 10)))
    print(json.dumps({"custom_id": f"req-{i}", "method": "POST", "url": "/v1/completions",
                      "body": {"model": "m", "prompt": prompt, "max_tokens": t, "temperature": 0}}))
EOF
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
now() { date +%s.%N; }
strip() { sed -E 's/"created": [0-9]+, //; s/, "timings": \{[^}]*\}//; s/"cached_tokens": [0-9]+/"cached_tokens": _/' "$@"; }  # cache hits depend on the shard
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"
echo "$RECORDS OpenAI /v1/completions records, $TOKENS tokens out, $MODEL, medians of $N interleaved samples"
a="" b="" c=""
for s in $(seq "$N"); do
    t0=$(now); "$BIN" generate -m "$MODEL" --batch "$D/in.jsonl" -t 1 -q >"$D/a.jsonl"; t1=$(now)
    a="$a $(awk "BEGIN { print $RECORDS / ($t1 - $t0) }")"
    t0=$(now); "$BIN" generate -m "$MODEL" --batch "$D/in.jsonl" -t 2 -q >"$D/b.jsonl"; t1=$(now)
    b="$b $(awk "BEGIN { print $RECORDS / ($t1 - $t0) }")"
    rm -f "$D"/part-*.jsonl
    t0=$(now)
    parallel --will-cite -j 2 "$BIN" generate -m "$MODEL" --batch "$D/in.jsonl" -t 1 -q --shard {}/2 \
        --output "$D/part-{}.jsonl" ::: 1 2
    "$(dirname "$0")/merge_shards.sh" "$D/part-1.jsonl" "$D/part-2.jsonl" >"$D/c.jsonl"
    t1=$(now)
    c="$c $(awk "BEGIN { print $RECORDS / ($t1 - $t0) }")"
done
printf '  %-44s %8.1f records/s   (samples:%s)\n' "1 process x 1 thread" "$(echo $a | median)" \
    "$(for x in $a; do printf ' %.1f' $x; done)"
printf '  %-44s %8.1f records/s   (samples:%s)\n' "1 process x 2 threads" "$(echo $b | median)" \
    "$(for x in $b; do printf ' %.1f' $x; done)"
printf '  %-44s %8.1f records/s   (samples:%s)\n' "GNU parallel, 2 processes x 1 thread (--shard)" \
    "$(echo $c | median)" "$(for x in $c; do printf ' %.1f' $x; done)"
for x in b c; do
    cmp -s <(strip "$D/a.jsonl") <(strip "$D/$x.jsonl") && echo "  results of $x identical to a's (but the prompt tokens each shard's cache served)" ||
        echo "  RESULTS OF $x DIFFER from a's"
done
