#!/usr/bin/python3
"""Write a smallmind model directory of any GPT-2 or Llama shape with random weights.

For tests and benchmarks. Weights are N(0, std) (GPT-2's initialisation
scale), biases and LayerNorm parameters small random values so that every
term of the forward pass matters. Uses NumPy when present, else pure Python
(slower; fine for small shapes).

    sm_random_model.py --out DIR --layers 4 --heads 8 --embd 256 --ctx 256 --vocab 256
    sm_random_model.py --out DIR --arch llama --layers 6 --heads 6 --embd 288 --ff 768 --vocab 32000

Llama models get the byte tokenizer too (the prompt ids stay below 256),
which is all benchmarks need.
"""
import argparse
import array
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sm_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="model directory to write")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--embd", type=int, default=256)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--activation", default="gelu_tanh", choices=["gelu_tanh", "gelu_erf"])
    ap.add_argument("--untied", action="store_true", help="separate output layer")
    ap.add_argument("--no-bias", action="store_true", help="no biases anywhere")
    ap.add_argument("--std", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"],
                    help="type of the matrices (16-bit needs NumPy; vectors stay f32)")
    ap.add_argument("--force", action="store_true", help="overwrite an existing model directory")
    ap.add_argument("--arch", default="gpt2", choices=["gpt2", "llama"])
    ap.add_argument("--ff", type=int, default=0, help="MLP hidden width (default 4 x embd)")
    ap.add_argument("--kv-heads", type=int, default=0, help="llama: key/value heads (default heads)")
    a = ap.parse_args()

    if os.path.exists(os.path.join(a.out, "config.json")) and not a.force:
        sys.exit(f"{a.out} already holds a model (use --force to overwrite)")
    if os.path.exists(a.out) and not os.path.isdir(a.out):
        sys.exit(f"{a.out} exists and is not a directory")

    try:
        import numpy as np
        rng = np.random.default_rng(a.seed)

        def gen(shape, mean, std, dtype="f32"):
            x = (rng.standard_normal(shape) * std + mean).astype("<f4")
            if dtype == "f16":
                return x.astype("<f2").tobytes()
            if dtype == "bf16":  # round to nearest even, then the top half
                b = x.view(np.uint32).astype(np.uint64)
                return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype("<u2").tobytes()
            return x.tobytes()
    except ImportError:
        if a.dtype != "f32":
            sys.exit("--dtype f16/bf16 needs NumPy (apt-get install python3-numpy)")
        rnd = random.Random(a.seed)

        def gen(shape, mean, std, dtype="f32"):
            n = 1
            for d in shape:
                n *= d
            arr = array.array("f", (rnd.gauss(mean, std) for _ in range(n)))
            if sys.byteorder != "little":
                arr.byteswap()
            return arr.tobytes()

    C, V = a.embd, a.vocab
    t = []

    def add(name, shape, mean=0.0, std=a.std):
        dt = a.dtype if len(shape) == 2 else "f32"
        t.append((name, shape, gen(shape, mean, std, dt), dt))

    F = a.ff or 4 * C
    out_std = a.std / (2 * a.layers) ** 0.5  # projections into the residual stream
    config = {
        "format": "smallmind", "format_version": 1, "architecture": a.arch,
        "n_layer": a.layers, "n_head": a.heads, "n_embd": C, "n_ctx": a.ctx, "n_vocab": V,
        "norm_eps": 1e-5, "tied_output": not a.untied, "tokenizer": {"type": "byte"},
    }
    add("tok_embd", (V, C))
    if a.arch == "llama":
        hd, kvh = C // a.heads, a.kv_heads or a.heads
        for l in range(a.layers):
            p = f"blk.{l}."
            add(p + "attn_norm.weight", (C,), 1.0, 0.1)
            add(p + "attn_qkv.weight", ((a.heads + 2 * kvh) * hd, C))
            add(p + "attn_out.weight", (C, a.heads * hd), std=out_std)
            add(p + "ffn_norm.weight", (C,), 1.0, 0.1)
            add(p + "ffn_gate.weight", (F, C))
            add(p + "ffn_up.weight", (F, C))
            add(p + "ffn_down.weight", (C, F), std=out_std)
        add("norm_f.weight", (C,), 1.0, 0.1)
        config.update(activation="silu", bias=False, n_kv_head=kvh, head_dim=hd, n_ff=F, rope_theta=10000.0)
    else:
        def bias(name, n):
            if not a.no_bias:
                add(name, (n,), 0.0, 0.02)

        add("pos_embd", (a.ctx, C), std=0.01)
        for l in range(a.layers):
            p = f"blk.{l}."
            add(p + "ln1.weight", (C,), 1.0, 0.1)
            bias(p + "ln1.bias", C)
            add(p + "attn_qkv.weight", (3 * C, C))
            bias(p + "attn_qkv.bias", 3 * C)
            add(p + "attn_out.weight", (C, C), std=out_std)
            bias(p + "attn_out.bias", C)
            add(p + "ln2.weight", (C,), 1.0, 0.1)
            bias(p + "ln2.bias", C)
            add(p + "mlp_up.weight", (F, C))
            bias(p + "mlp_up.bias", F)
            add(p + "mlp_down.weight", (C, F), std=out_std)
            bias(p + "mlp_down.bias", C)
        add("ln_f.weight", (C,), 1.0, 0.1)
        bias("ln_f.bias", C)
        config.update(activation=a.activation, bias=not a.no_bias)
        if a.ff:
            config["n_ff"] = F
    if a.untied:
        add("output.weight", (V, C))
    sm_model.write_model(a.out, config, t)
    print(f"wrote {a.out}: {a.arch}, {a.layers} layers, {a.heads} heads, {C} wide, context {a.ctx}, "
          f"vocabulary {V}")

if __name__ == "__main__":
    main()
