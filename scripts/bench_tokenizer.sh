#!/usr/bin/env bash
# Tokenizer speed: tokens/s encoding 1 MB of text with each tokenizer, the
# load time taken out (a run on empty input is subtracted); medians of N
# (default 5) interleaved samples. Texts: English (the King James Bible
# corpus when `make model` has built it, else the docs repeated) and a
# multilingual mix (the fixture texts of tests/fixtures/hf_tokenizer_reference.json
# repeated: code, digits, CJK, Arabic, Hindi, emoji). Tokenizers: GPT-2
# (vocab.json + merges.txt: the hand-written splitter; and its tokenizer.json
# with the pattern as a PCRE2 regex), Llama 3, Qwen 2.5, Gemma 3 from ../shared.
#   scripts/bench_tokenizer.sh [BIN] [SHARED]
set -eu
BIN=${1:-build/smallmind}
SHARED=${2:-../shared}
N=${N:-5}
PY=$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 )
T=$(mktemp -d)
trap 'rm -rf $T' EXIT
TOK=$SHARED/models/tokenizers
[ -d $TOK ] || { echo "no $TOK: no tokenizer benchmark"; exit 0; }
$PY - "$T" "$TOK" "$SHARED/models/tiny-gpt2" <<'PYEOF'
import json, os, sys
t, tok, tiny = sys.argv[1:4]
src = "build/corpus/kjv.txt" if os.path.exists("build/corpus/kjv.txt") else None
eng = open(src, encoding="utf-8").read() if src else "".join(
    open(os.path.join("docs", f), encoding="utf-8").read() for f in sorted(os.listdir("docs")) if f.endswith(".md"))
mix = "\n".join(json.load(open("tests/fixtures/hf_tokenizer_reference.json", encoding="utf-8"))["texts"])
for name, text in (("english", eng), ("mixed", mix)):
    b = text.encode()
    b = (b * (1 + (1 << 20) // len(b)))[: 1 << 20]
    while b and (b[-1] & 0xC0) == 0x80: b = b[:-1]
    open(os.path.join(t, name + ".txt"), "wb").write(b[:-1] if b and b[-1] >= 0xC0 else b)
def mdir(name, n_vocab, tokenizer, files):
    d = os.path.join(t, name); os.makedirs(d)
    for s, n in files: os.symlink(os.path.abspath(s), os.path.join(d, n))
    json.dump({"format": "smallmind", "format_version": 1, "architecture": "gpt2", "n_layer": 1,
               "n_head": 1, "n_embd": 64, "n_ctx": 64, "n_vocab": n_vocab, "norm_eps": 1e-5,
               "activation": "gelu_tanh", "tied_output": True, "bias": False, "tokenizer": tokenizer,
               "tensors": [{"name": "unused", "dtype": "f32", "shape": [1], "file": "model.bin",
                            "offset": 64}]}, open(os.path.join(d, "config.json"), "w"))
if os.path.isdir(tiny):
    mdir("gpt2-hand", 50257, {"type": "gpt2", "vocab": "vocab.json", "merges": "merges.txt", "eos": 50256},
         [(os.path.join(tiny, "vocab.json"), "vocab.json"), (os.path.join(tiny, "merges.txt"), "merges.txt")])
    tj = json.load(open(os.path.join(tiny, "tokenizer.json"), encoding="utf-8"))
    tj["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?:'s|'t|'re|'ve|'m|'ll|'d)| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": False}, {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}
    json.dump(tj, open(os.path.join(t, "gpt2-tokenizer.json"), "w"))
    mdir("gpt2-pcre2", 50257, {"type": "huggingface", "file": "tokenizer.json", "eos": 50256},
         [(os.path.join(t, "gpt2-tokenizer.json"), "tokenizer.json")])
for name, v in (("llama3", 128256), ("qwen2_5", 151936), ("gemma3", 262208)):
    f = os.path.join(tok, name, "tokenizer.json")
    if os.path.exists(f): mdir(name, v, {"type": "huggingface", "file": "tokenizer.json"}, [(f, "tokenizer.json")])
PYEOF
: > $T/empty.txt
now() { date +%s.%N; }
printf '%-12s %-8s %10s %12s %10s\n' tokenizer text tokens "tokens/s" "load ms"
for d in gpt2-hand gpt2-pcre2 llama3 qwen2_5 gemma3; do
    [ -d $T/$d ] || continue
    for text in english mixed; do
        ntok=$($BIN tokenize -m $T/$d -f $T/$text.txt | wc -w)
        rates=(); loads=()
        for i in $(seq $N); do
            a=$(now); $BIN tokenize -m $T/$d -f $T/empty.txt >/dev/null; b=$(now)
            $BIN tokenize -m $T/$d -f $T/$text.txt >/dev/null; c=$(now)
            loads+=($($PY -c "print(($b-$a)*1000)"))
            rates+=($($PY -c "print($ntok/max(1e-6,($c-$b)-($b-$a)))"))
        done
        med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
        printf '%-12s %-8s %10d %12.0f %10.0f\n' $d $text $ntok "$(med "${rates[@]}")" "$(med "${loads[@]}")"
    done
done
