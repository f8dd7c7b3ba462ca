#!/usr/bin/python3
"""Block-quantized weights in NumPy, written from the public format
description (docs/model-format.md), independent of the C code.

    import sm_quant
    w = sm_quant.dequantize("q4_0", raw_bytes, n)        # float32 (n,)
    raw = sm_quant.quantize_plain("q8_0", w)              # llama.cpp-style rounding

Types (32 weights per block, f16 scale d first):
    q8_0  d, 32 x int8 q                       w = d * q
    q4_0  d, 16 bytes: byte j = q[j] | q[j+16] << 4, w = d * (q - 8)
"""
import numpy as np

BLOCK = {"q8_0": (32, 34), "q4_0": (32, 18)}  # weights per block, bytes per block


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
