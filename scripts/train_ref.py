#!/usr/bin/python3
"""PyTorch reference for `smallmind train`: the same model, batches and AdamW.

Written from the documented training recipe (docs/training.md), not from the
C code: GPT-2 blocks with tanh GELU, tied or separate output layer, AdamW
(decay on matrices and embeddings only), global-norm gradient clipping,
linear warm-up then cosine decay, and batch b of step s starting at byte
splitmix64(seed, s * batch + b) mod (n_train - n_ctx) of the training part.

Replay: the initial weights come from a step-0 checkpoint (`smallmind train
--steps 0`), the hyperparameters from a run's train.json; prints the loss of
each step as CSV (step,loss).

    train_ref.py replay --init INIT_DIR --run RUN_DIR --data FILE [--steps N]

Speed: tokens/s of training steps of a given shape with random weights.

    train_ref.py bench --threads 2 [--layers 4 --heads 8 --embd 256 --ctx 256 --batch 16]
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

M64 = (1 << 64) - 1


def splitmix(seed, i):
    z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def lr_at(hp, s):
    if s < hp["warmup"]:
        return hp["lr"] * (s + 1) / hp["warmup"]
    span = hp["steps"] - hp["warmup"]
    progress = min(1.0, (s - hp["warmup"]) / span) if span > 0 else 1.0
    return hp["lr_min"] + 0.5 * (1 + math.cos(math.pi * progress)) * (hp["lr"] - hp["lr_min"])


class GPT:
    def __init__(self, torch, cfg, params):
        self.t = torch
        self.cfg = cfg
        self.p = params  # name -> leaf tensor with requires_grad

    def loss(self, tokens, targets):
        torch, F, c, p = self.t, self.t.nn.functional, self.cfg, self.p
        B, T = tokens.shape
        C, H = c["n_embd"], c["n_head"]
        hs = C // H
        eps = c["norm_eps"]

        def b(name):
            return p.get(name)

        x = F.embedding(tokens, p["tok_embd"]) + p["pos_embd"][:T]
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        for l in range(c["n_layer"]):
            pre = f"blk.{l}."
            h = F.layer_norm(x, (C,), p[pre + "ln1.weight"], b(pre + "ln1.bias"), eps)
            qkv = F.linear(h, p[pre + "attn_qkv.weight"], b(pre + "attn_qkv.bias"))
            q, k, v = qkv.split(C, dim=-1)
            q = q.view(B, T, H, hs).transpose(1, 2)
            k = k.view(B, T, H, hs).transpose(1, 2)
            v = v.view(B, T, H, hs).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(mask, float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, C)
            x = x + F.linear(y, p[pre + "attn_out.weight"], b(pre + "attn_out.bias"))
            h = F.layer_norm(x, (C,), p[pre + "ln2.weight"], b(pre + "ln2.bias"), eps)
            u = F.gelu(F.linear(h, p[pre + "mlp_up.weight"], b(pre + "mlp_up.bias")),
                       approximate="tanh")
            x = x + F.linear(u, p[pre + "mlp_down.weight"], b(pre + "mlp_down.bias"))
        x = F.layer_norm(x, (C,), p["ln_f.weight"], b("ln_f.bias"), eps)
        out_w = p["tok_embd"] if c["tied_output"] else p["output.weight"]
        logits = x @ out_w.T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def make_optimizer(torch, params, hp):
    decay = [t for t in params.values() if t.dim() == 2]
    rest = [t for t in params.values() if t.dim() != 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": hp["weight_decay"]},
                              {"params": rest, "weight_decay": 0.0}],
                             lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["adam_eps"])


def step(torch, model, opt, hp, s, tokens, targets):
    lr = lr_at(hp, s)
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad(set_to_none=True)
    loss = model.loss(tokens, targets)
    loss.backward()
    if hp["grad_clip"] > 0:
        torch.nn.utils.clip_grad_norm_(list(model.p.values()), hp["grad_clip"])
    opt.step()
    return float(loss)


def replay(a):
    import numpy as np
    import torch
    import sm_model
    torch.set_num_threads(1)
    cfg, w = sm_model.read_model(a.init)
    with open(os.path.join(a.run, "train.json")) as f:
        hp = json.load(f)
    params = {k: torch.tensor(v.astype(np.float32), requires_grad=True) for k, v in w.items()}
    model = GPT(torch, cfg, params)
    opt = make_optimizer(torch, params, hp)
    data = open(a.data, "rb").read()
    n_train, T, B = hp["train_bytes"], cfg["n_ctx"], hp["batch"]
    steps = a.steps if a.steps is not None else hp["step"]
    print("step,loss")
    for s in range(steps):
        tok = np.zeros((B, T), dtype=np.int64)
        tgt = np.zeros((B, T), dtype=np.int64)
        for b in range(B):
            off = splitmix(hp["seed"], s * B + b) % (n_train - T)
            chunk = np.frombuffer(data[off:off + T + 1], dtype=np.uint8)
            tok[b], tgt[b] = chunk[:-1], chunk[1:]
        loss = step(torch, model, opt, hp, s, torch.from_numpy(tok), torch.from_numpy(tgt))
        print(f"{s + 1},{loss:.7f}", flush=True)


def bench(a):
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    C, L = a.embd, a.layers
    cfg = {"n_layer": L, "n_head": a.heads, "n_embd": C, "n_ctx": a.ctx, "norm_eps": 1e-5,
           "tied_output": True}
    shapes = {"tok_embd": (256, C), "pos_embd": (a.ctx, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    for l in range(L):
        for n, s in [("ln1.weight", (C,)), ("ln1.bias", (C,)), ("attn_qkv.weight", (3 * C, C)),
                     ("attn_qkv.bias", (3 * C,)), ("attn_out.weight", (C, C)),
                     ("attn_out.bias", (C,)), ("ln2.weight", (C,)), ("ln2.bias", (C,)),
                     ("mlp_up.weight", (4 * C, C)), ("mlp_up.bias", (4 * C,)),
                     ("mlp_down.weight", (C, 4 * C)), ("mlp_down.bias", (C,))]:
            shapes[f"blk.{l}.{n}"] = s
    params = {k: (torch.randn(s) * 0.02).requires_grad_() for k, s in shapes.items()}
    hp = {"lr": 1e-3, "lr_min": 1e-4, "warmup": 0, "steps": a.steps + 1, "weight_decay": 0.1,
          "beta1": 0.9, "beta2": 0.95, "adam_eps": 1e-8, "grad_clip": 1.0}
    model = GPT(torch, cfg, params)
    opt = make_optimizer(torch, params, hp)
    tok = torch.randint(0, 256, (a.batch, a.ctx))
    tgt = torch.randint(0, 256, (a.batch, a.ctx))
    step(torch, model, opt, hp, 0, tok, tgt)  # warm-up
    t0 = time.perf_counter()
    for s in range(a.steps):
        step(torch, model, opt, hp, s + 1, tok, tgt)
    dt = time.perf_counter() - t0
    print(f"pytorch {torch.__version__}: {a.threads} threads, batch {a.batch} x {a.ctx}: "
          f"{a.steps * a.batch * a.ctx / dt:.0f} tokens/s ({dt / a.steps * 1e3:.0f} ms/step)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("replay")
    r.add_argument("--init", required=True)
    r.add_argument("--run", required=True)
    r.add_argument("--data", required=True)
    r.add_argument("--steps", type=int)
    b = sub.add_parser("bench")
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--layers", type=int, default=4)
    b.add_argument("--heads", type=int, default=8)
    b.add_argument("--embd", type=int, default=256)
    b.add_argument("--ctx", type=int, default=256)
    b.add_argument("--batch", type=int, default=16)
    b.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    replay(a) if a.cmd == "replay" else bench(a)


if __name__ == "__main__":
    main()
