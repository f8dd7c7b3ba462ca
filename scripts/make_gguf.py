#!/usr/bin/python3
"""Small GGUF files for the tests, written from the public format description
(docs/model-format.md): two valid models (a Llama with a SentencePiece-style
vocabulary, a GPT-2 with a byte-level BPE one) and malformed variants of the
Llama, one fault each, with the text smallmind's error line must contain.

    make_gguf.py OUT_DIR      -> OUT_DIR/*.gguf and OUT_DIR/faults.json

faults.json maps each bad file to that text. The valid files also seed the
fuzz corpus (tests/fuzz/corpus/gguf); tiny-llama-v2.gguf is the same Llama
as a version-2 file (its layout is version 3's with 64-bit counts).
"""
import json
import os
import struct
import sys

import numpy as np

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
       U64: "<Q", I64: "<q", F64: "<d"}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack(FMT[t], v)


def kv(key, t, v):
    return gstr(key) + struct.pack("<I", t) + value(t, v)


def q8_0(x):
    """GGUF Q8_0 blocks of x (rows of whole 32-element blocks)."""
    out = b""
    for blk in x.reshape(-1, 32):
        d = np.abs(blk).max() / 127
        q = np.round(blk / d if d else blk * 0).astype(np.int8)
        out += np.float16(d).tobytes() + q.tobytes()
    return out


class Model:
    """A GGUF file as parts that a fault can change before it is written."""

    def __init__(self, meta, tensors, align=32):
        self.magic, self.version, self.align = b"GGUF", 3, align
        self.meta = meta          # list of (key, type, value)
        self.tensors = tensors    # list of dicts: name, dims (row length first), type, data
        self.n_kv = self.n_t = None
        self.extra_kv = b""       # raw entries appended (faults)
        self.tail = None          # cut the file to this many bytes

    def bytes(self):
        infos, data, off = b"", b"", 0
        for t in self.tensors:
            off += (-off) % self.align
            o = t.get("offset", off)
            infos += gstr(t["name"]) + struct.pack("<I", len(t["dims"])) + \
                b"".join(struct.pack("<Q", d) for d in t["dims"]) + struct.pack("<IQ", t["type"], o)
            data += b"\0" * (off - len(data)) + t["data"]
            off = len(data)
        metas = b"".join(kv(k, t, v) for k, t, v in self.meta) + self.extra_kv
        n_kv = len(self.meta) + (1 if self.extra_kv else 0) if self.n_kv is None else self.n_kv
        n_t = len(self.tensors) if self.n_t is None else self.n_t
        head = self.magic + struct.pack("<IQQ", self.version, n_t, n_kv) + metas + infos
        head += b"\0" * ((-len(head)) % self.align)
        out = head + data
        return out[:self.tail] if self.tail is not None else out


def spm_vocab():
    """A SentencePiece-style vocabulary: <unk> <s> </s>, the 256 byte tokens, some pieces."""
    pieces = ["\u2581", "\u2581a", "\u2581the", "\u2581cat", "at", "he", "\u2581t", "\u2581c", "th"]
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + pieces
    scores = [0.0] * 3 + [0.0] * 256 + [-float(i) for i in range(len(pieces))]
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
    return toks, scores, types


