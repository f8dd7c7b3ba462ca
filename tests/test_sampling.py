#!/usr/bin/env python3
"""The sampler's transforms against a NumPy reference of each.

For vectors of random logits (7 to 50,257 of them, some with ties) and
settings of every transform alone and together, build/sample_dist prints
the distribution sm_sampler_dist leaves and the ids 20,000 (4,000 over big
vocabularies) sm_sampler_sample calls draw. The reference, written here
from the definitions (transformers' logits processors; llama.cpp's
penalty formula), in this order:

  penalties   each distinct id among the last repeat_last_n of the history,
              seen c times: logit / repeat_penalty if > 0 else * repeat_penalty,
              then - (c * frequency_penalty + presence_penalty)
  greedy      temperature 0: the argmax (lowest id among equals)
  top-k       the k highest (equals ordered by id)
  temperature logits / T, softmax
  top-p       the shortest best-first prefix whose mass reaches top_p
  min-p       probabilities below min_p times the top one's go

Checked: the same candidates, probabilities within 2e-5 (relative 1e-4), best
first where a sort happened, and the draws follow the reference (every id
drawn a candidate, a binned chi-square far below its bound; the seeds are
fixed, so a pass is reproducible). Then the CLI: a --batch record's
min_p and penalties give generate's text with the same flags, and a bad
value is an error record naming the key.

    tests/test_sampling.py --bin build
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tally import Tally  # noqa: E402

T = Tally("sampling")


def reference(np, logits, temp, top_k, top_p, min_p, rp, last_n, pres, freq, hist, bias=None):
    """(ids, probabilities) best first, as the module docstring defines them."""
    l = logits.astype(np.float32).copy()
    for i, b in (bias or {}).items():  # logit_bias first, in float32
        l[i] = np.float32(l[i] + np.float32(b))
    window = hist[-last_n:] if last_n > 0 else []
    if window and (rp not in (0.0, 1.0) or pres or freq):
        ids, counts = np.unique(np.array(window), return_counts=True)
        r = np.float32(rp if rp > 0 else 1.0)
        for i, c in zip(ids, counts):
            v = l[i] * r if l[i] <= 0 else l[i] / r
            l[i] = np.float32(v - np.float32(np.float32(c) * np.float32(freq) + np.float32(pres)))
    order = np.argsort(-l, kind="stable")  # best first, equals by id
    if temp <= 0:
        return order[:1], np.ones(1)
    if 0 < top_k < len(l):
        order = order[:top_k]
    z = l[order].astype(np.float64) / np.float64(np.float32(temp))
    p = np.exp(z - z.max())
    p /= p.sum()
    if top_p < 1.0:
        keep = int(np.searchsorted(np.cumsum(p), top_p) + 1)  # first prefix with cumsum >= top_p
        order, p = order[:keep], p[:keep] / p[:keep].sum()
    if min_p > 0:
        m = p >= min_p * p[0]
        order, p = order[m], p[m] / p[m].sum()
    return order, p


def ambiguous(np, logits, temp, top_k, top_p, min_p, *rest):
    """True when a cut lies within float rounding of a threshold (the C code
    works in float32): such a case would test rounding, not the transform."""
    ids, p = reference(np, logits, temp, top_k, top_p, 0.0, *rest)
    if top_p < 1.0:
        full_ids, full_p = reference(np, logits, temp, top_k, 1.0, 0.0, *rest)
        cs = np.cumsum(full_p)
        if np.min(np.abs(cs - top_p)) < 1e-4:
            return True
        p = full_p[:len(ids)] / full_p[:len(ids)].sum()
    return bool(min_p > 0 and np.min(np.abs(p / p[0] - min_p)) < 1e-4)


def run(np, tool, logits, temp, top_k, top_p, min_p, rp, last_n, pres, freq, hist, bias, draws, seed):
    args = [tool, repr(temp), str(top_k), repr(top_p), repr(min_p), repr(rp), str(last_n), repr(pres),
            repr(freq), ",".join(map(str, hist)) or "-", str(draws), str(seed)]
    if bias:
        args.append(",".join(f"{i}:{b!r}" for i, b in bias.items()))
    p = subprocess.run(args, input=logits.astype("<f4").tobytes(), capture_output=True, timeout=900)
    if p.returncode:
        raise RuntimeError(f"sample_dist failed: {p.stderr.decode()[:200]}")
    head, tail = p.stdout.decode().split("draws\n")
    dist = [ln.split() for ln in head.splitlines()]
    drawn = [ln.split() for ln in tail.splitlines()]
    return (np.array([int(a) for a, _ in dist]), np.array([float(b) for _, b in dist]),
            {int(a): int(b) for a, b in drawn})


def chi2_ok(np, ids, p, counts, n):
    """Pearson's chi-square over bins of expected count >= 25 (best first), below
    df + 8 sqrt(2 df) + 10; and nothing drawn outside the candidates."""
    if set(counts) - set(ids.tolist()):
        return False, f"drawn outside the candidates: {sorted(set(counts) - set(ids.tolist()))[:5]}"
    obs, exp, chi, bins = 0.0, 0.0, 0.0, 0
    for i, q in zip(ids, p):
        obs += counts.get(int(i), 0)
        exp += q * n
        if exp >= 25:
            chi += (obs - exp) ** 2 / exp
            bins += 1
            obs = exp = 0.0
    if exp > 0:
        chi += (obs - exp) ** 2 / max(exp, 1.0)
        bins += 1
    df = max(bins - 1, 1)
    bound = df + 8 * (2 * df) ** 0.5 + 10
    return chi < bound, f"chi2 {chi:.1f} over {bins} bins (bound {bound:.1f})"


CASES = [  # name, V, temp, top_k, top_p, min_p, repeat, last_n, presence, frequency
    ("greedy", 1000, 0.0, 0, 1.0, 0.0, 1.0, 64, 0.0, 0.0),
    ("greedy, penalties move the argmax", 1000, 0.0, 0, 1.0, 0.0, 3.0, 64, 1.0, 0.5),
    ("temperature 0.7 over the whole vocabulary", 1000, 0.7, 0, 1.0, 0.0, 1.0, 64, 0.0, 0.0),
    ("temperature 1.6", 7, 1.6, 0, 1.0, 0.0, 1.0, 64, 0.0, 0.0),
    ("top-k 40", 32000, 1.0, 40, 1.0, 0.0, 1.0, 64, 0.0, 0.0),
    ("top-k 5 with tied logits", 300, 1.0, 5, 1.0, 0.0, 1.0, 64, 0.0, 0.0),
    ("top-p 0.9 at temperature 0.8", 2000, 0.8, 0, 0.9, 0.0, 1.0, 64, 0.0, 0.0),
    ("top-p 0.5", 50257, 1.0, 0, 0.5, 0.0, 1.0, 64, 0.0, 0.0),
    ("min-p 0.05", 2000, 1.0, 0, 1.0, 0.05, 1.0, 64, 0.0, 0.0),
    ("min-p 0.2 at temperature 1.5", 500, 1.5, 0, 1.0, 0.2, 1.0, 64, 0.0, 0.0),
    ("repeat penalty 1.3", 1000, 1.0, 0, 1.0, 0.0, 1.3, 64, 0.0, 0.0),
    ("repeat penalty 0.7 (a reward)", 1000, 1.0, 0, 1.0, 0.0, 0.7, 64, 0.0, 0.0),
    ("presence penalty 0.6", 1000, 1.0, 0, 1.0, 0.0, 1.0, 64, 0.6, 0.0),
    ("frequency penalty 0.4", 1000, 1.0, 0, 1.0, 0.0, 1.0, 64, 0.0, 0.4),
    ("negative presence and frequency", 1000, 1.0, 0, 1.0, 0.0, 1.0, 64, -0.5, -0.3),
    ("penalties over the last 16 of 200 tokens", 1000, 1.0, 0, 1.0, 0.0, 1.5, 16, 0.3, 0.2),
    ("repeat_last_n 0: penalties off", 1000, 1.0, 0, 1.0, 0.0, 1.5, 0, 0.3, 0.2),
    ("all: top-k 50, top-p 0.95, min-p 0.1, temperature 0.9, penalties", 32000, 0.9, 50, 0.95, 0.1,
     1.1, 64, 0.2, 0.1),
    ("all over GPT-2's vocabulary: top-k 40, top-p 0.9, min-p 0.05, penalties", 50257, 0.8, 40, 0.9, 0.05,
     1.2, 256, 0.5, 0.25),
    # logit_bias (ids drawn from the likeliest and the least likely; "ban" -100 on the argmax)
    ("logit_bias, greedy: -100 on the argmax", 1000, 0.0, 0, 1.0, 0.0, 1.0, 64, 0.0, 0.0, "ban"),
    ("logit_bias, greedy: +20 on a middling token", 1000, 0.0, 0, 1.0, 0.0, 1.0, 64, 0.0, 0.0, "lift"),
    ("logit_bias at temperature 0.9, with penalties", 2000, 0.9, 0, 1.0, 0.0, 1.3, 64, 0.3, 0.2, "mix"),
    ("logit_bias with top-k 20, top-p 0.9, min-p 0.05", 32000, 1.0, 20, 0.9, 0.05, 1.0, 64, 0.0, 0.0, "mix"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    try:
        import numpy as np
    except ImportError:
        T.skip("sampling against NumPy", f"NumPy is not installed for {sys.executable}")
        return T.close()
    tool = os.path.join(a.bin, "sample_dist")
    for k, (name, V, temp, top_k, top_p, min_p, rp, last_n, pres, freq, *how) in enumerate(CASES):
        for attempt in range(50):
            rng = np.random.default_rng(1000 * k + attempt)
            logits = (rng.standard_normal(V) * 2.5).astype(np.float32)
            if "tied" in name:  # ties across the top-5 boundary: order by id decides
                logits = np.round(logits).astype(np.float32)
            if "negative" in name or "reward" in name:
                logits -= 1.0  # most logits below 0: the multiply branch
            # a history drawn from the likeliest ids, so penalties touch what matters
            top = np.argsort(-logits, kind="stable")[:30]
            hist = [int(x) for x in rng.choice(top, size=200 if "200" in name else 48)]
            order = np.argsort(-logits, kind="stable")
            bias = {"ban": {int(order[0]): -100.0}, "lift": {int(order[V // 2]): 20.0},
                    "mix": {int(order[0]): -1.5, int(order[3]): 2.25, int(order[V - 1]): 12.0,
                            int(order[40]): -100.0, int(order[7]): 0.5}}.get(how[0]) if how else None
            args = (temp, top_k, top_p, min_p, rp, last_n, pres, freq, hist, bias)
            if not ambiguous(np, logits, *args):
                break
        want_ids, want_p = reference(np, logits, *args)
        n = 4000 if V > 20000 else 20000
        try:
            ids, p, counts = run(np, tool, logits, *args, 0 if temp <= 0 else n, 7 + k)
            if bias and temp <= 0:  # greedy: the biased argmax, not the plain one
                T.report(ids.tolist() != [int(np.argmax(logits))], f"{name}: the bias moves the argmax",
                         str(ids.tolist()))
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
            T.report(False, name, str(e))
            continue
        same = len(ids) == len(want_ids) and set(ids.tolist()) == set(want_ids.tolist())
        detail = f"{len(ids)} vs {len(want_ids)} candidates"
        if same:
            got = dict(zip(ids.tolist(), p.tolist()))
            ref = np.array([got[i] for i in want_ids.tolist()])
            err = np.abs(ref - want_p)
            same = bool(np.all(err <= 2e-5 + 1e-4 * want_p))
            detail = f"max |p - ref| {err.max():.2e}"
            sorted_case = temp > 0 and (0 < top_k < V or top_p < 1.0)
            if same and sorted_case and not np.array_equal(ids, want_ids):
                same, detail = False, "not best first"
        T.report(same, f"{name} (V={V}): the candidates and probabilities of the reference", detail)
        if temp > 0:
            ok, why = chi2_ok(np, want_ids, want_p, counts, n)
            T.report(ok and sum(counts.values()) == n, f"{name}: {n} draws follow the reference", why)
    # the penalties cost nothing when off: a history with every flag at its neutral value
    logits = np.linspace(-3, 3, 64).astype(np.float32)
    ids, p, _ = run(np, tool, logits, 1.0, 0, 1.0, 0.0, 1.0, 64, 0.0, 0.0, list(range(60, 64)), None, 0, 1)
    want_ids, want_p = reference(np, logits, 1.0, 0, 1.0, 0.0, 1.0, 64, 0.0, 0.0, [])
    T.report(np.allclose(p[np.argsort(ids)], want_p[np.argsort(want_ids)], atol=2e-6),
             "neutral penalties with a history: the plain softmax")
    cli_checks(os.path.join(a.bin, "smallmind"))
    return T.close()


def cli_checks(sm):
    """The flags reach the sampler from generate and from --batch records alike."""
    model = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models", "default")
    flags = {"min_p": 0.05, "repeat_penalty": 1.5, "repeat_last_n": 32, "presence_penalty": 0.5,
             "frequency_penalty": 0.3}
    argv = [x for k, v in flags.items() for x in ("--" + k.replace("_", "-"), str(v))]
    base = [sm, "generate", "-m", model, "-p", "The", "-n", "40", "--seed", "3", "-q"]
    plain = subprocess.run(base, capture_output=True, text=True).stdout
    want = subprocess.run(base + argv, capture_output=True, text=True).stdout
    rec = json.dumps(dict(flags, id=1, prompt="The", max_tokens=40, seed=3))
    p = subprocess.run([sm, "generate", "-m", model, "--batch", "-", "-q"], input=rec + "\n",
                       capture_output=True, text=True)
    got = json.loads(p.stdout).get("text") if p.returncode == 0 and p.stdout else None
    T.report(got == want and want != plain, "a --batch record's min_p and penalties = generate's flags",
             f"{got!r} vs {want!r} (plain {plain!r})")
    for key, val in (("min_p", 2), ("repeat_penalty", 0), ("repeat_last_n", 5000), ("presence_penalty", "x"),
                     ("frequency_penalty", 101)):
        p = subprocess.run([sm, "generate", "-m", model, "--batch", "-", "-q"], capture_output=True, text=True,
                           input=json.dumps({"id": 1, "prompt": "a", key: val}) + "\n")
        r = json.loads(p.stdout) if p.stdout else {}
        T.report(p.returncode == 1 and f'"{key}"' in r.get("error", ""), f"a --batch record's bad {key}: "
                 "an error record naming it", f"rc={p.returncode} {p.stdout.strip()[:120]}")
    logit_bias_checks(sm, model)


def logit_bias_checks(sm, model):
    """logit_bias reaches the sampler from --logit-bias, a --batch record (OpenAI's object and llama.cpp's
    list of pairs) and an OpenAI Batch API body alike; greedy, the ids it bans never appear, and one
    forced by +100 is the whole output; bad values are named."""
    base = [sm, "generate", "-m", model, "-p", "The", "-n", "24", "--temp", "0", "--json", "-q"]
    plain = json.loads(subprocess.run(base, capture_output=True, text=True).stdout)
    # ban the tokens greedy decoding chose (the default model's vocabulary is bytes: id = byte)
    banned = sorted(set(plain["text"].encode()))[:6]
    flags = [x for i in banned for x in ("--logit-bias", f"{i}-100")]
    cli = json.loads(subprocess.run(base + flags, capture_output=True, text=True).stdout)["text"]
    T.report(cli and not set(cli.encode()) & set(banned), "--logit-bias ID-100: greedy never picks a banned id",
             f"{cli!r} banned {banned} (plain {plain['text']!r})")
    recs = [{"id": "obj", "prompt": "The", "max_tokens": 24, "temperature": 0,
             "logit_bias": {str(i): -100 for i in banned}},
            {"id": "list", "prompt": "The", "max_tokens": 24, "temperature": 0,
             "logit_bias": [[i, -100] for i in banned]},
            {"custom_id": "oai", "method": "POST", "url": "/v1/completions",
             "body": {"model": "m", "prompt": "The", "max_tokens": 24, "temperature": 0,
                      "logit_bias": {str(i): -100 for i in banned}}},
            {"id": "force", "prompt": "The", "max_tokens": 8, "temperature": 0.8, "seed": 5,
             "logit_bias": {"120": 100}}]
    p = subprocess.run([sm, "generate", "-m", model, "--batch", "-", "-q"], capture_output=True, text=True,
                       input="".join(json.dumps(r) + "\n" for r in recs))
    out = {r.get("custom_id", r.get("id")): r for r in map(json.loads, p.stdout.splitlines())}
    texts = [out.get("obj", {}).get("text"), out.get("list", {}).get("text"),
             out.get("oai", {}).get("response", {}).get("body", {}).get("choices", [{}])[0].get("text")]
    T.report(p.returncode == 0 and texts == [cli] * 3, "a record's logit_bias (object, list of pairs, OpenAI "
             "body) = --logit-bias", f"{texts} vs {cli!r}: {p.stderr[-200:]}")
    T.report(out.get("force", {}).get("text") == "x" * 8, "logit_bias +100 on one id: that token alone, sampled",
             str(out.get("force")))
    bad = [({"logit_bias": {"abc": 1}}, "logit_bias"), ({"logit_bias": {"3": 101}}, "from -100 to 100"),
           ({"logit_bias": {"3": "x"}}, "from -100 to 100"), ({"logit_bias": [[3]]}, "[token id, bias] pairs"),
           ({"logit_bias": {"256": 1}}, "token 256 is not in the vocabulary"), ({"logit_bias": 5}, "logit_bias"),
           ({"logit_bias": {"-1": 1}}, "logit_bias")]
    p = subprocess.run([sm, "generate", "-m", model, "--batch", "-", "-q"], capture_output=True, text=True,
                       input="".join(json.dumps(dict(b, id=f"b{k}", prompt="a")) + "\n" for k, (b, _) in enumerate(bad)))
    got = [json.loads(x).get("error", "") for x in p.stdout.splitlines()]
    T.report(p.returncode == 1 and len(got) == len(bad) and all(w in g for (_, w), g in zip(bad, got)),
             f"{len(bad)} bad logit_bias values: each record's error names it", str(got)[:400])
    for flag, want in (("12x", "expects TOKEN_ID+BIAS"), ("3+101", "expects TOKEN_ID+BIAS"),
                       ("300+1", "token 300 is not in the model's vocabulary")):
        p = subprocess.run(base + ["--logit-bias", flag], capture_output=True, text=True)
        T.report(p.returncode == 2 and want in p.stderr and not p.stdout, f"--logit-bias {flag}: a usage error",
                 p.stderr.strip()[:160])


if __name__ == "__main__":
    sys.exit(main())
