#!/usr/bin/python3
"""Block-quantized weights in NumPy, written from the public format
description (docs/model-format.md), independent of the C code.

    import sm_quant
    w = sm_quant.dequantize("q4_0", raw_bytes, n)        # float32 (n,)
    raw = sm_quant.quantize_plain("q8_0", w)              # llama.cpp-style rounding

Types (32 weights per block, f16 scale d first):
    q8_0  d, 32 x int8 q                       w = d * q
    q4_0  d, 16 bytes: byte j = q[j] | q[j+16] << 4, w = d * (q - 8)
Super-blocks of 256 weights (the "k" types):
    q4_k  d, dmin (f16), 12 bytes of 6-bit scales/mins, 128 bytes of nibbles;
          sub-block j (32 weights): w = (d sc_j) q - (dmin m_j)
    q5_k  the same with 32 bytes of fifth bits (qh) before the nibbles
    q6_k  ql (128), qh (64), int8 scales (16), d (f16) last;
          sub-block j (16 weights): w = d sc_j (q - 32)
"""
try:
    import numpy as np
except ImportError:  # sizes (BLOCK, row_bytes) work without NumPy; the rest needs it
    np = None

BLOCK = {"q8_0": (32, 34), "q4_0": (32, 18),  # weights per block, bytes per block
         "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210)}


def row_bytes(qtype, n):
    per, size = BLOCK[qtype]
    assert n % per == 0
    return n // per * size


def _f16(b):
    """f16 values at the (blocks, 2) bytes b -> float32 (blocks, 1)."""
    return b.copy().view("<f2").astype(np.float32)


def _k4_scales(s):
    """(blocks, 12) scale bytes -> 6-bit scales and mins, each (blocks, 8)."""
    s = s.astype(np.uint8)
    lo_sc, lo_m = s[:, 0:4] & 63, s[:, 4:8] & 63
    hi_sc = (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)
    hi_m = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return np.concatenate([lo_sc, hi_sc], axis=1), np.concatenate([lo_m, hi_m], axis=1)


def _dequantize_k(qtype, b):
    """Super-blocks b (blocks, bytes) of a k type -> float32 (blocks, 256)."""
    nb = len(b)
    if qtype == "q6_k":
        ql, qh = b[:, 0:128].reshape(nb, 2, 64), b[:, 128:192].reshape(nb, 2, 32)
        sc = b[:, 192:208].view(np.int8).astype(np.int32)
        d = _f16(b[:, 208:210])
        q = np.empty((nb, 2, 4, 32), dtype=np.int32)
        for k in range(4):
            low = ql[:, :, 32 * (k & 1):32 * (k & 1) + 32]
            low = (low & 15) if k < 2 else (low >> 4)
            q[:, :, k, :] = low | (((qh >> (2 * k)) & 3) << 4)
        q = q.reshape(nb, 16, 16) - 32
        return (d * (sc[:, :, None] * q).reshape(nb, 256).astype(np.float32)).astype(np.float32)
    d, dmin = _f16(b[:, 0:2]), _f16(b[:, 2:4])
    sc, m = _k4_scales(b[:, 4:16])
    qs = b[:, 16:144] if qtype == "q4_k" else b[:, 48:176]
    qs = qs.reshape(nb, 4, 32)
    q = np.stack([qs & 15, qs >> 4], axis=2).reshape(nb, 8, 32).astype(np.int32)
    if qtype == "q5_k":
        qh = b[:, 16:48]
        q += ((qh[:, None, :] >> np.arange(8, dtype=np.uint8)[None, :, None]) & 1).astype(np.int32) << 4
    ds = (d * sc.astype(np.float32)).astype(np.float32)      # exact: 11 x 6 bits
    dm = (dmin * m.astype(np.float32)).astype(np.float32)
    w = ds[:, :, None] * q.astype(np.float32) - dm[:, :, None]  # product exact, one rounding
    return w.astype(np.float32).reshape(nb, 256)


def dequantize(qtype, raw, n):
    """n weights of qtype from raw bytes -> float32, each d * level rounded once."""
    per, size = BLOCK[qtype]
    b = np.frombuffer(raw, dtype=np.uint8, count=n // per * size).reshape(-1, size)
    if qtype.endswith("_k"):
        return _dequantize_k(qtype, b).reshape(-1)
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