def llama(rng, C=32, L=2, H=4, KVH=2, F=64, ctx=64):
    toks, scores, types = spm_vocab()
    V, hd = len(toks), C // H
    meta = [("general.architecture", STR, "llama"), ("general.name", STR, "tiny-llama"),
            ("llama.context_length", U32, ctx), ("llama.embedding_length", U32, C),
            ("llama.feed_forward_length", U32, F), ("llama.block_count", U32, L),
            ("llama.attention.head_count", U32, H), ("llama.attention.head_count_kv", U32, KVH),
            ("llama.rope.dimension_count", U32, hd), ("llama.rope.freq_base", F32, 10000.0),
            ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5), ("general.alignment", U32, 32),
            ("tokenizer.ggml.model", STR, "llama"), ("tokenizer.ggml.tokens", ARR, (STR, toks)),
            ("tokenizer.ggml.scores", ARR, (F32, scores)), ("tokenizer.ggml.token_type", ARR, (I32, types)),
            ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
            ("tokenizer.ggml.add_bos_token", BOOL, True)]
    f32 = lambda *s: (rng.standard_normal(s).astype("<f4") * np.float32(0.1))
    tensors = [("token_embd.weight", (C, V)), ("output_norm.weight", (C,)), ("output.weight", (C, V))]
    for i in range(L):
        p = f"blk.{i}."
        tensors += [(p + "attn_norm.weight", (C,)), (p + "attn_q.weight", (C, C)),
                    (p + "attn_k.weight", (C, KVH * hd)), (p + "attn_v.weight", (C, KVH * hd)),
                    (p + "attn_output.weight", (C, C)), (p + "ffn_norm.weight", (C,)),
                    (p + "ffn_gate.weight", (C, F)), (p + "ffn_down.weight", (F, C)), (p + "ffn_up.weight", (C, F))]
    out = []
    for name, dims in tensors:
        x = f32(*dims[::-1]) + (np.float32(1) if name.endswith("norm.weight") else np.float32(0))
        if name.endswith("attn_q.weight"):  # one quantized matrix
            out.append({"name": name, "dims": dims, "type": 8, "data": q8_0(x.reshape(-1))})
        else:
            out.append({"name": name, "dims": dims, "type": 0, "data": x.astype("<f4").tobytes()})
    return Model(meta, out)


def gpt2(rng, C=32, L=1, H=2, ctx=32):
    # GPT-2's byte alphabet: printable bytes stand for themselves, the rest from U+0100 on
    cps, extra = [], 0
    for b in range(256):
        printable = 33 <= b <= 126 or 0xA1 <= b <= 0xAC or b >= 0xAE
        cps.append(chr(b) if printable else chr(256 + extra))
        extra += 0 if printable else 1
    toks = cps + ["\u0120t", "he", "\u0120the", "<|endoftext|>"]
    merges = ["\u0120 t", "h e", "\u0120t he"]
    V = len(toks)
    meta = [("general.architecture", STR, "gpt2"), ("gpt2.context_length", U32, ctx),
            ("gpt2.embedding_length", U32, C), ("gpt2.feed_forward_length", U32, 4 * C),
            ("gpt2.block_count", U32, L), ("gpt2.attention.head_count", U32, H),
            ("gpt2.attention.layer_norm_epsilon", F32, 1e-5), ("tokenizer.ggml.model", STR, "gpt2"),
            ("tokenizer.ggml.pre", STR, "gpt-2"), ("tokenizer.ggml.tokens", ARR, (STR, toks)),
            ("tokenizer.ggml.merges", ARR, (STR, merges)),
            ("tokenizer.ggml.bos_token_id", U32, V - 1), ("tokenizer.ggml.eos_token_id", U32, V - 1)]
    shapes = [("token_embd.weight", (C, V)), ("position_embd.weight", (C, ctx)),
              ("output_norm.weight", (C,)), ("output_norm.bias", (C,))]
    for i in range(L):
        p = f"blk.{i}."
        shapes += [(p + "attn_norm.weight", (C,)), (p + "attn_norm.bias", (C,)),
                   (p + "attn_qkv.weight", (C, 3 * C)), (p + "attn_qkv.bias", (3 * C,)),
                   (p + "attn_output.weight", (C, C)), (p + "attn_output.bias", (C,)),
                   (p + "ffn_norm.weight", (C,)), (p + "ffn_norm.bias", (C,)),
                   (p + "ffn_up.weight", (C, 4 * C)), (p + "ffn_up.bias", (4 * C,)),
                   (p + "ffn_down.weight", (4 * C, C)), (p + "ffn_down.bias", (C,))]
    ts = [{"name": n, "dims": d, "type": 0,
           "data": (rng.standard_normal(int(np.prod(d))).astype("<f4") * np.float32(0.1)).tobytes()}
          for n, d in shapes]
    return Model(meta, ts)


def set_meta(m, key, t, v):
    m.meta = [(k, t, v) if k == key else (k, tt, vv) for k, tt, vv in m.meta]


def drop_meta(m, key):
    m.meta = [e for e in m.meta if e[0] != key]


