#!/usr/bin/python3
"""Block-quantized weights in NumPy, written from the public format
description (docs/model-format.md), independent of the C code; and a minimal
GGUF reader to find quantized tensors in llama.cpp's files.

    import sm_quant
    w = sm_quant.dequantize("q4_0", raw_bytes, n)        # float32 (n,)
    raw = sm_quant.quantize_plain("q8_0", w)              # llama.cpp-style rounding
    for t in sm_quant.gguf_tensors("model.gguf"): ...     # name, type, shape, offset, n

Types (32 weights per block, f16 scale d first):
    q8_0  d, 32 x int8 q                       w = d * q
    q4_0  d, 16 bytes: byte j = q[j] | q[j+16] << 4, w = d * (q - 8)
"""
import struct

import numpy as np

BLOCK = {"q8_0": (32, 34), "q4_0": (32, 18)}  # weights per block, bytes per block
GGML_TYPES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0",
              9: "q8_1", 10: "q2_k", 11: "q3_k", 12: "q4_k", 13: "q5_k", 14: "q6_k", 15: "q8_k",
              30: "bf16"}


def row_bytes(qtype, n):
    per, size = BLOCK[qtype]
    assert n % per == 0
    return n // per * size


def dequantize(qtype, raw, n):
    """n weights of qtype from raw bytes -> float32, each d * level rounded once."""
    per, size = BLOCK[qtype]
    b = np.frombuffer(raw, dtype=np.uint8, count=n // per * size).reshape(-1, size)
    d = b[:, :2].copy().view("<f2").astype(np.float32)  # (blocks, 1)
    if qtype == "q8_0":
        q = b[:, 2:].view(np.int8).astype(np.float32)
    else:
        nib = b[:, 2:]
        q = np.concatenate([nib & 15, nib >> 4], axis=1).astype(np.float32) - 8.0
    return (d * q).astype(np.float32).reshape(-1)


def quantize_plain(qtype, w):
    """The usual reference quantizer (as ggml's reference code does it): q8_0
    d = amax / 127, q = round(w / d); q4_0 d = m / -8 for m the weight of
    largest magnitude, q = clamp(trunc(w / d + 8.5), 0, 15). For comparison
    of quantization error."""
    x = np.asarray(w, dtype=np.float32).reshape(-1, 32)
    out = []
    if qtype == "q8_0":
        amax = np.abs(x).max(axis=1)
        d = (amax / 127).astype(np.float32)
        idv = np.where(d != 0, 1 / np.where(d != 0, d, 1), 0).astype(np.float32)
        q = np.round(x * idv[:, None]).astype(np.int8)  # numpy rounds half to even; ggml away
        for i in range(len(x)):
            out.append(np.float16(d[i]).tobytes() + q[i].tobytes())
    else:
        idx = np.abs(x).argmax(axis=1)
        m = x[np.arange(len(x)), idx]
        d = (m / -8).astype(np.float32)
        idv = np.where(d != 0, 1 / np.where(d != 0, d, 1), 0).astype(np.float32)
        q = np.clip(np.trunc(x * idv[:, None] + 8.5), 0, 15).astype(np.uint8)
        for i in range(len(x)):
            out.append(np.float16(d[i]).tobytes() + (q[i, :16] | (q[i, 16:] << 4)).tobytes())
    return b"".join(out)


def _gguf_value(f, vtype):
    fixed = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
             11: "<q", 12: "<d"}
    if vtype in fixed:
        fmt = fixed[vtype]
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
    if vtype == 8:
        (n,) = struct.unpack("<Q", f.read(8))
        return f.read(n).decode("utf-8", "replace")
    if vtype == 9:
        et, n = struct.unpack("<IQ", f.read(12))
        return [_gguf_value(f, et) for _ in range(n)]
    raise ValueError(f"unknown GGUF value type {vtype}")


def gguf_tensors(path):
    """The tensors of a GGUF v2/v3 file: dicts with name, type (GGML_TYPES
    name), shape (GGUF order: row length first), n and the absolute byte
    offset of the data."""
    with open(path, "rb") as f:
        magic, version, nt, nkv = struct.unpack("<4sIQQ", f.read(24))
        assert magic == b"GGUF" and version in (2, 3), path
        kv = {}
        for _ in range(nkv):
            (kl,) = struct.unpack("<Q", f.read(8))
            key = f.read(kl).decode()
            (vt,) = struct.unpack("<I", f.read(4))
            kv[key] = _gguf_value(f, vt)
        infos = []
        for _ in range(nt):
            (nl,) = struct.unpack("<Q", f.read(8))
            name = f.read(nl).decode()
            (nd,) = struct.unpack("<I", f.read(4))
            dims = struct.unpack(f"<{nd}Q", f.read(8 * nd))
            tt, off = struct.unpack("<IQ", f.read(12))
            infos.append((name, dims, tt, off))
        align = kv.get("general.alignment", 32)
        base = (f.tell() + align - 1) // align * align
    out = []
    for name, dims, tt, off in infos:
        n = 1
        for d in dims:
            n *= d
        out.append({"name": name, "type": GGML_TYPES.get(tt, str(tt)), "shape": list(dims),
                    "n": n, "offset": base + off})
    return out
