#!/usr/bin/python3
"""Training against independent references.

- Gradient check: analytic gradients (tests/tools/dump_grads: every tensor of
  tiny models, tied and separate output, with and without biases, the best
  SIMD kernels and the scalar ones, sequences within one causal block of
  attention and over several) against central finite differences of a
  float64 NumPy forward pass (scripts/sm_model.py), which shares no code
  with the C trainer.
- PyTorch: the first 5 steps of `smallmind train` against scripts/train_ref.py
  from the same initial weights and batches, losses within 1e-4 (skipped,
  saying so, when python3-torch is absent).
- Learning: a tiny model drives its loss well below the unigram entropy.
- Determinism: 1 and 2 threads give the same bytes; a run stopped (Ctrl-C or
  --steps) and resumed ends bit for bit where an uninterrupted one does.

    test_train.py --bin build
"""
import argparse
import collections
import math
import os
import random
import shutil
import signal
import subprocess
import sys

import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tally import Tally  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))


def words_text(n_bytes, seed):
    """Pseudo-English: sentences of words from a small fixed vocabulary."""
    rng = random.Random(seed)
    words = ("the and of to in he that it was for on are as with his they at be this from "
             "have or by one had not but what all were when we there can an your which their "
             "said if do will each about how up out them then she many some so these would").split()
    out = []
    while sum(len(s) for s in out) < n_bytes:
        s = " ".join(rng.choice(words) for _ in range(rng.randint(4, 10)))
        out.append(s[0].upper() + s[1:] + ". ")
    return "".join(out)[:n_bytes].encode()


def run(args, **kw):
    return subprocess.run(args, capture_output=True, **kw)


def gradcheck(np, sm_model, dump, tmp, kernels, L, H, C, T, B, tied, bias):
    name = f"gradcheck {kernels} L{L} H{H} C{C} T{T} B{B} {'tied' if tied else 'untied'} " \
           f"{'bias' if bias else 'no-bias'}"
    out = os.path.join(tmp, f"g-{kernels}-{tied}-{bias}")
    p = run([dump, out, kernels, "2", str(L), str(H), str(C), str(T), str(B), str(int(tied)),
             str(int(bias)), "7"])
    if p.returncode != 0:
        report(False, name, p.stderr.decode())
        return
    cfg, w = sm_model.read_model(out)
    with open(os.path.join(out, "batch.txt")) as f:
        tok = np.array(f.readline().split(), dtype=int).reshape(B, T)
        tgt = np.array(f.readline().split(), dtype=int).reshape(B, T)
        c_loss = float(f.readline())
    raw = np.fromfile(os.path.join(out, "grads.bin"), dtype="<f4")

    def loss():
        total = 0.0
        for b in range(B):
            lg = sm_model.gpt2_logits(cfg, w, list(tok[b]))
            mx = lg.max(-1, keepdims=True)
            lse = np.log(np.exp(lg - mx).sum(-1)) + mx[:, 0]
            total += (lse - lg[np.arange(T), tgt[b]]).sum()
        return total / (B * T)

    ref_loss = loss()
    report(abs(ref_loss - c_loss) <= 1e-5, f"{name}: loss", f"C {c_loss:.7f} numpy {ref_loss:.7f}")
    rng = np.random.default_rng(0)
    at, worst, worst_name = 0, 0.0, ""
    h = 1e-5
    for t in cfg["tensors"]:
        n = math.prod(t["shape"])
        g = raw[at:at + n].astype(np.float64)
        at += n
        arr = w[t["name"]].reshape(-1)  # a view: perturbing it changes the model
        idx = list(np.argsort(-np.abs(g))[:3]) + list(rng.integers(0, n, 3))
        num, ana = [], []
        for i in idx:
            old = arr[i]
            arr[i] = old + h
            lp = loss()
            arr[i] = old - h
            lm = loss()
            arr[i] = old
            num.append((lp - lm) / (2 * h))
            ana.append(g[i])
        num, ana = np.array(num), np.array(ana)
        scale = max(np.abs(num).max(), 1e-6)
        err = np.abs(num - ana).max() / scale
        if err > worst:
            worst, worst_name = err, t["name"]
        if not (err <= 2e-3 and np.abs(g).max() > 0):
            report(False, f"{name}: {t['name']}",
                   f"relative error {err:.2e}; analytic {ana} numeric {num}")
            return
    report(at == raw.size, f"{name}: all {len(cfg['tensors'])} tensors",
           f"worst relative error {worst:.1e} ({worst_name})")


def train(sm, data, out, *extra, check=True):
    p = run([sm, "train", "--data", data, "--out", out, "-q", *extra])
    if check and p.returncode != 0:
        raise RuntimeError(f"smallmind train {' '.join(extra)}: {p.stderr.decode()}")
    return p


def same_bytes(a, b, files=("model.bin", "optimizer.bin")):
    for f in files:
        with open(os.path.join(a, f), "rb") as x, open(os.path.join(b, f), "rb") as y:
            if x.read() != y.read():
                return False
    return True


def csv_losses(d):
    with open(os.path.join(d, "loss.csv")) as f:
        rows = [line.strip().split(",") for line in f][1:]
    return [(int(r[0]), float(r[2]), r[3]) for r in rows]


