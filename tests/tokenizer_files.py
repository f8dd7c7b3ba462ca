"""Tokenizer files for the tokenizer checks (test_tokenizers.py): model
directories holding only what `tokenize` reads, llama2.c tokenizer.bin files
written and read, and the broken files of BAD_INPUTS 21, each of which must
fail with one line naming the file and the fault. T is the stage's one tally."""
import json
import os
import struct
import subprocess

from tally import Tally

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
    return subprocess.run(args, input=data, capture_output=True, timeout=900)


def sp_file(entries, max_len=16):
    out = struct.pack("<i", max_len)
    for score, piece in entries:
        b = piece if isinstance(piece, bytes) else piece.encode()
        out += struct.pack("<fi", score, len(b)) + b
    return out


def read_sp_file(path):
    """llama2.c tokenizer.bin -> [(score, piece bytes)] by id."""
    with open(path, "rb") as f:
        data = f.read()
    at, out = 4, []
    while at < len(data):
        score, n = struct.unpack_from("<fi", data, at)
        out.append((score, data[at + 8:at + 8 + n]))
        at += 8 + n
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
        ("bpe_empty_token", json.dumps(dict(vocab, **{"": 257})), "", "token 257 \"\" is empty"),
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
    # a token spelled outside the alphabet (Command R's emoji) is no bad input: merging never makes
    # it, and it decodes to its own UTF-8, as Hugging Face's ByteLevel decoder has it
    d = os.path.join(tmp, "bpe-unreachable")
    os.makedirs(d)
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(dict(vocab, **{"\u4e2d": 257}), f)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("\u0120 t\n")
    model_dir_config(d, 512, {"type": "gpt2", "vocab": "vocab.json", "merges": "merges.txt"})
    enc = run([smbin, "tokenize", "-m", d, "-p", "\u4e2d t"])
    dec = run([smbin, "detokenize", "-m", d, "257", "256"])
    want_ids = " ".join(str(vocab[alphabet[b]]) for b in "\u4e2d".encode()) + " 256"
    check(enc.returncode == 0 and enc.stdout.decode().split() == want_ids.split() and dec.stdout == "\u4e2d t".encode(),
          "a vocab.json token outside GPT-2's alphabet loads, is never made, and decodes to its UTF-8",
          f"{enc.stdout!r} {enc.stderr!r} want {want_ids}; {dec.stdout!r}")
    # a \u0000 escape is a NUL token in a tokenizer.json (InternLM 2 has one); a raw C0 byte,
    # never in UTF-8, is refused there, since C0 80 is how the reader keeps a NUL
    d = os.path.join(tmp, "hf-nul")
    os.makedirs(d)
    tj = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "\u0000": 2, "ab": 3}, "merges": ["a b"]},
          "added_tokens": [], "normalizer": None, "pre_tokenizer": None, "decoder": None, "post_processor": None}
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f)
    model_dir_config(d, 4, {"type": "huggingface", "file": "tokenizer.json"})
    enc = run([smbin, "tokenize", "-m", d, "-f", "-"], b"ab\0a")
    dec = run([smbin, "detokenize", "-m", d, "3", "2", "0"])
    with open(os.path.join(d, "tokenizer.json"), "rb") as f:
        raw = f.read()
    with open(os.path.join(d, "tokenizer.json"), "wb") as f:
        f.write(raw.replace(b'"b"', b'"b\xc0\x80"'))
    bad = run([smbin, "tokenize", "-m", d, "-p", "a"])
    check(enc.stdout.split() == [b"3", b"2", b"0"] and dec.stdout == b"ab\0a" and bad.returncode == 1 and
          b"invalid UTF-8 (byte 0xC0)" in bad.stderr and bad.stderr.count(b"\n") == 1,
          "a tokenizer.json's \\u0000 token is a NUL (encoded and decoded); a raw C0 byte is refused, naming it",
          f"{enc.stdout!r} {enc.stderr!r} {dec.stdout!r} {bad.stderr!r}")


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
