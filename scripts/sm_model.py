#!/usr/bin/python3
"""Read and write smallmind model directories; a NumPy reference forward pass.

A model directory is config.json plus weight files (see docs/model-format.md).
This module is independent of the C code: it parses the format from the
documentation and computes GPT-2 logits in float64 with NumPy, so tests can
compare smallmind against it.

    import sm_model
    cfg, tensors = sm_model.read_model("models/default")     # NumPy arrays
    logits = sm_model.gpt2_logits(cfg, tensors, [72, 105])   # (T, n_vocab)

Command line:
    sm_model.py DIR --tokens 1,2,3 [--out FILE]   writes float32 logits (T, V)
    sm_model.py DIR --text "Hello"                byte tokens of TEXT
"""
import argparse
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sm_quant  # noqa: E402

MAGIC = b"SMWEIGHT"
HEADER = 64
DTYPES = {"f32": ("<f4", 4), "f16": ("<f2", 2), "bf16": ("<u2", 2)}  # bf16: the top half of an f32


def _np():
    import numpy  # imported late so writing works without NumPy
    return numpy


def write_model(out_dir, config, tensors, file_name="model.bin"):
    """Writes config (a dict without "tensors") and tensors as a model
    directory. Each tensor is (name, shape, data_bytes) for f32, or
    (name, shape, data_bytes, dtype) with dtype "f32", "f16", "bf16" or a
    quantized type of sm_quant (data: its blocks)."""
    os.makedirs(out_dir, exist_ok=True)
    manifest = []
    offset = HEADER
    tmp = os.path.join(out_dir, file_name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(MAGIC + struct.pack("<II", 1, HEADER) + b"\0" * (HEADER - 16))
        for name, shape, data, *dtype in tensors:
            dtype = dtype[0] if dtype else "f32"
            pad = (-offset) % 64
            f.write(b"\0" * pad)
            offset += pad
            n = 1
            for d in shape:
                n *= d
            size = sm_quant.row_bytes(dtype, n) if dtype not in DTYPES else DTYPES[dtype][1] * n
            assert len(data) == size, name
            manifest.append({"name": name, "dtype": dtype, "shape": list(shape),
                             "file": file_name, "offset": offset})
            f.write(data)
            offset += len(data)
    os.replace(tmp, os.path.join(out_dir, file_name))
    cfg = dict(config)
    cfg["tensors"] = manifest
    with open(os.path.join(out_dir, "config.json.tmp"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")
    os.replace(os.path.join(out_dir, "config.json.tmp"), os.path.join(out_dir, "config.json"))


def read_model(model_dir):
    """Returns (config dict, {name: float64 ndarray}) after checking the header."""
    np = _np()
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    files = {}
    tensors = {}
    for t in cfg["tensors"]:
        fn = t["file"]
        if fn not in files:
            with open(os.path.join(model_dir, fn), "rb") as f:
                files[fn] = f.read()
            if files[fn][:8] != MAGIC:
                raise ValueError(f"{fn}: not a smallmind weight file")
        n = math.prod(t["shape"])
        if t["dtype"] in sm_quant.BLOCK:  # rows of whole blocks, dequantized as float32
            nb = sm_quant.row_bytes(t["dtype"], n)
            raw = files[fn][t["offset"]:t["offset"] + nb]
            if len(raw) != nb:
                raise ValueError(f"{fn}: tensor {t['name']} is truncated")
            a = sm_quant.dequantize(t["dtype"], raw, n)
            tensors[t["name"]] = a.astype(np.float64).reshape(t["shape"])
            continue
        dt, size = DTYPES[t["dtype"]]
        raw = files[fn][t["offset"]:t["offset"] + n * size]
        if len(raw) != n * size:
            raise ValueError(f"{fn}: tensor {t['name']} is truncated")
        a = np.frombuffer(raw, dtype=dt)
        if t["dtype"] == "bf16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        tensors[t["name"]] = a.astype(np.float64).reshape(t["shape"])
    return cfg, tensors


def _layernorm(x, g, b, eps):
    np = _np()
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps) * g
    return y + b if b is not None else y


def _gelu(x, kind):
    np = _np()
    if kind == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def gpt2_logits(cfg, w, tokens):
    """Logits (T, n_vocab) for every position of `tokens`, float64, no cache."""
    np = _np()
    T = len(tokens)
    C, H = cfg["n_embd"], cfg["n_head"]
    hs = C // H
    eps = cfg["norm_eps"]
    bias = cfg["bias"]

    def b(name):
        return w[name] if bias else None

    def lin(x, name):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if bias else y

    x = w["tok_embd"][tokens] + w["pos_embd"][:T]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(cfg["n_layer"]):
        p = f"blk.{l}."
        h = _layernorm(x, w[p + "ln1.weight"], b(p + "ln1.bias"), eps)
        qkv = lin(h, p + "attn_qkv")
        q, k, v = qkv[:, :C], qkv[:, C:2 * C], qkv[:, 2 * C:]
        out = np.zeros((T, C))
        for hd in range(H):
            sl = slice(hd * hs, (hd + 1) * hs)
            s = q[:, sl] @ k[:, sl].T / math.sqrt(hs) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            out[:, sl] = s @ v[:, sl]
        x = x + lin(out, p + "attn_out")
        h = _layernorm(x, w[p + "ln2.weight"], b(p + "ln2.bias"), eps)
        x = x + lin(_gelu(lin(h, p + "mlp_up"), cfg["activation"]), p + "mlp_down")
    x = _layernorm(x, w["ln_f.weight"], b("ln_f.bias"), eps)
    out_w = w["tok_embd"] if cfg["tied_output"] else w["output.weight"]
    return x @ out_w.T


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", help="comma-separated token ids")
    ap.add_argument("--text", help="text, encoded as bytes (the byte tokenizer)")
    ap.add_argument("--out", help="write float32 logits here (default: print a summary)")
    a = ap.parse_args()
    cfg, w = read_model(a.model)
    if a.tokens:
        toks = [int(t) for t in a.tokens.split(",")]
    elif a.text is not None:
        toks = list(a.text.encode())
    else:
        sys.exit("give --tokens or --text")
    logits = gpt2_logits(cfg, w, toks)
    if a.out:
        logits.astype("<f4").tofile(a.out)
    else:
        print("logits", logits.shape, "last argmax", int(logits[-1].argmax()))


if __name__ == "__main__":
    main()
