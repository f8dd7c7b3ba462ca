#!/usr/bin/python3
"""Block-quantized weights in NumPy, written from the public format
description (docs/model-format.md), independent of the C code.

    import sm_quant
    w = sm_quant.dequantize("q4_0", raw_bytes, n)        # float32 (n,)
    raw = sm_quant.quantize_plain("q8_0", w)              # llama.cpp-style rounding

Types (32 weights per block, f16 scale d first):
    q8_0  d, 32 x int8 q                       w = d * q
    q4_0  d, 16 bytes: byte j = q[j] | q[j+16] << 4, w = d * (q - 8)
    q4_1  d, m, nibbles as q4_0's, w = d * q + m
    q5_0  d, qh (u32: bit j = q[j]'s fifth bit), nibbles, w = d * (q - 16)
    q5_1  d, m, qh, nibbles, w = d * q + m
    iq4_nl d, nibbles as q4_0's, w = d * IQ4NL[q] (GGUF's table of 16 levels)
Super-blocks of 256 weights (the "k" types):
    q4_k  d, dmin (f16), 12 bytes of 6-bit scales/mins, 128 bytes of nibbles;
          sub-block j (32 weights): w = (d sc_j) q - (dmin m_j)
    q5_k  the same with 32 bytes of fifth bits (qh) before the nibbles
    q6_k  ql (128), qh (64), int8 scales (16), d (f16) last;
          sub-block j (16 weights): w = d sc_j (q - 32)
    q2_k  scales (16 bytes: scale | min << 4), qs (64), d, dmin (f16) last;
          sub-block j (16 weights): w = d sc_j q - dmin m_j, q 2 bits
    q3_k  hmask (32), qs (64), 12 bytes of 6-bit scales, d (f16) last;
          sub-block j: w = d (sc_j - 32) (q - 4), q 3 bits (the third from hmask)
    In q2_k and q3_k weight 128 h + 32 k + l has its low bits at bits 2k, 2k+1
    of qs[32 h + l], q3_k's third at bit 4h + k of hmask[l].
    iq4_xs d (f16), scales_h (u16), scales_l (4 bytes), 128 bytes of nibbles;
          block j (32 weights): 6-bit ls_j = nibble j % 2 of scales_l[j // 2]
          | bits 2j, 2j+1 of scales_h << 4; w = d (ls_j - 32) IQ4NL[q], the
          nibbles of block j at bytes 16 j.. as iq4_nl's
"""
try:
    import numpy as np
except ImportError:  # sizes (BLOCK, row_bytes) work without NumPy; the rest needs it
    np = None

BLOCK = {"q8_0": (32, 34), "q4_0": (32, 18),  # weights per block, bytes per block
         "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24),
         "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210),
         "q2_k": (256, 84), "q3_k": (256, 110), "iq4_nl": (32, 18), "iq4_xs": (256, 136)}
IQ4NL = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)


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


def _k3_scales(s):
    """(blocks, 12) q3_k scale bytes -> the 16 stored 6-bit scales (blocks, 16), int32."""
    s = s.astype(np.int32)
    low = np.concatenate([s[:, 0:8] & 15, s[:, 0:8] >> 4], axis=1)
    high = np.concatenate([(s[:, 8:12] >> (2 * g)) & 3 for g in range(4)], axis=1)
    return low | (high << 4)


def _low2(qs):
    """(blocks, 64) bytes of 2-bit levels -> (blocks, 256): weight 128 h + 32 k + l at bits 2k of
    byte 32 h + l."""
    qs = qs.reshape(len(qs), 2, 1, 32).astype(np.int32)
    return ((qs >> (2 * np.arange(4)[None, None, :, None])) & 3).reshape(len(qs), 256)


def _dequantize_k(qtype, b):
    """Super-blocks b (blocks, bytes) of a k type -> float32 (blocks, 256)."""
    nb = len(b)
    if qtype == "q2_k":
        sc = b[:, 0:16].astype(np.int32)
        d, dmin = _f16(b[:, 80:82]), _f16(b[:, 82:84])
        q = _low2(b[:, 16:80]).reshape(nb, 16, 16)
        ds = (d * (sc & 15).astype(np.float32)).astype(np.float32)  # exact
        dm = (dmin * (sc >> 4).astype(np.float32)).astype(np.float32)
        w = ds[:, :, None] * q.astype(np.float32) - dm[:, :, None]
        return w.astype(np.float32).reshape(nb, 256)
    if qtype == "q3_k":
        hm = b[:, 0:32].reshape(nb, 1, 1, 32).astype(np.int32)
        bit = (hm >> (4 * np.arange(2)[None, :, None, None] + np.arange(4)[None, None, :, None])) & 1
        q = _low2(b[:, 32:96]) + 4 * bit.reshape(nb, 256) - 4
        sc = _k3_scales(b[:, 96:108]) - 32
        d = _f16(b[:, 108:110])
        return (d * (sc[:, :, None] * q.reshape(nb, 16, 16)).astype(np.float32).reshape(nb, 256)).astype(np.float32)
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
    if qtype == "iq4_xs":
        nb = len(b)
        d = _f16(b[:, 0:2])
        sh = b[:, 2:4].copy().view("<u2").astype(np.int32)  # (blocks, 1)
        sl = b[:, 4:8].astype(np.int32)
        j = np.arange(8)
        ls = ((sl[:, j // 2] >> (4 * (j % 2))) & 15) | (((sh >> (2 * j)) & 3) << 4)  # (blocks, 8)
        dl = (d * (ls - 32).astype(np.float32)).astype(np.float32)  # exact: 11 x 6 bits
        nib = b[:, 8:136].reshape(nb, 8, 16)
        q = np.array(IQ4NL, dtype=np.float32)[np.concatenate([nib & 15, nib >> 4], axis=2)]
        return (dl[:, :, None] * q).astype(np.float32).reshape(-1)
    d = b[:, :2].copy().view("<f2").astype(np.float32)  # (blocks, 1)
    if qtype in ("q4_1", "q5_0", "q5_1"):
        m = _f16(b[:, 2:4]) if qtype != "q5_0" else np.float32(0)
        nib = b[:, size - 16:]
        q = np.concatenate([nib & 15, nib >> 4], axis=1).astype(np.int32)
        if qtype != "q4_1":
            qh = b[:, size - 20:size - 16].copy().view("<u4").astype(np.int64)  # (blocks, 1)
            q |= (((qh >> np.arange(32)[None, :]) & 1) << 4).astype(np.int32)
        if qtype == "q5_0":
            return (d * (q - 16).astype(np.float32)).astype(np.float32).reshape(-1)
        return (d * q.astype(np.float32) + m).astype(np.float32).reshape(-1)
    if qtype == "iq4_nl":
        nib = b[:, 2:]
        q = np.array(IQ4NL, dtype=np.float32)[np.concatenate([nib & 15, nib >> 4], axis=1)]
        return (d * q).astype(np.float32).reshape(-1)
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