def faults():
    """(file name, change to a fresh valid Llama, text the error line must contain)."""
    F = []
    add = lambda name, change, want: F.append((name, change, want))
    add("magic", lambda m: setattr(m, "magic", b"GGUG"), "not a GGUF file")
    add("version1", lambda m: setattr(m, "version", 1), "GGUF version 1 is not supported")
    add("version4", lambda m: setattr(m, "version", 4), "GGUF version 4 is not supported")
    add("big_endian", lambda m: setattr(m, "version", 0x03000000), "big-endian GGUF file")
    add("short_header", lambda m: setattr(m, "tail", 10), "truncated in the header")
    add("huge_kv_count", lambda m: setattr(m, "n_kv", 1 << 40), "metadata entries, more than")
    add("huge_tensor_count", lambda m: setattr(m, "n_t", 1 << 40), "tensors, more than")
    add("huge_key", lambda m: setattr(m, "extra_kv", struct.pack("<Q", 1 << 40) + b"x"), "is a string of 1099511627776 bytes")
    add("empty_key", lambda m: setattr(m, "extra_kv", gstr("") + struct.pack("<I", U32) + value(U32, 1)), "a key of 0 bytes")
    add("value_type", lambda m: setattr(m, "extra_kv", gstr("x.y") + struct.pack("<I", 13) + b"\0" * 8), "value type 13")
    add("array_of_arrays", lambda m: setattr(m, "extra_kv", gstr("x.y") + struct.pack("<IIQ", ARR, ARR, 1)), "array of arrays")
    add("array_elem_type", lambda m: setattr(m, "extra_kv", gstr("x.y") + struct.pack("<IIQ", ARR, 99, 1)), "array of value type 99")
    add("huge_array", lambda m: setattr(m, "extra_kv", gstr("x.y") + struct.pack("<IIQ", ARR, U32, 1 << 50)), "claims 1125899906842624 elements")
    add("huge_string", lambda m: setattr(m, "extra_kv", gstr("x.y") + struct.pack("<IQ", STR, 1 << 33)), "is a string of 8589934592 bytes")
    add("duplicate_key", lambda m: m.meta.append(("general.name", STR, "again")), "general.name appears twice")
    add("alignment_zero", lambda m: set_meta(m, "general.alignment", U32, 0), "general.alignment must be a u32 power of two")
    add("alignment_48", lambda m: set_meta(m, "general.alignment", U32, 48), "general.alignment must be a u32 power of two")
    add("alignment_string", lambda m: set_meta(m, "general.alignment", STR, "32"), "general.alignment must be a u32 power of two")
    add("tensor_name_empty", lambda m: m.tensors[0].update(name=""), "a name of 0 bytes")
    add("tensor_ndim_0", lambda m: m.tensors[1].update(dims=()), "has 0 dimensions")
    add("tensor_ndim_5", lambda m: m.tensors[1].update(dims=(32, 1, 1, 1, 1)), "has 5 dimensions")
    add("tensor_dim_zero", lambda m: m.tensors[1].update(dims=(0,)), "dimension 0 of 0")
    add("tensor_elems_overflow", lambda m: m.tensors[1].update(dims=(1 << 32, 1 << 32, 1 << 20)), "too many elements")
    add("tensor_type_iq3_s", lambda m: m.tensors[1].update(type=21), "type IQ3_S, which smallmind does not run")
    add("tensor_type_unknown", lambda m: m.tensors[1].update(type=200), "type unknown, which smallmind does not run")
    add("tensor_q8_0_rows", lambda m: m.tensors[1].update(type=8, dims=(40,)), "not whole 32-element blocks")
    add("tensor_unaligned", lambda m: m.tensors[1].update(offset=36), "is not aligned")
    add("tensor_outside", lambda m: m.tensors[-1].update(offset=1 << 30), "is outside the file")
    add("tensor_overlap", lambda m: m.tensors[2].update(offset=0), "overlap")
    add("tensor_name_twice", lambda m: m.tensors[2].update(name="output_norm.weight", dims=(32,)), "tensor name output_norm.weight appears twice")
    add("truncated", lambda m: setattr(m, "tail", len(m.bytes()) // 20), "truncated in")
    add("no_architecture", lambda m: drop_meta(m, "general.architecture"), "general.architecture is missing")
    add("architecture_mamba", lambda m: set_meta(m, "general.architecture", STR, "mamba"), "architecture mamba is not supported")
    add("no_block_count", lambda m: drop_meta(m, "llama.block_count"), "llama.block_count is missing")
    add("head_count_string", lambda m: set_meta(m, "llama.attention.head_count", STR, "4"), "llama.attention.head_count is a string, expected an integer")
    add("block_count_zero", lambda m: set_meta(m, "llama.block_count", U32, 0), "llama.block_count is 0, expected 1 to 1024")
    add("embedding_mismatch", lambda m: set_meta(m, "llama.embedding_length", U32, 64), "token_embd.weight rows are 32 wide")
    add("kv_heads_not_divisor", lambda m: set_meta(m, "llama.attention.head_count_kv", U32, 3), "not a multiple of head_count_kv 3")
    add("rope_partial", lambda m: set_meta(m, "llama.rope.dimension_count", U32, 4), "partial or odd rotary")
    add("rope_scaling_yarn", lambda m: m.meta.append(("llama.rope.scaling.type", STR, "yarn")), "llama.rope.scaling.type yarn is not supported")
    add("eps_nan", lambda m: set_meta(m, "llama.attention.layer_norm_rms_epsilon", F32, float("nan")), "layer_norm_rms_epsilon is nan")
    add("eps_under_float", lambda m: set_meta(m, "llama.attention.layer_norm_rms_epsilon", F64, 1e-66), "layer_norm_rms_epsilon is 1e-66, expected between 0 and 1")
    add("missing_tensor", lambda m: setattr(m, "tensors", [t for t in m.tensors if t["name"] != "blk.1.ffn_up.weight"]), "missing required tensor blk.1.ffn_up.weight")
    add("tensor_shape", lambda m: next(t for t in m.tensors if t["name"] == "blk.0.ffn_gate.weight").update(dims=(32, 32), data=b"\0" * 4096), "tensor blk.0.ffn_gate.weight has [32,32], expected [64,32]")
    add("unknown_tensor", lambda m: m.tensors.append({"name": "blk.0.attn_k_norm.weight", "dims": (8,), "type": 0, "data": b"\0" * 32}), "tensor blk.0.attn_k_norm.weight is not part of a llama model")
    add("norm_quantized", lambda m: next(t for t in m.tensors if t["name"] == "output_norm.weight").update(type=8, data=q8_0(np.ones(32, np.float32))), "vectors (norms, biases) must be f32")
    add("tokenizer_bert", lambda m: set_meta(m, "tokenizer.ggml.model", STR, "bert"), "tokenizer.ggml.model bert is not supported")
    add("tokens_not_strings", lambda m: set_meta(m, "tokenizer.ggml.tokens", ARR, (I32, [1, 2, 3])), "tokenizer.ggml.tokens is an array of i32, expected an array of string")
    add("scores_short", lambda m: set_meta(m, "tokenizer.ggml.scores", ARR, (F32, [0.0] * 10)), "tokenizer.ggml.scores has 10 entries")
    add("bos_out_of_range", lambda m: set_meta(m, "tokenizer.ggml.bos_token_id", U32, 100000), "tokenizer.ggml.bos_token_id is 100000")
    add("add_bos_not_bool", lambda m: set_meta(m, "tokenizer.ggml.add_bos_token", U32, 1), "add_bos_token is a u32, expected a bool")
    add("byte_token_malformed", lambda m: set_meta(m, "tokenizer.ggml.tokens", ARR, (STR, ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(255)] + ["<0xZZ>"] + ["a"] * 9)), "is not a valid byte token")
    return F


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = lambda: np.random.default_rng(5)
    with open(os.path.join(out, "tiny-llama.gguf"), "wb") as f:
        f.write(llama(rng()).bytes())
    m = llama(rng())
    m.version = 2
    with open(os.path.join(out, "tiny-llama-v2.gguf"), "wb") as f:
        f.write(m.bytes())
    with open(os.path.join(out, "tiny-gpt2.gguf"), "wb") as f:
        f.write(gpt2(rng()).bytes())
    manifest = {}
    for name, change, want in faults():
        m = llama(rng())
        change(m)
        path = os.path.join(out, f"bad-{name}.gguf")
        with open(path, "wb") as f:
            f.write(m.bytes())
        manifest[os.path.basename(path)] = want
    with open(os.path.join(out, "faults.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
