#!/usr/bin/env bash
# Merges the results of `smallmind generate --batch --shard I/N` runs (or of
# --unordered runs) back into input order: by each result's input line ("line"
# in smallmind's records, the number in "batch_req_LINE" in OpenAI's).
#
#   scripts/merge_shards.sh part-*.jsonl > results.jsonl
set -eu
[ $# -gt 0 ] || { echo "usage: $0 RESULTS.jsonl..." >&2; exit 2; }
# A record's first "line": N is its own (a "line" inside a string has its quotes escaped).
cat -- "$@" | LC_ALL=C awk '{
    k = ""
    if (match($0, /^\{"id": "batch_req_[0-9]+"/)) k = substr($0, 19, RLENGTH - 19)
    else if (match($0, /"line": [0-9]+/)) k = substr($0, RSTART + 8, RLENGTH - 8)
    print k "\t" $0
}' | LC_ALL=C sort -s -n -k1,1 | cut -f2-
