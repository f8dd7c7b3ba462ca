#!/usr/bin/python3
"""Quantized weights against NumPy (scripts/sm_quant.py, written from the
format description) and against llama.cpp's own quantized files.

- Dequantization: every q8_0 / q4_0 tensor of ../shared/models/gguf (made by
  llama.cpp's llama-quantize) and of our own converted models, dequantized by
  smallmind (tests/tools/quant_tool) and by NumPy: equal bit for bit.
- The quantizer: on the real stories260K weights (the f32 GGUF), the squared
  error of smallmind's quantization is below that of llama.cpp's file made
  from the same weights, and below NumPy's plain rounding.
- The forward pass of converted models against NumPy's float64 forward on
  the dequantized weights (every kernel table, 1 and 2 threads): the scalar
  table's prefill dequantizes into f32 products, so it is held to the f32
  tolerance (1e-4); decode, and the SIMD tables' prefill (the packed integer
  product), quantize activations to 8 bits, each off by at most amax/254 in
  its block of 32, which on these random models moves logits by under 5% of
  their standard deviation (measured: 3.3-4.8%); held to 10%. 1 and 2
  threads bit-identical.

    test_quant.py --bin build --models build/test-models --shared ../shared
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
from tally import Tally  # noqa: E402
import sm_gguf  # noqa: E402  (pure Python)

TALLY = Tally("quant")
report, skip = TALLY.report, TALLY.skip
QTYPES = ("q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "iq4_nl", "iq4_xs")
# llama.cpp's files of the types ../shared does not hold (made by its llama-quantize from
# ../shared's llama-rand-256-f16.gguf; tests/fixtures/gguf/README.md says how)
FIXTURES = os.path.join(HERE, "fixtures", "gguf")
MIXES = ("q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "iq4_nl",
         "iq4_xs")  # convert --dtype values tested on models


def c_dequant(tool, qtype, path, offset, n, np):
    p = subprocess.run([tool, "dequant", qtype, path, str(offset), str(n)], capture_output=True)
    if p.returncode:
        raise RuntimeError(p.stderr.decode())
    return np.frombuffer(p.stdout, dtype="<f4")


def c_quant(tool, qtype, w, np):
    p = subprocess.run([tool, "quant", qtype], input=np.asarray(w, "<f4").tobytes(),
                       capture_output=True)
    if p.returncode:
        raise RuntimeError(p.stderr.decode())
    return p.stdout


def read_tensor(path, t, np, sm_quant):
    """Tensor t (an sm_gguf description) of GGUF file path as float32: f16 widened, the
    quantized types dequantized by NumPy."""
    with open(path, "rb") as f:
        f.seek(t["offset"])
        if t["type"] == "f16":
            return np.frombuffer(f.read(2 * t["n"]), dtype="<f2").astype(np.float32)
        return sm_quant.dequantize(t["type"], f.read(sm_quant.row_bytes(t["type"], t["n"])), t["n"])


def same_bits(a, b, np):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def check_gguf(tool, shared, np, sm_quant):
    files = sorted(glob.glob(os.path.join(shared, "models", "gguf", "*.gguf")))
    if not files:
        skip("llama.cpp's quantized files", f"{shared}/models/gguf is absent")
        return
    for path in files + sorted(glob.glob(os.path.join(FIXTURES, "*.gguf"))):
        tensors = [t for t in sm_gguf.read(path)[1] if t["type"] in QTYPES]
        if not tensors:
            continue
        bad = []
        for t in tensors:
            with open(path, "rb") as f:
                f.seek(t["offset"])
                raw = f.read(sm_quant.row_bytes(t["type"], t["n"]))
            want = sm_quant.dequantize(t["type"], raw, t["n"])
            try:
                got = c_dequant(tool, t["type"], path, t["offset"], t["n"], np)
            except RuntimeError as e:
                bad.append(f"{t['name']}: {str(e)[:200]}")
                continue
            if not same_bits(got, want, np):
                bad.append(t["name"])
        kinds = sorted({t["type"] for t in tensors})
        report(not bad, f"dequantize {os.path.basename(path)} ({len(tensors)} {'/'.join(kinds)} "
               "tensors) = NumPy bit for bit", f"differs: {bad[:3]}" if bad else "")
    check_layout(shared, np, sm_quant)


# Relative RMS error of each type on N(0, 0.02) weights, from llama-quantize's files here
# (measured, worst tensor: q8_0 0.0054, q6_k 0.018, q5_k 0.036, q4_k 0.072, q5_1 0.038, q5_0
# 0.043, q4_1 0.078, iq4_nl 0.077, iq4_xs 0.077, q3_k 0.152, q2_k 0.298). A misread layout
# (swapped nibbles, scales or halves) is off by about 1.0 or more; 1.5 times the measured figure
# leaves room.
LAYOUT_RMS = {"q8_0": 0.0081, "q6_k": 0.027, "q5_k": 0.055, "q4_k": 0.11, "q5_1": 0.057,
              "q5_0": 0.065, "q4_1": 0.12, "iq4_nl": 0.12, "iq4_xs": 0.12, "q3_k": 0.23, "q2_k": 0.45}


def f16_originals(shared, what):
    """(folder, path, {name: tensor}) of llama-rand-256-f16.gguf, the weights llama.cpp's
    llama-rand-256 files were quantized from; None (said as a skip of `what`) if absent."""
    base = os.path.join(shared, "models", "gguf")
    ref = os.path.join(base, "llama-rand-256-f16.gguf")
    if not os.path.exists(ref):
        skip(what, f"{ref} is absent")
        return None
    return base, ref, {t["name"]: t for t in sm_gguf.read(ref)[1]}


def check_layout(shared, np, sm_quant):
    """The layout itself, not only agreement of two readings of it: every quantized tensor of
    llama-rand-256-* dequantized (NumPy) is close to the same tensor of llama-rand-256-f16.gguf,
    the weights llama-quantize started from."""
    found = f16_originals(shared, "k-type layouts against the f16 originals")
    if not found:
        return
    base, ref, orig = found
    worst = {}
    for path in sorted(glob.glob(os.path.join(base, "llama-rand-256-q*.gguf")) +
                       glob.glob(os.path.join(FIXTURES, "llama-rand-256-*.gguf"))):
        for t in sm_gguf.read(path)[1]:
            if t["type"] not in LAYOUT_RMS:
                continue
            w = read_tensor(ref, orig[t["name"]], np, sm_quant).astype(np.float64)
            q = read_tensor(path, t, np, sm_quant)
            rel = float(np.sqrt(((q - w) ** 2).mean() / (w ** 2).mean()))
            worst[t["type"]] = max(worst.get(t["type"], 0.0), rel)
    for qt, rel in sorted(worst.items()):
        report(rel <= LAYOUT_RMS[qt], f"{qt} tensors of llama.cpp's files, dequantized, match the "
               "f16 weights they came from", f"worst relative RMS error {rel:.4f} (at most {LAYOUT_RMS[qt]})")


def check_quantizer(tool, shared, np, sm_quant):
    base = os.path.join(shared, "models", "gguf")
    src = os.path.join(base, "stories260K-pad192-f32.gguf")
    if not os.path.exists(src):
        skip("quantizer vs llama.cpp", f"{src} is absent")
        return
    f32 = {t["name"]: t for t in sm_gguf.read(src)[1]}
    for qtype in ("q8_0", "q4_0"):
        ref = os.path.join(base, f"stories260K-pad192-{qtype}-pure.gguf")
        ours = theirs = plain = 0.0
        for t in sm_gguf.read(ref)[1]:
            if t["type"] != qtype:
                continue
            s = f32[t["name"]]
            with open(src, "rb") as f:
                f.seek(s["offset"])
                w = np.frombuffer(f.read(4 * s["n"]), dtype="<f4")
            with open(ref, "rb") as f:
                f.seek(t["offset"])
                lq = sm_quant.dequantize(qtype, f.read(sm_quant.row_bytes(qtype, t["n"])), t["n"])
            mine = sm_quant.dequantize(qtype, c_quant(tool, qtype, w, np), t["n"])
            pl = sm_quant.dequantize(qtype, sm_quant.quantize_plain(qtype, w), t["n"])
            w64 = w.astype(np.float64)
            ours += float(((mine - w64) ** 2).sum())
            theirs += float(((lq - w64) ** 2).sum())
            plain += float(((pl - w64) ** 2).sum())
        report(ours < theirs and ours < plain,
               f"{qtype} quantizer on stories260K: squared error below llama.cpp's and plain "
               "rounding's", f"ours {ours:.4e}, llama.cpp {theirs:.4e} ({ours / theirs:.3f}x), "
               f"plain {plain:.4e}")


def check_quantizer_k(tool, shared, np, sm_quant):
    """The k types and the others llama-quantize wrote from llama-rand-256's weights (the f16
    file): our squared error below that of its q4_k_m / q5_k_m / q6_k files in ../shared and of
    the files here (q2_k, q3_k_m, q4_1, q5_0, q5_1, iq4_nl, iq4_xs), tensor type by tensor type."""
    found = f16_originals(shared, "k quantizer vs llama.cpp")
    if not found:
        return
    base, src, f16 = found
    tot = {}
    refs = [os.path.join(base, f"llama-rand-256-{mix}.gguf") for mix in ("q4_k_m", "q5_k_m", "q6_k")]
    for ref in refs + sorted(glob.glob(os.path.join(FIXTURES, "llama-rand-256-*.gguf"))):
        for t in sm_gguf.read(ref)[1]:
            if t["type"] not in QTYPES or t["type"] in ("q8_0", "q4_0"):  # those two: check_quantizer
                continue
            w = read_tensor(src, f16[t["name"]], np, sm_quant)
            lq = read_tensor(ref, t, np, sm_quant)
            mine = sm_quant.dequantize(t["type"], c_quant(tool, t["type"], w, np), t["n"])
            w64 = w.astype(np.float64)
            e = tot.setdefault(t["type"], [0.0, 0.0])
            e[0] += float(((mine - w64) ** 2).sum())
            e[1] += float(((lq - w64) ** 2).sum())
    for qt, (ours, theirs) in sorted(tot.items()):
        report(ours < theirs, f"{qt} quantizer on llama-rand-256: squared error below llama.cpp's",
               f"ours {ours:.4e}, llama.cpp {theirs:.4e} ({ours / theirs:.3f}x)")


def mix_types(cfg, mix):
    """The type convert --dtype mix gives each tensor of cfg (the rules of sm_convert.h, written
    again here): vectors and pos_embd f32; the tied embedding at q8_0 (the 32-weight types) or
    q6_k (k types);
    under q4_k_m / q5_k_m attn_qkv one type up and mlp_down at q6_k on layers i < n/8,
    i >= 7n/8 or (i - n/8) % 3 == 2."""
    n = cfg["n_layer"]
    base = {"q4_k_m": "q4_k", "q5_k_m": "q5_k"}.get(mix, mix)
    out = {}
    for t in cfg["tensors"]:
        name = t["name"]
        if len(t["shape"]) == 1 or name == "pos_embd":
            out[name] = "f32"
        elif name == "tok_embd":
            out[name] = "q8_0" if mix in ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl") else "q6_k"
        elif mix.endswith("_m") and name.endswith("attn_qkv.weight"):
            out[name] = "q5_k" if base == "q4_k" else "q6_k"
        elif mix.endswith("_m") and name.endswith("mlp_down.weight"):
            i = int(name.split(".")[1])
            out[name] = "q6_k" if i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2 else base
        else:
            out[name] = base
    return out


def check_models(a, np, sm_model, sm_quant, tmp):
    smallmind, dump, tool = (os.path.join(a.bin, x) for x in ("smallmind", "dump_logits", "quant_tool"))
    src = os.path.join(a.models, "seed")
    toks = [(i * 37 + 11) % 256 for i in range(70)]
    for qtype in MIXES:
        d = os.path.join(tmp, qtype)
        p = subprocess.run([smallmind, "convert", src, d, "--dtype", qtype, "-q"], capture_output=True)
        if p.returncode:
            report(False, f"convert --dtype {qtype}", p.stderr.decode())
            continue
        cfg, w = sm_model.read_model(d)
        kinds = {t["name"]: t["dtype"] for t in cfg["tensors"]}
        want = mix_types(cfg, qtype)
        wrong = {n: v for n, v in kinds.items() if v != want[n]}
        report(not wrong, f"convert --dtype {qtype}: each tensor's type as the mix says "
               f"({', '.join(sorted(set(want.values())))})", str(wrong) if wrong else "")
        bad = []
        for t in cfg["tensors"]:
            if t["dtype"] in QTYPES:
                got = c_dequant(tool, t["dtype"], os.path.join(d, t["file"]), t["offset"],
                                int(np.prod(t["shape"])), np)
                if not same_bits(got, w[t["name"]].astype(np.float32).reshape(-1), np):
                    bad.append(t["name"])
        report(not bad, f"{qtype} model: every tensor dequantized = NumPy bit for bit", str(bad) if bad else "")
        ref = sm_model.gpt2_logits(cfg, w, toks)
        spread = float(ref.std())
        results = {}
        for kern in ["scalar", "avx2", "avx512"]:
            for mode in ["batch", "step"]:
                for th in [1, 2]:
                    p = subprocess.run([dump, d, kern, str(th), mode, ",".join(map(str, toks))],
                                       capture_output=True)
                    if p.returncode == 3:
                        break
                    tag = f"{qtype}/{kern}/{mode}/{th}t"
                    if p.returncode:
                        report(False, tag, p.stderr.decode())
                        continue
                    got = np.frombuffer(p.stdout, dtype="<f4").reshape(len(toks), -1)
                    results[(kern, mode, th)] = got
                    diff = float(np.abs(got - ref).max())
                    tol = 1e-4 if mode == "batch" and kern == "scalar" else 0.10 * spread
                    report(diff <= tol, f"logits vs numpy {tag}",
                           f"max|diff| {diff:.2e} (tol {tol:.2e}, {diff / spread:.1%} of the spread)")
            if (kern, "step", 1) not in results:
                skip(f"{qtype}/{kern}", "not supported by this CPU")
        for (kern, mode, th), got in results.items():
            if th == 2:
                report(np.array_equal(got, results[(kern, mode, 1)]),
                       f"1 and 2 threads bit-identical {qtype}/{kern}/{mode}")


def check_kv_f16(a, np, sm_model):
    """An f16 KV-cache (--kv-type f16): every table's logits, prefill and decode, against NumPy's
    float64 forward with f32 keys and values. Each key and value is off by at most 2^-11 of itself,
    which moves these logits by about 0.05% of their spread (measured); held to 1%. 1 and 2 threads
    bit-identical; and not the f32 cache's logits (the type is really used)."""
    dump = os.path.join(a.bin, "dump_logits")
    d = os.path.join(a.models, "seed")
    cfg, w = sm_model.read_model(d)
    toks = [(i * 53 + 7) % 256 for i in range(90)]
    ref = sm_model.gpt2_logits(cfg, w, toks)
    spread = float(ref.std())
    env = dict(os.environ, SM_KV_TYPE="f16")
    for kern in ["scalar", "avx2", "avx512"]:
        got = {}
        for mode in ["batch", "step"]:
            for th in [1, 2]:
                p = subprocess.run([dump, d, kern, str(th), mode, ",".join(map(str, toks))],
                                   capture_output=True, env=env)
                if p.returncode == 3:
                    skip(f"f16 KV-cache {kern}", "not supported by this CPU")
                    break
                if p.returncode:
                    report(False, f"f16 KV-cache {kern}/{mode}/{th}t", p.stderr.decode())
                    continue
                got[(mode, th)] = np.frombuffer(p.stdout, dtype="<f4").reshape(len(toks), -1)
                diff = float(np.abs(got[(mode, th)] - ref).max())
                report(diff <= 0.01 * spread, f"f16 KV-cache logits vs numpy {kern}/{mode}/{th}t",
                       f"max|diff| {diff:.2e} ({diff / spread:.3%} of the spread; at most 1%)")
        p = subprocess.run([dump, d, kern, "1", "step", ",".join(map(str, toks))], capture_output=True)
        if ("step", 1) in got and p.returncode == 0:
            f32 = np.frombuffer(p.stdout, dtype="<f4").reshape(len(toks), -1)
            report(not np.array_equal(f32, got[("step", 1)]), f"f16 KV-cache differs from f32's {kern}")
        for mode in ["batch", "step"]:
            if (mode, 1) in got and (mode, 2) in got:
                report(np.array_equal(got[(mode, 1)], got[(mode, 2)]),
                       f"f16 KV-cache 1 and 2 threads bit-identical {kern}/{mode}")


