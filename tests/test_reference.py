#!/usr/bin/python3
"""The forward pass against an independent NumPy reference (scripts/sm_model.py).

For each random test model, logits of every position are computed by NumPy
in float64 and by smallmind (tests/tools/dump_logits: every kernel table the
CPU has, 1 and 2 threads, the batched prefill path, the one-token KV-cache
path and chunked prefill). Asserts max |logit difference| <= 1e-4, and that
`smallmind score --json` log-probabilities match NumPy's log-softmax within
1e-4 per token (including a text longer than the context, scored in windows).

    test_reference.py --bin build --models build/test-models
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tally import Tally  # noqa: E402


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))

TOL = 1e-4


TALLY = Tally("reference")
report, skip = TALLY.report, TALLY.skip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    a = ap.parse_args()
    try:
        import numpy as np
        import sm_model
    except ImportError:
        skip("reference tests", f"NumPy is not installed for {sys.executable} "
             "(apt-get install python3-numpy)")
        return TALLY.close()

    dump = os.path.join(a.bin, "dump_logits")
    smallmind = os.path.join(a.bin, "smallmind")
    kernels = ["scalar", "avx2", "avx512"]
    for name in ["seed", "odd", "nobias"]:
        d = os.path.join(a.models, name)
        cfg, w = sm_model.read_model(d)
        V = cfg["n_vocab"]
        T = min(70, cfg["n_ctx"])  # > 4 query blocks of 16, > one 64-wide tile
        toks = [(i * 37 + 11) % min(V, 256) for i in range(T)]
        ref = sm_model.gpt2_logits(cfg, w, toks)
        results = {}
        for kern in kernels:
            for mode in ["batch", "step", "chunk"]:
                for th in [1, 2]:
                    p = subprocess.run([dump, d, kern, str(th), mode, ",".join(map(str, toks))],
                                       capture_output=True)
                    if p.returncode == 3:  # this CPU lacks the ISA
                        skip(f"{name}/{kern}", "not supported by this CPU")
                        break
                    tag = f"{name}/{kern}/{mode}/{th}t"
                    if p.returncode != 0:
                        report(False, tag, p.stderr.decode())
                        continue
                    got = np.frombuffer(p.stdout, dtype="<f4").reshape(T, V)
                    results[(kern, mode, th)] = got
                    diff = float(np.abs(got - ref).max())
                    report(diff <= TOL, f"logits vs numpy {tag}", f"max|diff| {diff:.2e}")
                else:
                    continue
                break
        for (kern, mode, th), got in results.items():
            if th == 2:
                same = np.array_equal(got, results[(kern, mode, 1)])
                report(same, f"1 and 2 threads bit-identical {name}/{kern}/{mode}")

        # score --json against NumPy log-softmax, over a text longer than the context
        text = bytes((i * 53 + 17) % 256 for i in range(cfg["n_ctx"] + 37))
        text = bytes(b if b >= 32 else 65 for b in text)  # any bytes work; keep them printable-ish
        path = os.path.join(a.models, f"{name}.score.txt")
        with open(path, "wb") as f:
            f.write(text)
        p = subprocess.run([smallmind, "score", "-m", d, "-f", path, "--json"], capture_output=True)
        if p.returncode != 0:
            report(False, f"score {name}", p.stderr.decode())
            continue
        out = json.loads(p.stdout)
        ids = list(text)
        worst, total = 0.0, 0.0
        W = cfg["n_ctx"]
        for w0 in range(0, len(ids), W):
            win = ids[w0:w0 + W]
            lg = sm_model.gpt2_logits(cfg, w, win)
            lse = np.log(np.exp(lg - lg.max(-1, keepdims=True)).sum(-1)) + lg.max(-1)
            for i in range(len(win)):
                g = w0 + i + 1
                if g >= len(ids):
                    break
                lp = lg[i, ids[g]] - lse[i]
                total += lp
                worst = max(worst, abs(out["tokens"][g]["logprob"] - lp))
        ok = (worst <= TOL and out["n_scored"] == len(ids) - 1 and out["tokens"][0]["logprob"] is None
              and abs(out["total_logprob"] - total) <= TOL * len(ids))
        report(ok, f"score --json vs numpy {name}", f"max|diff| {worst:.2e} over {len(ids) - 1} tokens")

    return TALLY.close()


if __name__ == "__main__":
    sys.exit(main())