TALLY = Tally("train")
report, skip = TALLY.report, TALLY.skip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    sm = os.path.join(a.bin, "smallmind")
    dump = os.path.join(a.bin, "dump_grads")
    tmp = tempfile.mkdtemp(prefix="sm-train-")
    try:
        data = os.path.join(tmp, "words.txt")
        with open(data, "wb") as f:
            f.write(words_text(60000, 1))
        small = ["--layers", "2", "--heads", "4", "--embd", "64", "--ctx", "64", "--batch", "4"]

        try:
            import numpy as np
            import sm_model
        except ImportError:
            np = None
            skip("gradient checks", f"NumPy is not installed for {sys.executable} "
                 "(apt-get install python3-numpy)")
        if np is not None:
            for k in ["auto", "scalar"]:
                gradcheck(np, sm_model, dump, tmp, k, 2, 2, 16, 8, 2, True, True)
            gradcheck(np, sm_model, dump, tmp, "auto", 1, 3, 12, 6, 3, False, False)
            # B x T = 300 rows (the bias gradients' row sums: no multiple of 8), and attention
            # by causal blocks of 32 rows: four whole blocks and a partial one
            for k in ["auto", "scalar"]:
                gradcheck(np, sm_model, dump, tmp, k, 1, 2, 16, 150, 2, True, True)

        # PyTorch replay of the first 5 steps
        init, r5 = os.path.join(tmp, "init"), os.path.join(tmp, "r5")
        train(sm, data, init, "--steps", "0", *small)
        train(sm, data, r5, "--steps", "5", "--warmup", "2", "--lr", "1e-2", "--eval-every",
              "0", *small)
        have_torch = run(["/usr/bin/python3", "-c", "import torch, numpy"]).returncode == 0 \
            if os.path.exists("/usr/bin/python3") else False
        if not have_torch:
            skip("pytorch replay", "python3-torch is not installed for /usr/bin/python3 "
                 "(apt-get install python3-torch)")
        else:
            p = run(["/usr/bin/python3", os.path.join(HERE, "..", "scripts", "train_ref.py"),
                     "replay", "--init", init, "--run", r5, "--data", data])
            if p.returncode != 0:
                report(False, "pytorch replay", p.stderr.decode()[-500:])
            else:
                ref = [float(line.split(",")[1]) for line in p.stdout.decode().split("\n")[1:] if line]
                ours = [l for _, l, _ in csv_losses(r5)]
                diff = max(abs(x - y) for x, y in zip(ref, ours)) if len(ref) == 5 else 1
                report(len(ref) == 5 and len(ours) == 5 and diff <= 1e-4,
                       "5 steps vs pytorch", f"max |loss diff| {diff:.1e}; losses {ours}")

        # it learns: well below the unigram entropy of the text
        text = open(data, "rb").read()
        n = len(text)
        uni = -sum(c / n * math.log(c / n) for c in collections.Counter(text).values())
        lr_run = os.path.join(tmp, "learn")
        train(sm, data, lr_run, "--steps", "300", "--lr", "3e-3", "--eval-every", "100", *small)
        rows = csv_losses(lr_run)
        last = sum(l for _, l, _ in rows[-10:]) / 10
        val = float(rows[-1][2])
        report(last < 0.65 * uni and val < 0.65 * uni, "learns",
               f"train {last:.3f}, held-out {val:.3f} nats/byte; unigram entropy {uni:.3f}")
        p = run([sm, "generate", "-m", lr_run, "-p", "The ", "-n", "40", "--temp", "0"])
        report(p.returncode == 0 and len(p.stdout) == 40, "trained model generates",
               repr(p.stdout.decode(errors="replace")))

        # thread counts give the same bytes
        t1, t2 = os.path.join(tmp, "t1"), os.path.join(tmp, "t2")
        train(sm, data, t1, "--steps", "4", "-t", "1", *small)
        train(sm, data, t2, "--steps", "4", "-t", "2", *small)
        report(same_bytes(t1, t2), "1 and 2 threads: identical weights and moments")

        # stop with --steps, resume to the end: constant rate so the schedules agree
        const = ["--lr", "2e-3", "--lr-min", "2e-3", "--warmup", "0", "--eval-every", "0"]
        full, part = os.path.join(tmp, "full"), os.path.join(tmp, "part")
        train(sm, data, full, "--steps", "6", *const, *small)
        train(sm, data, part, "--steps", "3", *const, *small)
        p = run([sm, "train", "--data", data, "--resume", part, "--steps", "6", "-q"])
        report(p.returncode == 0 and same_bytes(full, part), "resume after --steps 3: bit for bit",
               p.stderr.decode())
        report([r[:2] for r in csv_losses(full)] == [r[:2] for r in csv_losses(part)],
               "resumed loss.csv continues the first one")

        # Ctrl-C mid-run writes a checkpoint; resuming it ends where a whole run does
        whole, cut = os.path.join(tmp, "whole"), os.path.join(tmp, "cut")
        long = ["--steps", "150", "--eval-every", "0", *small]
        train(sm, data, whole, *long)
        proc = subprocess.Popen([sm, "train", "--data", data, "--out", cut, "--log-every", "1",
                                 *long], stderr=subprocess.PIPE)
        first = b""
        while b"step 3/" not in first:
            line = proc.stderr.readline()
            if not line:
                break
            first += line
        proc.send_signal(signal.SIGINT)
        err = proc.stderr.read().decode()
        rc = proc.wait()
        stopped = [r[0] for r in csv_losses(cut)][-1] if os.path.exists(cut) else -1
        report(rc == 130 and "interrupted at step" in err and 3 <= stopped < 150,
               "Ctrl-C: checkpoint and exit 130", f"exit {rc}, stopped at step {stopped}")
        p = run([sm, "train", "--data", data, "--resume", cut, "-q"])
        report(p.returncode == 0 and same_bytes(whole, cut), "resume after Ctrl-C: bit for bit",
               p.stderr.decode())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return TALLY.close()


if __name__ == "__main__":
    sys.exit(main())