def check_kept(a, tmp):
    """Rows that are not whole blocks (the odd model is 48 wide): kept in the source type, said once."""
    smallmind = os.path.join(a.bin, "smallmind")
    out = os.path.join(tmp, "odd-q4_0")
    p = subprocess.run([smallmind, "convert", os.path.join(a.models, "odd"), out, "--dtype", "q4_0"],
                       capture_output=True)
    err = p.stderr.decode()
    wrong = ["converted nothing"]
    if p.returncode == 0:
        with open(os.path.join(out, "config.json")) as f:
            ts = json.load(f)["tensors"]
        # 48-wide rows stay f32 (8 matrices); mlp_down's 192-wide rows are whole blocks
        wrong = [t["name"] for t in ts if t["dtype"] != ("q4_0" if len(t["shape"]) == 2 and
                 t["shape"][1] % 32 == 0 and t["name"] != "pos_embd" else "f32")]
    report(not wrong and "note: 8 matrices kept in the source type (rows not whole 32-weight blocks), "
           "e.g. tok_embd" in err, "convert --dtype q4_0 of a 48-wide model: 48-wide matrices kept "
           "f32, with a note", f"{err.strip()} {wrong}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--shared", required=True)
    a = ap.parse_args()
    try:
        import numpy as np
        import sm_model
        import sm_quant
    except ImportError:
        skip("quantization tests", f"NumPy is not installed for {sys.executable}")
        return TALLY.close()
    tool = os.path.join(a.bin, "quant_tool")
    with tempfile.TemporaryDirectory(prefix="sm-quant-") as tmp:
        for check, args in ((check_gguf, (tool, a.shared, np, sm_quant)),
                            (check_quantizer, (tool, a.shared, np, sm_quant)),
                            (check_quantizer_k, (tool, a.shared, np, sm_quant)),
                            (check_models, (a, np, sm_model, sm_quant, tmp)), (check_kept, (a, tmp)),
                            (check_kv_f16, (a, np, sm_model))):
            try:
                check(*args)
            except (RuntimeError, OSError, ValueError) as e:  # a tool that failed: a failure, not a crash
                report(False, check.__name__, str(e)[:300])
    return TALLY.close()


if __name__ == "__main__":
    sys.exit(main())
