#!/usr/bin/env python3
"""Real and reference models through `smallmind convert`, `generate` and `score`.

- stories260K (a pretrained llama2.c checkpoint and its tokenizer, from
  ../shared): converted and run greedily, the output equals llama2.c's
  reference_greedy.txt byte for byte, with every kernel table.
- tiny-gpt2 (a Hugging Face GPT-2 directory, ../shared): converts and runs.
- Random GPT-2-shaped and Llama-shaped Hugging Face directories written here
  (safetensors written by this script; F32, F16 and BF16), and a random
  llama2.c checkpoint: every token's log-probability from `smallmind score`
  equals an independent PyTorch forward pass written here to <= 1e-4. The
  Hugging Face Llama reference rotates halves (rotate_half); the llama2.c
  reference rotates interleaved pairs as complex numbers; both must match,
  which proves convert maps each layout onto smallmind's.

    tests/test_models.py --bin build [--shared ../shared]
"""
import argparse
import json
import re
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_file import gpt2_shapes, safetensors_bytes, zeros  # noqa: E402
from tally import Tally  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
T = Tally("models")
TOL = 1e-4
# The kernels these tests run: this CPU's choice, with bf16 weights' products in f32 on the
# exact widening (where the CPU has AVX512-BF16, prefill's default rounds activations to bf16 for
# them: test_llama_hf checks that path against its own reference).
EXACT = "auto,bf16=f32"


SANITIZED = bool(os.environ.get("SM_SANITIZED"))  # make asan: each path once, not every dtype


def check(ok, what, detail=""):
    T.report(ok, what, "" if ok else detail)


def run(args, data=None):
    return subprocess.run(args, input=data, capture_output=True, timeout=900)


def write_safetensors(path, tensors, torch):
    """tensors: name -> torch tensor (float32, float16 or bfloat16)."""
    names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
    raw = lambda t: (t.view(torch.int16) if t.dtype != torch.float32 else t).numpy().tobytes()
    with open(path, "wb") as f:
        f.write(safetensors_bytes([(n, names[t.dtype], t.shape, raw(t.contiguous())) for n, t in tensors.items()]))


def score(smbin, model, text, kernels=EXACT, extra=()):
    p = run([smbin, "score", "-m", model, "--json", "--kernels", kernels, "-f", "-"] + list(extra), text.encode())
    if p.returncode != 0:
        return None, p.stderr.decode(errors="replace")
    r = json.loads(p.stdout)
    return r["tokens"], ""


def model_tensor(model, name, np):
    """Tensor `name` of a smallmind model directory as a NumPy array of its stored type."""
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    d = next(t for t in cfg["tensors"] if t["name"] == name)
    npt = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}[d["dtype"]]
    n = 1
    for k in d["shape"]:
        n *= k
    with open(os.path.join(model, d["file"]), "rb") as f:
        f.seek(d["offset"])
        return np.frombuffer(f.read(n * np.dtype(npt).itemsize), dtype=npt).reshape(d["shape"]), d["dtype"]


def matrix_dtypes(model):
    """The set of dtypes of a model's matrices and of its vectors."""
    with open(os.path.join(model, "config.json")) as f:
        ts = json.load(f)["tensors"]
    return ({t["dtype"] for t in ts if len(t["shape"]) == 2}, {t["dtype"] for t in ts if len(t["shape"]) == 1})


def compare(torch, logits, toks):
    """Max |logprob difference| between the reference logits (T, V) and score's tokens."""
    lp = torch.log_softmax(logits.double(), dim=-1)
    worst = 0.0
    for i in range(1, len(toks)):
        want = lp[i - 1, toks[i]["id"]].item()
        worst = max(worst, abs(want - toks[i]["logprob"]))
    return worst


def score_vs_torch(torch, smbin, model, text, reference, label, kernels=EXACT, extra=()):
    """Every token's log-probability from `score` = the PyTorch logits reference(ids) to TOL.
    False when score itself failed."""
    toks, err = score(smbin, model, text, kernels, extra)
    if toks is None:
        check(False, f"score: {label}", err)
        return False
    worst = compare(torch, reference(torch.tensor([t["id"] for t in toks])), toks)
    check(worst <= TOL, f"{label}: {len(toks) - 1} log-probs = PyTorch, worst {worst:.2e}")
    return True


# ---------------------------------------------------------------- GPT-2

def gpt2_reference(torch, W, ids, L, H, eps):
    x = W["wte.weight"][ids] + W["wpe.weight"][: len(ids)]
    T, C = x.shape
    hs = C // H
    mask = torch.full((T, T), float("-inf")).triu(1).double()
    ln = lambda x, p: torch.nn.functional.layer_norm(x, (C,), W[p + ".weight"], W[p + ".bias"], eps)
    for l in range(L):
        p = f"h.{l}."
        h = ln(x, p + "ln_1")
        qkv = h @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]  # Conv1D: [in, out]
        q, k, v = qkv.split(C, dim=-1)
        q, k, v = (t.view(T, H, hs).transpose(0, 1) for t in (q, k, v))
        a = torch.softmax(q @ k.transpose(1, 2) / hs ** 0.5 + mask, dim=-1) @ v
        x = x + a.transpose(0, 1).reshape(T, C) @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        h = ln(x, p + "ln_2")
        h = torch.nn.functional.gelu(h @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + h @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
    x = ln(x, "ln_f")
    return x @ W["wte.weight"].T


def with_gpt2_tokenizer_converted(smbin, tiny, hf, label):
    """Links tiny-gpt2's vocab.json and merges.txt into hf, converts it to hf-sm: that path, or None
    (the failure reported under label)."""
    for n in ("vocab.json", "merges.txt"):
        os.symlink(os.path.abspath(os.path.join(tiny, n)), os.path.join(hf, n))
    out = hf + "-sm"
    p = run([smbin, "convert", hf, out])
    if p.returncode != 0:
        check(False, label, p.stderr.decode())
        return None
    return out


def test_gpt2(torch, smbin, tmp, tiny, dtype):
    g = torch.Generator().manual_seed(5)
    L, H, C, V, ctx = 2, 4, 64, 50257, 128
    rnd = lambda *s: torch.randn(*s, generator=g) * 0.2
    W = {"wte.weight": rnd(V, C), "wpe.weight": rnd(ctx, C), "ln_f.weight": 1 + rnd(C), "ln_f.bias": rnd(C)}
    for l in range(L):
        p = f"h.{l}."
        W.update({p + "ln_1.weight": 1 + rnd(C), p + "ln_1.bias": rnd(C),
                  p + "attn.c_attn.weight": rnd(C, 3 * C), p + "attn.c_attn.bias": rnd(3 * C),
                  p + "attn.c_proj.weight": rnd(C, C), p + "attn.c_proj.bias": rnd(C),
                  p + "ln_2.weight": 1 + rnd(C), p + "ln_2.bias": rnd(C),
                  p + "mlp.c_fc.weight": rnd(C, 4 * C), p + "mlp.c_fc.bias": rnd(4 * C),
                  p + "mlp.c_proj.weight": rnd(4 * C, C), p + "mlp.c_proj.bias": rnd(C),
                  p + "attn.bias": torch.ones(1, 1, ctx, ctx).tril()})  # a mask buffer: ignored
    W = {k: v.to(dtype) for k, v in W.items()}
    hf = os.path.join(tmp, f"hf-gpt2-{str(dtype)[6:]}")
    os.makedirs(hf)
    # names with the transformer. prefix, and lm_head saved tied (as save_pretrained may)
    st = {("transformer." + k): v for k, v in W.items()}
    st["lm_head.weight"] = W["wte.weight"].clone()
    write_safetensors(os.path.join(hf, "model.safetensors"), st, torch)
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "n_embd": C, "n_layer": L, "n_head": H, "n_positions": ctx,
                   "vocab_size": V, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new",
                   "n_inner": None, "eos_token_id": 50256}, f)
    out = with_gpt2_tokenizer_converted(smbin, tiny, hf, f"convert HF GPT-2 ({dtype})")
    if not out:
        return
    text = "The quick brown fox jumps over the lazy dog. Über naïve café 123!"
    Wd = {k: v.double() for k, v in W.items()}
    if not score_vs_torch(torch, smbin, out, text, lambda ids: gpt2_reference(torch, Wd, ids, L, H, 1e-5),
                          f"HF GPT-2 ({str(dtype)[6:]} safetensors)"):
        return
    in_place(smbin, hf, out, text, f"HF GPT-2 ({str(dtype)[6:]})")
    if dtype != torch.float32:
        keep_16bit(torch, smbin, hf, out, DTYPES[dtype], text, [EXACT])


DTYPES = {}  # torch dtype -> --dtype name, filled in main


def in_place(smbin, hf, converted, text, label):
    """-m on the Hugging Face directory itself scores the text byte for byte as its f32
    conversion does (16-bit weights widen exactly; transposed and permuted tensors are
    made once at load), and info says how many bytes were made."""
    a = run([smbin, "score", "-m", hf, "--json", "--kernels", EXACT, "-f", "-"], text.encode())
    b = run([smbin, "score", "-m", converted, "--json", "--kernels", EXACT, "-f", "-"], text.encode())
    check(a.returncode == 0 and a.stdout == b.stdout, f"{label} run in place = its conversion, byte for byte",
          a.stderr.decode())
    p = run([smbin, "info", "-m", hf])
    check(p.returncode == 0 and b"made at load:" in p.stdout, f"{label} in place: info says the bytes made at load",
          p.stdout.decode()[-300:] + p.stderr.decode())


def write_llama_family_dir(torch, hf, W, model_type, L, H, KVH, C, F, V, ctx, eps, theta, **extra):
    """A Hugging Face Llama-family directory: W as model.safetensors, a tied config.json
    (GPT-2's bos/eos ids, for the tokenizer the tests link beside it)."""
    os.makedirs(hf)
    write_safetensors(os.path.join(hf, "model.safetensors"), W, torch)
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump({"model_type": model_type, "hidden_size": C, "intermediate_size": F, "num_hidden_layers": L,
                   "num_attention_heads": H, "num_key_value_heads": KVH, "max_position_embeddings": ctx,
                   "vocab_size": V, "rms_norm_eps": eps, "rope_theta": theta, "tie_word_embeddings": True,
                   "hidden_act": "silu", "bos_token_id": 50256, "eos_token_id": 50256, **extra}, f)


def test_llama_hf_in_place(torch, smbin, tmp, tiny, dtype):
    """A Llama directory with GPT-2's vocab.json + merges.txt, run in place (Q, K and V as stored,
    rotated by halves) and converted (rows permuted into pairs), both against PyTorch."""
    L, H, KVH, C, F, V, ctx = 2, 4, 2, 32, 64, 50257, 64
    hd = C // H
    W = llama_hf_weights(torch, 11, L, H, KVH, hd, C, F, V, dtype, tied=True)
    hf = os.path.join(tmp, f"hf-llama-gpt2tok-{str(dtype)[6:]}")
    write_llama_family_dir(torch, hf, W, "llama", L, H, KVH, C, F, V, ctx, 1e-5, 10000.0)
    out = with_gpt2_tokenizer_converted(smbin, tiny, hf, f"convert HF Llama with GPT-2's tokenizer ({dtype})")
    if not out:
        return
    text = "Once upon a time, a little dog found a big red ball."
    Wd = {k: v.double() for k, v in W.items()}
    Wd["lm_head.weight"] = Wd["model.embed_tokens.weight"]
    label = f"HF Llama ({str(dtype)[6:]}, tied, GQA 4/2) run in place (Q, K rotated by halves as stored)"
    score_vs_torch(torch, smbin, hf, text, lambda ids: llama_hf_reference(torch, Wd, ids, L, H, KVH, hd, 1e-5,
                                                                          10000.0), label)
    score_vs_torch(torch, smbin, out, text, lambda ids: llama_hf_reference(torch, Wd, ids, L, H, KVH, hd, 1e-5,
                                                                           10000.0), f"HF Llama ({str(dtype)[6:]}) converted (Q, K rows permuted into pairs)")
    p = run([smbin, "info", "-m", hf])
    made = re.search(rb"made at load: (\d+) bytes", p.stdout)
    # f32: every tensor in place; bf16: only the norms, widened to f32 (the model takes f32 vectors)
    want = 0 if dtype == torch.float32 else 4 * C * (2 * L + 1)
    check(made is not None and int(made.group(1)) >= want and int(made.group(1)) < want + 64 * (2 * L + 1),
          f"{label}: info says {made.group(1).decode() if made else '?'} bytes made at load (want {want} + padding)",
          p.stdout.decode()[-400:])


def test_qwen2(torch, smbin, tmp, tiny, dtype):
    """Qwen 2 (issue 19's first family): a Llama with biases on Q, K and V, rope base 1e6, tied
    output, Q and K rotated by halves as Hugging Face stores them. A random Hugging Face directory
    run in place, and a GGUF file (llama.cpp's qwen2 layout: the same tensors under GGUF's names,
    unpermuted) written from the same weights, against PyTorch."""
    L, H, KVH, C, F, V, ctx = 2, 4, 2, 32, 64, 50257, 64
    hd = C // H
    W = llama_hf_weights(torch, 13, L, H, KVH, hd, C, F, V, dtype, tied=True)
    g = torch.Generator().manual_seed(14)
    for l in range(L):
        for n, r in (("q", H * hd), ("k", KVH * hd), ("v", KVH * hd)):
            W[f"model.layers.{l}.self_attn.{n}_proj.bias"] = (torch.randn(r, generator=g) * 0.3).to(dtype)
    hf = os.path.join(tmp, f"hf-qwen2-{str(dtype)[6:]}")
    write_llama_family_dir(torch, hf, W, "qwen2", L, H, KVH, C, F, V, ctx, 1e-6, 1000000.0,
                           use_sliding_window=False)
    for n in ("vocab.json", "merges.txt"):
        os.symlink(os.path.abspath(os.path.join(tiny, n)), os.path.join(hf, n))
    text = "Once upon a time, a little dog found a big red ball."
    Wd = {k: v.double() for k, v in W.items()}
    Wd["lm_head.weight"] = Wd["model.embed_tokens.weight"]
    ref = lambda ids: llama_hf_reference(torch, Wd, ids, L, H, KVH, hd, 1e-6, 1000000.0)
    score_vs_torch(torch, smbin, hf, text, ref, f"HF Qwen 2 ({str(dtype)[6:]}, Q/K/V biases, tied) run in place")
    greedy_vs_torch(torch, smbin, hf, ref, f"HF Qwen 2 ({str(dtype)[6:]}) run in place")
    p = run([smbin, "convert", hf, hf + "-sm"])
    check(p.returncode == 1 and b"does not convert to a smallmind directory yet" in p.stderr,
          "HF Qwen 2 convert: refused by name (it runs in place)", p.stderr.decode())
    qtok = os.path.join(os.path.dirname(tiny), "tokenizers", "qwen2_5", "tokenizer.json")
    if os.path.exists(qtok):  # its real tokenizer.json beside vocab.json: GPT-2's pattern is not Qwen's
        os.symlink(os.path.abspath(qtok), os.path.join(hf, "tokenizer.json"))
        p = run([smbin, "generate", "-m", hf, "-p", "x", "-n", "1"])
        check(p.returncode == 1 and b"tokenizer.json: 151665 tokens" in p.stderr and p.stderr.count(b"\n") == 1,
              "HF Qwen 2 with Qwen 2.5's tokenizer.json beside vocab.json: tokenizer.json is the one read "
              "(refused here, naming it: 151,665 tokens for 50,257 rows), not GPT-2's pattern", p.stderr.decode())
        os.unlink(os.path.join(hf, "tokenizer.json"))
    gguf_family(torch, smbin, W, tiny, "qwen2", hf + ".gguf", L, H, KVH, C, F, ctx, 1e-6, 1000000.0, text, ref,
                f"GGUF qwen2 ({str(dtype)[6:]}) in place")


def greedy_vs_torch(torch, smbin, model, ref, label, n=24, seen=None, reps=3):
    """Cached decoding: `score --ubatch-size 1` (each token one forward call through the KV-cache,
    the matrix-vector path generation takes; with reps 7, 104 tokens, past a windowed layer's
    64-position ring; else 45, within the small models' context of 64) gives every
    log-probability within TOL of the reference, and `generate --temp 0` continues a prompt with the
    reference's greedy choice at every step (the reference recomputes the whole text, or its last
    `seen` tokens)."""
    text = " ".join(["The little dog ran to the big red ball, and it was happy."] * reps)
    score_vs_torch(torch, smbin, model, text, ref, f"{label}, decoded token by token", extra=["--ubatch-size", "1"])
    prompt = "Once upon a time"
    ids = [int(x) for x in run([smbin, "tokenize", "-m", model, "-p", prompt]).stdout.split()]
    start = len(ids)
    while len(ids) < start + n and (len(ids) == start or ids[-1] != 50256):
        ids.append(int(ref(torch.tensor(ids[-seen:] if seen else ids))[-1].argmax()))
    gen = [i for i in ids[start:] if i != 50256]
    want = run([smbin, "detokenize", "-m", model] + [str(i) for i in gen]).stdout.rstrip(b"\n")
    p = run([smbin, "generate", "-m", model, "-p", prompt, "-n", str(n), "--temp", "0", "--kernels", EXACT])
    got = p.stdout.rstrip(b"\n")
    check(p.returncode == 0 and got == want, f"{label}: greedy decoding of {len(ids) - start} tokens = the "
          "reference's choices", f"{got[:80]!r} vs {want[:80]!r} {p.stderr.decode()[-200:]}")


def gguf_family(torch, smbin, W, tiny, arch, gpath, L, H, KVH, C, F, ctx, eps, theta, text, ref, label,
                meta=(), extra=(), pre="gpt-2", added=(), reps=3):
    """W (Hugging Face names) written as a GGUF file of llama.cpp's layout for arch (Q and K rows
    permuted into rotary pairs for llama, as its converter does; as stored for qwen2/qwen3), with
    tiny-gpt2's tokenizer and extra tensors (GGUF names), scored against ref."""
    sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
    import make_gguf as mg
    with open(os.path.join(tiny, "vocab.json"), encoding="utf-8") as f:
        enc = json.load(f)
    toks = [None] * len(enc)
    for t, i in enc.items():
        toks[i] = t
    with open(os.path.join(tiny, "merges.txt"), encoding="utf-8") as f:
        merges = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#version")]
    types = [1] * len(toks) + [3] * len(added)  # added: special (control) tokens after the vocabulary
    toks += list(added)
    md = [("general.architecture", mg.STR, arch), (f"{arch}.context_length", mg.U32, ctx),
          (f"{arch}.embedding_length", mg.U32, C), (f"{arch}.feed_forward_length", mg.U32, F),
          (f"{arch}.block_count", mg.U32, L), (f"{arch}.attention.head_count", mg.U32, H),
          (f"{arch}.attention.head_count_kv", mg.U32, KVH), (f"{arch}.rope.freq_base", mg.F32, theta),
          (f"{arch}.attention.layer_norm_rms_epsilon", mg.F32, eps), ("tokenizer.ggml.model", mg.STR, "gpt2"),
          ("tokenizer.ggml.pre", mg.STR, pre), ("tokenizer.ggml.tokens", mg.ARR, (mg.STR, toks)),
          ("tokenizer.ggml.token_type", mg.ARR, (mg.I32, types)),
          ("tokenizer.ggml.merges", mg.ARR, (mg.STR, merges)),
          ("tokenizer.ggml.bos_token_id", mg.U32, 50256), ("tokenizer.ggml.eos_token_id", mg.U32, 50256)]
    md += list(meta)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
           "self_attn.o_proj.weight": "attn_output.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
           "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
           "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
           # phi3: fused as llama.cpp keeps them (gate | up under ffn_up)
           "self_attn.qkv_proj.weight": "attn_qkv.weight", "mlp.gate_up_proj.weight": "ffn_up.weight"}
    for n in "qkv":
        per[f"self_attn.{n}_proj.weight"] = f"attn_{n}.weight"
        per[f"self_attn.{n}_proj.bias"] = f"attn_{n}.bias"
    if arch == "gemma3":  # its norms around attention and the MLP, stored as 1 + w (llama.cpp's converter)
        per.update({"post_attention_layernorm.weight": "post_attention_norm.weight",
                    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
                    "post_feedforward_layernorm.weight": "post_ffw_norm.weight"})
        W = {k: (v.float() + 1 if k.endswith("norm.weight") else v) for k, v in W.items()}
    tensors = []
    gtype = {torch.float32: 0, torch.bfloat16: 30, torch.float16: 1}
    for k, v in list(W.items()) + list(extra):
        if arch == "llama" and k.endswith(("q_proj.weight", "k_proj.weight")):  # llama.cpp's permute:
            n = H if k.endswith("q_proj.weight") else KVH                      # halves -> pairs
            v = v.reshape(n, 2, v.shape[0] // n // 2, v.shape[1]).swapaxes(1, 2).reshape(v.shape)
        if k in names:
            gn = names[k]
        elif k.startswith("model.layers."):
            l, rest = k.split(".")[2], ".".join(k.split(".")[3:])
            gn = f"blk.{l}.{per[rest]}"
        else:
            gn = k  # already GGUF's name (rope_freqs.weight)
        vec = v.dim() == 1
        t = v.float() if vec else v  # vectors f32, as llama.cpp writes them
        raw = (t.contiguous().view(torch.int16) if t.dtype != torch.float32 else t.contiguous()).numpy().tobytes()
        tensors.append({"name": gn, "dims": tuple(t.shape[::-1]), "type": 0 if vec else gtype[t.dtype], "data": raw})
    with open(gpath, "wb") as f:
        f.write(mg.Model(md, tensors).bytes())
    score_vs_torch(torch, smbin, gpath, text, ref, label)
    greedy_vs_torch(torch, smbin, gpath, ref, label, reps=reps)


def llama3_scaled_inv(torch, hd, theta, factor, low, high, octx):
    """Llama 3.1's rope_scaling (rope_type llama3), from Meta's description: wavelengths shorter than
    octx / high kept, longer than octx / low divided by factor, between them blended."""
    import math
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    out = []
    for f in inv.tolist():
        wave = 2 * math.pi / f
        if wave < octx / high:
            out.append(f)
        elif wave > octx / low:
            out.append(f / factor)
        else:
            sm = (octx / wave - low) / (high - low)
            out.append((1 - sm) * f / factor + sm * f)
    return torch.tensor(out, dtype=torch.float64)


def prefix_cache_window(smbin, model, text, label):
    """--batch records sharing prefixes of up to ~700 tokens on a sliding-window model: its
    rings (576 positions for forward calls of 512) wrap, cached blocks that a ring had lost
    are never used, and every record equals the run without the cache."""
    words = (text + " " + text).split(" ")
    recs = []
    for k in (700, 640, 600, 560, 420, 300, 260, 120, 60, 40):  # the longest first: its ring
        for tail in ("", " and then", " a cat"):                # loses its first blocks
            recs.append(" ".join(words[:k]) + tail)
    path = model + "-prefix.jsonl"
    with open(path, "w") as f:
        for r in recs:
            f.write(json.dumps({"prompt": r}) + "\n")
    out = []
    for flags in (["--cache-ram", "0", "--parallel", "1"], ["--parallel", "4"], ["--parallel", "2", "-t", "1"]):
        p = subprocess.run([smbin, "generate", "-m", model, "--batch", path, "-n", "8", "--temp", "0", *flags],
                           capture_output=True)
        out.append([json.loads(x) for x in p.stdout.splitlines()] if p.returncode == 0 else [])
    ok = all(len(o) == len(recs) for o in out)
    same = ok and all([r["text"] for r in o] == [r["text"] for r in out[0]] for o in out[1:])
    served = sum(r["tokens_cached"] for o in out[1:] for r in o) if ok else 0
    check(same and served > 0, f"{label}: --batch records sharing prefixes through wrapped sliding-window "
          f"rings equal the uncached run ({served} prompt tokens from the cache)",
          str([len(o) for o in out]))


def test_mistral_phi3(torch, smbin, tmp, tiny, dtype):
    """Mistral (a Llama with sliding_window) and Phi-3 (Q, K, V in one qkv_proj, gate and up in one
    gate_up_proj, sliding_window, untied): random Hugging Face directories run in place against
    PyTorch with the window's mask. The text is 300+ tokens over a window of 16 and a context of
    1024, so score's 128-row calls write into a ring of 192 positions per windowed layer and wrap
    it; generate's (576 positions) wraps in a 696-token greedy continuation checked step by step;
    info shows the smaller cache."""
    sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
    import make_gguf as mg
    L, H, KVH, C, F, V, ctx, win = 2, 4, 2, 32, 64, 50257, 1024, 16
    hd, tag = C // H, str(dtype)[6:]
    text = " ".join(["Once upon a time, a little dog found a big red ball in the park."] * 22)
    for fam, seed in (("mistral", 31), ("phi3", 33)):
        W = llama_hf_weights(torch, seed, L, H, KVH, hd, C, F, V, dtype, tied=fam == "mistral")
        Wd = {k: v.double() for k, v in W.items()}
        if fam == "phi3":  # the same weights fused as Phi-3 stores them
            for l in range(L):
                p = f"model.layers.{l}."
                W[p + "self_attn.qkv_proj.weight"] = torch.cat([W.pop(p + f"self_attn.{n}_proj.weight") for n in "qkv"])
                W[p + "mlp.gate_up_proj.weight"] = torch.cat([W.pop(p + f"mlp.{n}_proj.weight") for n in ("gate", "up")])
        else:
            Wd["lm_head.weight"] = Wd["model.embed_tokens.weight"]
        hf = os.path.join(tmp, f"hf-{fam}-{tag}")
        write_llama_family_dir(torch, hf, W, fam, L, H, KVH, C, F, V, ctx, 1e-5, 10000.0, sliding_window=win,
                               tie_word_embeddings=fam == "mistral", rope_scaling=None)
        for n in ("vocab.json", "merges.txt"):
            os.symlink(os.path.abspath(os.path.join(tiny, n)), os.path.join(hf, n))
        ref = lambda ids, Wd=Wd: llama_hf_reference(torch, Wd, ids, L, H, KVH, hd, 1e-5, 10000.0, window=win)
        score_vs_torch(torch, smbin, hf, text, ref, f"HF {fam} ({tag}, sliding window {win}, "
                       f"{'fused qkv_proj and gate_up_proj, untied' if fam == 'phi3' else 'tied'}) run in place, "
                       "300+ tokens through a ring cache")
        greedy_vs_torch(torch, smbin, hf, ref, f"HF {fam} ({tag}) run in place", reps=7)
        if fam == "mistral":
            prefix_cache_window(smbin, hf, text, f"HF mistral ({tag}, sliding window {win})")
        if fam == "phi3":  # llama.cpp's phi3 GGUF: attn_qkv and ffn_up (gate | up) fused, window in metadata
            gguf_family(torch, smbin, W, tiny, "phi3", hf + ".gguf", L, H, KVH, C, F, ctx, 1e-5, 10000.0, text,
                        ref, f"GGUF phi3 ({tag}, fused attn_qkv and ffn_up, sliding window) in place",
                        meta=[("phi3.attention.sliding_window", mg.U32, win)], reps=7)
    # Phi-3.5 / the 128k Phi-3 variants scale RoPE with longrope; Phi-4-mini rotates part of a head
    cfgp = os.path.join(hf, "config.json")
    with open(cfgp) as f:
        hc = json.load(f)
    for key, val, want in (("rope_scaling", {"type": "longrope", "short_factor": [1.0] * (hd // 2),
                                             "long_factor": [1.0] * (hd // 2)}, 'rope_scaling type "longrope"'),
                           ("partial_rotary_factor", 0.75, "partial_rotary_factor 0.75 is not supported")):
        with open(cfgp, "w") as f:
            json.dump(dict(hc, **{key: val}), f)
        p = run([smbin, "generate", "-m", hf, "-p", "x", "-n", "1"])
        check(p.returncode == 1 and want.encode() in p.stderr and p.stderr.count(b"\n") == 1,
              f"HF phi3 with {key}: refused by name", p.stderr.decode())
    with open(cfgp, "w") as f:
        json.dump(hc, f)
    # the cache of a windowed layer holds its window plus a call's rows (512 for info), not the context
    kvb = lambda d: int(re.search(rb"kv-cache +(\d+) bytes", run([smbin, "info", "-m", d]).stdout).group(1))
    full = 2 * L * KVH * hd * ctx * 4
    got = kvb(hf)
    check(abs(got - 2 * L * KVH * hd * 576 * 4) < 4096,
          f"HF {fam}: info's KV-cache is {got} bytes: 576 positions a layer (window 16 + 511 rows, padded), "
          f"not the context's {full}")
    # greedy decoding past the ring's wrap (576 positions) = the reference's greedy choice at every
    # step; the reference takes the last 2 (window - 1) + 1 tokens, all a 2-layer windowed model sees
    # (RoPE is relative)
    prompt = "Once upon a time"
    ids = [int(x) for x in run([smbin, "tokenize", "-m", hf, "-p", prompt]).stdout.split()]
    seen = 2 * (win - 1) + 1
    while len(ids) < 700:
        ids.append(int(ref(torch.tensor(ids[-seen:]))[-1].argmax()))
    want = run([smbin, "detokenize", "-m", hf] + [str(i) for i in ids]).stdout
    p = run([smbin, "generate", "-m", hf, "-p", prompt, "-n", str(700 - 4), "--temp", "0"])
    got = prompt.encode() + p.stdout
    same = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
    check(p.returncode == 0 and got.rstrip(b"\n") == want.rstrip(b"\n"),
          f"HF {fam}: greedy generate of 696 tokens (the ring wraps at 576) = the reference's greedy choices",
          f"first difference at byte {same} of {len(want)}: {got[same:same + 40]!r} vs {want[same:same + 40]!r} "
          + p.stderr.decode()[-200:])


def gemma3_reference(torch, W, ids, L, H, KVH, hd, eps, theta, local, win, pat, qscalar):
    """Gemma 3's text model from its description: embeddings times sqrt(hidden); RMSNorm gains
    1 + w; norms before and after attention and the MLP; per-head Q/K norms before RoPE (halves);
    scores times query_pre_attn_scalar^-1/2; a window of win keys and rope base `local` on all layers
    but each pat-th (those: full attention, base theta); GELU(tanh)-gated MLP; tied output."""
    E = W["model.embed_tokens.weight"]
    T, C = len(ids), E.shape[1]
    x = E[ids] * C ** 0.5
    nrm = lambda t, w: t * torch.rsqrt((t * t).mean(-1, keepdim=True) + eps) * (1 + w)
    rot = lambda t: torch.cat([-t[..., hd // 2:], t[..., : hd // 2]], -1)
    for l in range(L):
        p = f"model.layers.{l}."
        sliding = (l + 1) % pat != 0
        inv = 1.0 / ((local if sliding else theta) ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
        cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
        mask = torch.full((T, T), float("-inf")).triu(1).double()
        if sliding:
            mask = mask + torch.full((T, T), float("-inf")).tril(-win).double()
        h = nrm(x, W[p + "input_layernorm.weight"])
        q = (h @ W[p + "self_attn.q_proj.weight"].T).view(T, H, hd).transpose(0, 1)
        k = (h @ W[p + "self_attn.k_proj.weight"].T).view(T, KVH, hd).transpose(0, 1)
        v = (h @ W[p + "self_attn.v_proj.weight"].T).view(T, KVH, hd).transpose(0, 1)
        q, k = nrm(q, W[p + "self_attn.q_norm.weight"]), nrm(k, W[p + "self_attn.k_norm.weight"])
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        k, v = k.repeat_interleave(H // KVH, 0), v.repeat_interleave(H // KVH, 0)
        a = torch.softmax(q @ k.transpose(1, 2) * qscalar ** -0.5 + mask, -1) @ v
        o = a.transpose(0, 1).reshape(T, H * hd) @ W[p + "self_attn.o_proj.weight"].T
        x = x + nrm(o, W[p + "post_attention_layernorm.weight"])
        h = nrm(x, W[p + "pre_feedforward_layernorm.weight"])
        g = torch.nn.functional.gelu(h @ W[p + "mlp.gate_proj.weight"].T, approximate="tanh")
        m = (g * (h @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
        x = x + nrm(m, W[p + "post_feedforward_layernorm.weight"])
    return nrm(x, W["model.norm.weight"]) @ E.T


def test_gemma3(torch, smbin, tmp, tiny, dtype):
    """Gemma 3 (text): a random gemma3_text Hugging Face directory run in place (norm gains made
    1 + w at load) and the same weights as llama.cpp's gemma3 GGUF (gains stored 1 + w, pattern 6
    and local base 10000 fixed, scale head_dim^-1/2), against PyTorch over 370 tokens: windowed
    layers go through a ring cache; 6 layers, the last one global."""
    sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
    import make_gguf as mg
    L, H, KVH, hd, C, F, V, ctx, win = 6, 4, 1, 16, 32, 64, 50257, 1024, 16
    tag = str(dtype)[6:]
    text = " ".join(["Once upon a time, a little dog found a big red ball in the park."] * 22)
    g = torch.Generator().manual_seed(41)
    rnd = lambda *sh: torch.randn(*sh, generator=g) * 0.3
    W = {"model.embed_tokens.weight": rnd(V, C), "model.norm.weight": rnd(C)}
    for l in range(L):
        p = f"model.layers.{l}."
        W.update({p + n: rnd(C) for n in ("input_layernorm.weight", "post_attention_layernorm.weight",
                                           "pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight")})
        W.update({p + "self_attn.q_norm.weight": rnd(hd), p + "self_attn.k_norm.weight": rnd(hd),
                  p + "self_attn.q_proj.weight": rnd(H * hd, C), p + "self_attn.k_proj.weight": rnd(KVH * hd, C),
                  p + "self_attn.v_proj.weight": rnd(KVH * hd, C), p + "self_attn.o_proj.weight": rnd(C, H * hd),
                  p + "mlp.gate_proj.weight": rnd(F, C), p + "mlp.up_proj.weight": rnd(F, C),
                  p + "mlp.down_proj.weight": rnd(C, F)})
    W = {k: v.to(dtype) for k, v in W.items()}
    Wd = {k: v.double() for k, v in W.items()}
    hf = os.path.join(tmp, f"hf-gemma3-{tag}")
    os.makedirs(hf)
    write_safetensors(os.path.join(hf, "model.safetensors"), W, torch)
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump({"model_type": "gemma3_text", "hidden_size": C, "intermediate_size": F, "num_hidden_layers": L,
                   "num_attention_heads": H, "num_key_value_heads": KVH, "head_dim": hd,
                   "max_position_embeddings": ctx, "vocab_size": V, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
                   "rope_local_base_freq": 10000.0, "sliding_window": win, "sliding_window_pattern": 6,
                   "query_pre_attn_scalar": 24, "hidden_activation": "gelu_pytorch_tanh", "rope_scaling": None,
                   "final_logit_softcapping": None, "attn_logit_softcapping": None,
                   "bos_token_id": 50256, "eos_token_id": 50256}, f)
    for n in ("vocab.json", "merges.txt"):
        os.symlink(os.path.abspath(os.path.join(tiny, n)), os.path.join(hf, n))
    ref = lambda qs: lambda ids: gemma3_reference(torch, Wd, ids, L, H, KVH, hd, 1e-6, 1000000.0, 10000.0, win, 6, qs)
    score_vs_torch(torch, smbin, hf, text, ref(24), f"HF Gemma 3 ({tag}, 5 windowed layers + 1 global, Q/K "
                   "norms, post norms, GELU gate, query_pre_attn_scalar 24) run in place")
    greedy_vs_torch(torch, smbin, hf, ref(24), f"HF Gemma 3 ({tag}) run in place", reps=7)
    gguf_family(torch, smbin, W, tiny, "gemma3", hf + ".gguf", L, H, KVH, C, F, ctx, 1e-6, 1000000.0, text, ref(hd),
                f"GGUF gemma3 ({tag}) in place", meta=[("gemma3.attention.key_length", mg.U32, hd),
                                                      ("gemma3.attention.value_length", mg.U32, hd),
                                                      ("gemma3.attention.sliding_window", mg.U32, win)],
                reps=7)
    cfgp = os.path.join(hf, "config.json")
    with open(cfgp) as f:
        hc = json.load(f)
    for key, val, want in (("final_logit_softcapping", 30.0, "final_logit_softcapping is not supported"),
                           ("model_type", "gemma3", "with a vision tower")):
        bad = dict(hc, **{key: val})
        with open(cfgp, "w") as f:
            json.dump(bad, f)
        p = run([smbin, "generate", "-m", hf, "-p", "x", "-n", "1"])
        check(p.returncode == 1 and want.encode() in p.stderr and p.stderr.count(b"\n") == 1,
              f"HF Gemma 3 with {key} {val!r}: refused by name", p.stderr.decode())
    with open(cfgp, "w") as f:
        json.dump(hc, f)


def test_smollm2(torch, smbin, tmp, tiny, dtype):
    """SmolLM2: the Llama architecture (tied, GQA 3/1, rope base 100000) with its tokenizer.json
    (digits one by one before GPT-2's ByteLevel, chat tokens added; built on tiny-gpt2's vocabulary
    as tests/test_tokenizers.py does), run in place; and as a GGUF llama file with
    tokenizer.ggml.pre smollm. Both against PyTorch, and both tokenize digits as transformers.js."""
    L, H, KVH, C, F, V, ctx, theta = 2, 3, 1, 24, 64, 50259, 64, 100000.0
    hd, tag = C // H, str(dtype)[6:]
    W = llama_hf_weights(torch, 51, L, H, KVH, hd, C, F, V, dtype, tied=True)
    hf = os.path.join(tmp, f"hf-smollm2-{tag}")
    write_llama_family_dir(torch, hf, W, "llama", L, H, KVH, C, F, V, ctx, 1e-5, theta)
    with open(os.path.join(tiny, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    tj["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    chat = ["<|im_start|>", "<|im_end|>"]
    for i, c in enumerate(chat):
        tj["added_tokens"].append({"id": 50257 + i, "content": c, "single_word": False, "lstrip": False,
                                   "rstrip": False, "normalized": False, "special": True})
    with open(os.path.join(hf, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    text = "In 2024, 1,234 dogs found 56 red balls; 7 of them were 12.5 cm wide."
    Wd = {k: v.double() for k, v in W.items()}
    Wd["lm_head.weight"] = Wd["model.embed_tokens.weight"]
    ref = lambda ids: llama_hf_reference(torch, Wd, ids, L, H, KVH, hd, 1e-5, theta)
    score_vs_torch(torch, smbin, hf, text, ref, f"HF SmolLM2 ({tag}, its tokenizer.json, tied, GQA 3/1) run in place")
    greedy_vs_torch(torch, smbin, hf, ref, f"HF SmolLM2 ({tag}) run in place")
    gguf_family(torch, smbin, W, tiny, "llama", hf + ".gguf", L, H, KVH, C, F, ctx, 1e-5, theta, text, ref,
                f"GGUF llama with tokenizer.ggml.pre smollm ({tag}) in place", pre="smollm", added=chat)
    want = [87, 16, 17, 220, 24, 24, 88]  # transformers.js (tests/fixtures/hf_tokenizer_reference.json)
    for m in (hf, hf + ".gguf"):
        got = run([smbin, "tokenize", "-m", m, "-p", "x12 99y"]).stdout.split()
        check([int(x) for x in got] == want, f"SmolLM2 {'GGUF' if m.endswith('.gguf') else 'tokenizer.json'}: "
              f"\"x12 99y\" is {want} (digits one by one), as transformers.js says", str(got))


def test_llama3_qwen3(torch, smbin, tmp, tiny, dtype):
    """Llama 3.x (rope_scaling llama3, an eos_token_id list, tied) and Qwen 3 (RMSNorm over each head
    of Q and K before RoPE, head_dim not hidden / heads, rope base 1e6): random Hugging Face directories
    run in place and GGUF files from the same weights (llama: rope_freqs.weight holding the factors, as
    llama.cpp's converter writes them; qwen3: attn_q_norm / attn_k_norm), against PyTorch."""
    sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
    import make_gguf as mg
    L, H, KVH, C, F, V, ctx = 2, 4, 2, 32, 64, 50257, 64
    text = "Once upon a time, a little dog found a big red ball."
    tag = str(dtype)[6:]
    # Llama 3: head 8 so the four frequencies fall in all three bands of the scaling
    hd, theta, sc = C // H, 500000.0, dict(factor=8.0, low=1.0, high=4.0, octx=8192)
    W = llama_hf_weights(torch, 21, L, H, KVH, hd, C, F, V, dtype, tied=True)
    hf = os.path.join(tmp, f"hf-llama3-{tag}")
    write_llama_family_dir(torch, hf, W, "llama", L, H, KVH, C, F, V, ctx, 1e-5, theta,
                           eos_token_id=[50256, 13, 11],
                           rope_scaling={"rope_type": "llama3", "factor": sc["factor"], "low_freq_factor": sc["low"],
                                         "high_freq_factor": sc["high"],
                                         "original_max_position_embeddings": sc["octx"]})
    for n in ("vocab.json", "merges.txt"):
        os.symlink(os.path.abspath(os.path.join(tiny, n)), os.path.join(hf, n))
    Wd = {k: v.double() for k, v in W.items()}
    Wd["lm_head.weight"] = Wd["model.embed_tokens.weight"]
    inv = llama3_scaled_inv(torch, hd, theta, **sc)
    ref = lambda ids: llama_hf_reference(torch, Wd, ids, L, H, KVH, hd, 1e-5, theta, inv=inv)
    score_vs_torch(torch, smbin, hf, text, ref, f"HF Llama 3 ({tag}, rope_scaling llama3, tied) run in place")
    greedy_vs_torch(torch, smbin, hf, ref, f"HF Llama 3 ({tag}) run in place")
    # generation stops at any id of the eos list: with the reference's greedy next token in it
    # (not first), greedy generate ends at once
    toks, _ = score(smbin, hf, text)
    if toks:
        nxt = int(ref(torch.tensor([t["id"] for t in toks]))[-1].argmax())
        with open(os.path.join(hf, "config.json")) as f:
            hc = json.load(f)
        for eos, want in (([50256], "length"), ([50256, 7, nxt], "eos")):
            hc["eos_token_id"] = eos
            with open(os.path.join(hf, "config.json"), "w") as f:
                json.dump(hc, f)
            p = run([smbin, "generate", "-m", hf, "-p", text, "-n", "3", "--temp", "0", "--json"])
            j = json.loads(p.stdout) if p.returncode == 0 else {}
            check(j.get("finish_reason") == want and j.get("tokens_generated") == (3 if want == "length" else 0),
                  f"HF Llama 3: eos_token_id {eos} (greedy next {nxt}): finish {want}",
                  p.stdout.decode()[:200] + p.stderr.decode())
    base = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    factors = (base / inv).float()  # llama.cpp's rope_freqs.weight: frequencies divided by these
    gguf_family(torch, smbin, W, tiny, "llama", hf + ".gguf", L, H, KVH, C, F, ctx, 1e-5, theta, text, ref,
                f"GGUF llama ({tag}) with rope_freqs.weight (Llama 3.1's scaling) in place",
                extra=[("rope_freqs.weight", factors)])
    # Qwen 3: head_dim 16 with hidden 32 and 4 heads (Q is 64 wide)
    hd = 16
    W = llama_hf_weights(torch, 23, L, H, KVH, hd, C, F, V, dtype, tied=True)
    g = torch.Generator().manual_seed(24)
    for l in range(L):
        for n in "qk":
            W[f"model.layers.{l}.self_attn.{n}_norm.weight"] = (1 + torch.randn(hd, generator=g) * 0.3).to(dtype)
    hf = os.path.join(tmp, f"hf-qwen3-{tag}")
    write_llama_family_dir(torch, hf, W, "qwen3", L, H, KVH, C, F, V, ctx, 1e-6, 1000000.0, head_dim=hd,
                           use_sliding_window=False, attention_bias=False)
    for n in ("vocab.json", "merges.txt"):
        os.symlink(os.path.abspath(os.path.join(tiny, n)), os.path.join(hf, n))
    Wd = {k: v.double() for k, v in W.items()}
    Wd["lm_head.weight"] = Wd["model.embed_tokens.weight"]
    ref = lambda ids: llama_hf_reference(torch, Wd, ids, L, H, KVH, hd, 1e-6, 1000000.0)
    score_vs_torch(torch, smbin, hf, text, ref, f"HF Qwen 3 ({tag}, Q/K norms, head_dim 16 x 4 heads over "
                   "hidden 32, tied) run in place")
    greedy_vs_torch(torch, smbin, hf, ref, f"HF Qwen 3 ({tag}) run in place")
    gguf_family(torch, smbin, W, tiny, "qwen3", hf + ".gguf", L, H, KVH, C, F, ctx, 1e-6, 1000000.0, text, ref,
                f"GGUF qwen3 ({tag}) in place", meta=[("qwen3.attention.key_length", mg.U32, hd),
                                                     ("qwen3.attention.value_length", mg.U32, hd)])


def keep_16bit(torch, smbin, hf, f32_out, name, text, kernels, extra=()):
    """A 16-bit source converted with --dtype keeping it: matrices stored 16-bit
    (vectors f32), model.bin about half the f32 one, and score and greedy
    generate give exactly what the f32 conversion gives (16-bit weights are
    widened exactly, then the same f32 arithmetic runs)."""
    out = f"{hf}-{name}"
    p = run([smbin, "convert", hf, out, "--dtype", name] + list(extra))
    if p.returncode != 0:
        check(False, f"convert {hf} --dtype {name}", p.stderr.decode())
        return
    mats, vecs = matrix_dtypes(out)
    s16, s32 = (os.path.getsize(os.path.join(d, "model.bin")) for d in (out, f32_out))
    check(mats == {name} and vecs <= {"f32"} and s16 < 0.55 * s32,
          f"{os.path.basename(hf)} --dtype {name}: matrices {name}, vectors f32, model.bin {s16} vs {s32} bytes",
          f"{mats} {vecs}")
    for kern in kernels:
        a, b = score(smbin, out, text, kern)[0], score(smbin, f32_out, text, kern)[0]
        check(a is not None and a == b, f"{os.path.basename(hf)} --dtype {name} ({kern} kernels): score's "
              f"{len(b or [])} log-probs are bit-identical to the f32 conversion's")
        gens = [run([smbin, "generate", "-m", d, "-p", text[:20], "-n", "24", "--temp", "0",
                     "--kernels", kern]).stdout for d in (out, f32_out)]
        check(gens[0] and gens[0] == gens[1], f"{os.path.basename(hf)} --dtype {name} ({kern} kernels): greedy "
              "generate (matrix-vector path) is identical to the f32 conversion's", repr(gens))


# ---------------------------------------------------------------- Llama

def rms(torch, x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def llama_hf_reference(torch, W, ids, L, H, KVH, hd, eps, theta, inv=None, window=0, lin=None):
    """Hugging Face's Llama: rotate_half on q/k as stored by HF; inv: the rotary frequencies
    (rope_scaling), else theta's; Qwen 3's q_norm / k_norm over each head when W has them.
    lin(x, w): a linear layer's product (x @ w.T by default)."""
    lin = lin or (lambda x, w: x @ w.T)
    x = W["model.embed_tokens.weight"][ids]
    T = len(ids)
    if inv is None:
        inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    rot = lambda t: torch.cat([-t[..., hd // 2:], t[..., : hd // 2]], -1)
    mask = torch.full((T, T), float("-inf")).triu(1).double()
    if window:  # sliding window: query i sees keys i - window + 1 .. i
        mask = mask + torch.full((T, T), float("-inf")).tril(-window).double()
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms(torch, x, W[p + "input_layernorm.weight"], eps)
        b = lambda n: W.get(p + f"self_attn.{n}_proj.bias", 0.0)  # Qwen 2's Q, K, V biases
        q = (lin(h, W[p + "self_attn.q_proj.weight"]) + b("q")).view(T, H, hd).transpose(0, 1)
        k = (lin(h, W[p + "self_attn.k_proj.weight"]) + b("k")).view(T, KVH, hd).transpose(0, 1)
        v = (lin(h, W[p + "self_attn.v_proj.weight"]) + b("v")).view(T, KVH, hd).transpose(0, 1)
        if p + "self_attn.q_norm.weight" in W:
            q, k = rms(torch, q, W[p + "self_attn.q_norm.weight"], eps), rms(torch, k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        k, v = k.repeat_interleave(H // KVH, 0), v.repeat_interleave(H // KVH, 0)
        a = torch.softmax(q @ k.transpose(1, 2) / hd ** 0.5 + mask, -1) @ v
        x = x + lin(a.transpose(0, 1).reshape(T, H * hd), W[p + "self_attn.o_proj.weight"])
        h = rms(torch, x, W[p + "post_attention_layernorm.weight"], eps)
        g = lin(h, W[p + "mlp.gate_proj.weight"])
        x = x + lin(torch.nn.functional.silu(g) * lin(h, W[p + "mlp.up_proj.weight"]), W[p + "mlp.down_proj.weight"])
    x = rms(torch, x, W["model.norm.weight"], eps)
    return lin(x, W["lm_head.weight"])


def llama_hf_weights(torch, seed, L, H, KVH, hd, C, F, V, dtype, tied):
    """Random Hugging Face Llama tensors (N(0, 0.3^2), norms 1 + that) under HF's names, as dtype."""
    g = torch.Generator().manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=g) * 0.3
    W = {"model.embed_tokens.weight": rnd(V, C), "model.norm.weight": 1 + rnd(C)}
    if not tied:
        W["lm_head.weight"] = rnd(V, C)
    for l in range(L):
        p = f"model.layers.{l}."
        W.update({p + "input_layernorm.weight": 1 + rnd(C), p + "post_attention_layernorm.weight": 1 + rnd(C),
                  p + "self_attn.q_proj.weight": rnd(H * hd, C), p + "self_attn.k_proj.weight": rnd(KVH * hd, C),
                  p + "self_attn.v_proj.weight": rnd(KVH * hd, C), p + "self_attn.o_proj.weight": rnd(C, H * hd),
                  p + "mlp.gate_proj.weight": rnd(F, C), p + "mlp.up_proj.weight": rnd(F, C),
                  p + "mlp.down_proj.weight": rnd(C, F)})
    return {k: v.to(dtype) for k, v in W.items()}


def bf16_prefill(torch, smbin, model, text, Wd, L, H, KVH, hd, extra=()):
    """The default kernels on bf16 weights: where `info` says the GEMM runs bf16 on vdpbf16ps
    (AVX512-BF16), a prompt scored in one call (every row through the packed product) is
    PyTorch's forward with each linear layer's input rounded to bf16 (to within f32 rounding:
    a value on the edge of a bf16 rounding step may land on either side), and told apart from
    the unrounded forward; elsewhere the default is the exact widening."""
    info = run([smbin, "info", "-m", model] + list(extra)).stdout.decode()
    on = "bf16: vdpbf16ps" in info  # also in "f16, bf16: vdpbf16ps"
    rnd = lambda x, w: x.to(torch.bfloat16).double() @ w.T
    exact = lambda ids: llama_hf_reference(torch, Wd, ids, L, H, KVH, hd, 1e-5, 500000.0)
    rounded = lambda ids: llama_hf_reference(torch, Wd, ids, L, H, KVH, hd, 1e-5, 500000.0, lin=rnd)
    toks, err = score(smbin, model, text, "auto", extra)
    if toks is None:
        check(False, "score: bf16 weights, default kernels", err)
        return
    ids = torch.tensor([t["id"] for t in toks])
    near, far = compare(torch, (rounded if on else exact)(ids), toks), compare(torch, exact(ids), toks)
    tol = 2e-3 if on else TOL
    check(near <= tol and (not on or far > 5 * tol),
          f"HF Llama (bfloat16), default kernels ({'activations rounded to bf16 on vdpbf16ps' if on else 'exact'}): "
          f"{len(toks) - 1} log-probs = PyTorch{' with rounded inputs' if on else ''}, worst {near:.2e}"
          f"{f' (unrounded: {far:.2e})' if on else ''}")


def test_llama_hf(torch, smbin, tmp, tokbin, dtype):
    L, H, KVH, hd, C, F, V, ctx = 2, 4, 2, 16, 48, 96, 512, 128  # head_dim * heads != hidden
    W = llama_hf_weights(torch, 9, L, H, KVH, hd, C, F, V, dtype, tied=False)
    hf = os.path.join(tmp, f"hf-llama-{str(dtype)[6:]}")
    os.makedirs(hf)
    # two shards with an index, as large checkpoints come
    names = sorted(W)
    half = len(names) // 2
    shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    wm = {}
    for fn, ns in shards.items():
        write_safetensors(os.path.join(hf, fn), {n: W[n] for n in ns}, torch)
        wm.update({n: fn for n in ns})
    with open(os.path.join(hf, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "hidden_size": C, "intermediate_size": F, "num_hidden_layers": L,
                   "num_attention_heads": H, "num_key_value_heads": KVH, "head_dim": hd,
                   "max_position_embeddings": ctx, "vocab_size": V, "rms_norm_eps": 1e-5,
                   "rope_theta": 500000.0, "tie_word_embeddings": False, "hidden_act": "silu",
                   "bos_token_id": 1, "eos_token_id": 2, "rope_scaling": None}, f)
    out = hf + "-sm"
    p = run([smbin, "convert", hf, out, "--tokenizer", tokbin])
    if p.returncode != 0:
        check(False, f"convert HF Llama ({dtype})", p.stderr.decode())
        return
    text = "Once upon a time, a little dog found a big red ball in the park. It was happy."
    Wd = {k: v.double() for k, v in W.items()}
    ref = lambda W2: lambda ids: llama_hf_reference(torch, W2, ids, L, H, KVH, hd, 1e-5, 500000.0)
    for kern in ("scalar", EXACT):
        if not score_vs_torch(torch, smbin, out, text, ref(Wd),
                              f"HF Llama ({str(dtype)[6:]}, 2 shards, GQA 4/2, rotate-halves) {kern} kernels", kern):
            return
    if dtype == torch.bfloat16:
        bf16_prefill(torch, smbin, hf, text, Wd, L, H, KVH, hd, ["--tokenizer", tokbin])
    if dtype != torch.float32:
        keep_16bit(torch, smbin, hf, out, DTYPES[dtype], text, ["scalar", EXACT], ["--tokenizer", tokbin])
        return
    # an f32 source narrowed by --dtype: every stored value is numpy's / torch's rounding of
    # the source (ties to even), and the model scores like PyTorch on the rounded weights
    import numpy as np
    for tdt, name in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        nout = f"{hf}-{name}"
        p = run([smbin, "convert", hf, nout, "--dtype", name, "--tokenizer", tokbin])
        if p.returncode != 0:
            check(False, f"convert HF Llama F32 --dtype {name}", p.stderr.decode())
            continue
        same = True
        for ours, theirs in (("tok_embd", "model.embed_tokens.weight"), ("output.weight", "lm_head.weight"),
                             ("blk.1.ffn_down.weight", "model.layers.1.mlp.down_proj.weight"),
                             ("blk.0.attn_out.weight", "model.layers.0.self_attn.o_proj.weight")):
            got, gdt = model_tensor(nout, ours, np)
            want = W[theirs].to(tdt).contiguous().view(torch.int16).numpy().view(np.uint16)
            same = same and gdt == name and np.array_equal(got.view(np.uint16), want)
        check(same, f"HF Llama F32 --dtype {name}: stored weights are exactly PyTorch's rounding to {name}")
        Wr = {k: (v.to(tdt) if v.dim() == 2 else v).double() for k, v in W.items()}  # vectors stay f32
        score_vs_torch(torch, smbin, nout, text, ref(Wr), f"HF Llama F32 --dtype {name}, on the rounded weights")


def llama2c_reference(torch, W, ids, L, H, KVH, eps):
    """llama2.c's model.py: interleaved pairs rotated as complex numbers."""
    x = W["tok"][ids]
    T, C = x.shape
    hd = C // H
    freqs = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    cis = torch.polar(torch.ones(T, hd // 2, dtype=torch.float64), torch.outer(torch.arange(T, dtype=torch.float64), freqs))
    def rope(t):  # (T, heads, hd)
        c = torch.view_as_complex(t.reshape(*t.shape[:-1], hd // 2, 2).contiguous())
        return torch.view_as_real(c * cis[:, None, :]).flatten(2)
    mask = torch.full((T, T), float("-inf")).triu(1).double()
    for l in range(L):
        h = rms(torch, x, W["att_norm"][l], eps)
        q = rope((h @ W["wq"][l].T).view(T, H, hd)).transpose(0, 1)
        k = rope((h @ W["wk"][l].T).view(T, KVH, hd)).transpose(0, 1)
        v = (h @ W["wv"][l].T).view(T, KVH, hd).transpose(0, 1)
        k, v = k.repeat_interleave(H // KVH, 0), v.repeat_interleave(H // KVH, 0)
        a = torch.softmax(q @ k.transpose(1, 2) / hd ** 0.5 + mask, -1) @ v
        x = x + a.transpose(0, 1).reshape(T, C) @ W["wo"][l].T
        h = rms(torch, x, W["ffn_norm"][l], eps)
        x = x + (torch.nn.functional.silu(h @ W["w1"][l].T) * (h @ W["w3"][l].T)) @ W["w2"][l].T
    return rms(torch, x, W["norm"], eps) @ W["tok"].T


def test_llama2c(torch, smbin, tmp, tokbin):
    g = torch.Generator().manual_seed(3)
    dim, hidden, L, H, KVH, V, ctx = 64, 160, 3, 8, 4, 512, 64
    hd = dim // H
    rnd = lambda *s: torch.randn(*s, generator=g) * 0.3
    W = {"tok": rnd(V, dim), "att_norm": 1 + rnd(L, dim), "wq": rnd(L, dim, dim), "wk": rnd(L, KVH * hd, dim),
         "wv": rnd(L, KVH * hd, dim), "wo": rnd(L, dim, dim), "ffn_norm": 1 + rnd(L, dim),
         "w1": rnd(L, hidden, dim), "w2": rnd(L, dim, hidden), "w3": rnd(L, hidden, dim), "norm": 1 + rnd(dim)}
    path = os.path.join(tmp, "l2c.bin")
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", dim, hidden, L, H, KVH, V, ctx))
        for k in ("tok", "att_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w2", "w3", "norm"):
            f.write(W[k].numpy().astype("<f4").tobytes())
        f.write(torch.zeros(ctx * hd).numpy().astype("<f4").tobytes())  # freq_cis tables
    out = os.path.join(tmp, "l2c-sm")
    p = run([smbin, "convert", path, out, "--tokenizer", tokbin])
    if p.returncode != 0:
        check(False, "convert llama2.c checkpoint", p.stderr.decode())
        return
    text = "Once upon a time, a little dog found a big red ball in the park."
    Wd = {k: v.double() for k, v in W.items()}
    score_vs_torch(torch, smbin, out, text, lambda ids: llama2c_reference(torch, Wd, ids, L, H, KVH, 1e-5),
                   "llama2.c checkpoint (GQA 8/4, interleaved pairs)")


def bad_conversions(smbin, tmp):
    """Broken sources fail with one line naming the file and the fault, and write nothing."""
    tokp = os.path.join(tmp, "tok.bin")
    with open(tokp, "wb") as f:  # a tiny valid tokenizer.bin: 3 control + 256 byte pieces
        f.write(struct.pack("<i", 8))
        for piece in [b"<unk>", b"\n<s>\n", b"\n</s>\n"] + [b"<0x%02X>" % b for b in range(256)]:
            f.write(struct.pack("<fi", 0.0, len(piece)) + piece)
    hdr = struct.pack("<7i", 64, 160, 2, 8, 4, 259, 32)
    # embedding, attention norms, wq, wk + wv, wo, ffn norms, w1 + w2 + w3, final norm, freq tables
    floats = 259 * 64 + 2 * 64 + 2 * 64 * 64 + 2 * 2 * 64 * 32 + 2 * 64 * 64 + 2 * 64 + 3 * 2 * 64 * 160 + 64 + 32 * 8
    cases = [
        ("l2c_truncated", "model.bin", hdr + b"\0" * (4 * floats - 8), ["--tokenizer", tokp], "bytes, but the header"),
        ("l2c_extra", "model.bin", hdr + b"\0" * (4 * floats + 4), ["--tokenizer", tokp], "bytes, but the header"),
        ("l2c_bad_heads", "model.bin", struct.pack("<7i", 64, 160, 2, 7, 4, 259, 32), ["--tokenizer", tokp], "do not fit"),
        ("l2c_negative_dim", "model.bin", struct.pack("<7i", -64, 160, 2, 8, 4, 259, 32), ["--tokenizer", tokp], "header dim is -64"),
        ("l2c_no_tokenizer", "model.bin", hdr, [], "needs --tokenizer"),
        ("l2c_v1", "model.bin", b"24ka" + struct.pack("<i", 1) + b"\0" * 300, ["--tokenizer", tokp], "version 1 checkpoint"),
    ]
    # a valid checkpoint with one weight f16 cannot hold: --dtype f16 refuses it, naming the flag
    cases.append(("l2c_f16_overflow", "model.bin", hdr + struct.pack("<f", 1e5) + b"\0" * (4 * floats - 4),
                  ["--tokenizer", tokp, "--dtype", "f16"], "tok_embd [0, 0] is 100000, past f16's largest value"))
    for name, fn, data, extra, want in cases:
        path = os.path.join(tmp, name + ".bin")
        with open(path, "wb") as f:
            f.write(data)
        where = "--dtype f16" if "--dtype" in extra else path
        expect_convert_fail(smbin, [path] + extra, os.path.join(tmp, name + "-out"), name, where, want)
    def hf_dir(name, cfg, st_bytes):
        d = os.path.join(tmp, name)
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        if st_bytes is not None:
            with open(os.path.join(d, "model.safetensors"), "wb") as f:
                f.write(st_bytes)
        return d
    g2 = {"model_type": "gpt2", "n_embd": 8, "n_layer": 1, "n_head": 2, "vocab_size": 10}
    hdr_json = lambda h: struct.pack("<Q", len(h)) + h
    hf_cases = [
        ("hf_unknown_type", {"model_type": "mamba"}, b"", "model_type \"mamba\" is not supported"),
        ("hf_header_too_long", g2, struct.pack("<Q", 2**63) + b"{}", "header length 9223372036854775808 does not fit"),
        ("hf_offsets_wrong", g2, hdr_json(b'{"wte.weight":{"dtype":"F32","shape":[10,8],"data_offsets":[0,300]}}') + b"\0" * 320,
         "do not agree"),
        ("hf_bad_dtype", g2, hdr_json(b'{"wte.weight":{"dtype":"I8","shape":[10,8],"data_offsets":[0,80]}}') + b"\0" * 80,
         "dtype I8"),
        ("hf_missing_tensor", g2, hdr_json(b'{"wte.weight":{"dtype":"F32","shape":[10,8],"data_offsets":[0,320]}}') + b"\0" * 320,
         "missing tensor transformer.wpe.weight"),
        ("hf_no_weights", g2, None, "no model.safetensors"),
    ]
    for name, cfg, data, want in hf_cases:
        d = hf_dir(name, cfg, data)
        expect_convert_fail(smbin, [d], d + "-out", name, d, want)
    # broken tokenizer.json files beside valid (zero) GPT-2 weights; messages name the file and entry
    C, V, ctx = 8, 10, 8
    zero_st = safetensors_bytes(zeros(gpt2_shapes(C, V, ctx)))
    g2z = dict(g2, n_positions=ctx)
    bl = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
    tj = lambda model, **kw: json.dumps(dict({"added_tokens": [], "normalizer": None, "pre_tokenizer": bl,
                                              "model": dict({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
                                                             "merges": ["a b"]}, **model)}, **kw))
    tok_cases = [
        ("tokjson_unigram", tj({"type": "Unigram"}), "model.type \"Unigram\" is not supported"),
        ("tokjson_unknown_merge", tj({"merges": ["a b", "a zz"]}), "model.merges[1] names \"zz\", which is not in"),
        ("tokjson_merge_result", tj({"vocab": {"a": 0, "b": 1, "ba": 2}, "merges": ["a b"]}),
         "model.merges[0] makes \"ab\", which is not in the vocabulary"),
        ("tokjson_id_gap", tj({"vocab": {"a": 0, "b": 1, "ab": 3}}), "no token has id 2"),
        ("tokjson_id_twice", tj({"vocab": {"a": 0, "b": 1, "ab": 1}}), "id 1 is both \"b\" and \"ab\""),
        ("tokjson_id_string", tj({"vocab": {"a": "0"}}), "model.vocab[\"a\"] must be a whole number"),
        ("tokjson_truncated", tj({})[:-7], "tokenizer.json: invalid JSON at line 1"),
    ]
    # tokenizer.json files read as they are (neither GPT-2's nor SentencePiece's shape)
    split = lambda pat: {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pat}, "behavior": "Isolated", "invert": False}, bl]}
    tok_cases += [
        ("tokjson_whitespace", tj({}, pre_tokenizer={"type": "Whitespace"}),
         "pre_tokenizer type \"Whitespace\" is not supported"),
        ("tokjson_bad_regex", tj({}, pre_tokenizer=split("(?i:'s|\\p{L}+")),
         "pattern \"(?i:'s|\\p{L}+\" at offset"),
        ("tokjson_lowercase", tj({}, normalizer={"type": "Lowercase"}),
         "normalizer type \"Lowercase\" is not supported"),
        ("tokjson_hf_merge", tj({"merges": ["a b", "b a"]}, pre_tokenizer=split("\\p{L}+")),
         "model.merges[1] \"b\" + \"a\" names a token not in the vocabulary"),
        ("tokjson_two_bos", tj({}, pre_tokenizer=split("\\p{L}+"), post_processor={
            "type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "a"}}, {"SpecialToken": {"id": "a"}},
                                                     {"Sequence": {"id": "A"}}],
            "special_tokens": {"a": {"id": "a", "ids": [0], "tokens": ["a"]}}}),
         "post_processor adds more than one token before the text"),
    ]
    g2t = dict(g2z, bos_token_id=0, eos_token_id=1)
    for name, text, want in tok_cases:
        d = hf_dir(name, g2t if name in ("tokjson_whitespace", "tokjson_bad_regex", "tokjson_lowercase",
                                         "tokjson_hf_merge", "tokjson_two_bos") else g2z, zero_st)
        with open(os.path.join(d, "tokenizer.json"), "w") as f:
            f.write(text)
        expect_convert_fail(smbin, [d], d + "-out", name, os.path.join(d, "tokenizer.json"), want)
    d = hf_dir("no_tokenizer", g2z, zero_st)
    expect_convert_fail(smbin, [d], d + "-out", "no_tokenizer", d, "no tokenizer (tokenizer.json, or vocab.json")


def expect_convert_fail(smbin, args, out, name, where, want):
    p = run([smbin, "convert", args[0], out] + args[1:])
    err = p.stderr.decode(errors="replace").strip()
    ok = p.returncode == 1 and len(err.split("\n")) == 1 and want in err and where in err and \
        not os.path.exists(out)
    check(ok, f"bad conversion ({name}): exit 1, one line, nothing written: {err[:140]}",
          f"rc={p.returncode} want {want!r}")


def allocs_per_token(smbin, bindir, model):
    """Heap allocations (LD_PRELOAD counter) are the same for 16 and 255 generated tokens."""
    so = os.path.join(bindir, "alloc_count.so")
    if os.environ.get("SM_SKIP_ALLOC") or not os.path.exists(so):
        T.skip("allocations per token (stories260K)", "no LD_PRELOAD counter in this build")
        return
    counts = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in ("16", "255"):
            out = os.path.join(tmp, n)
            env = dict(os.environ, SM_ALLOC_OUT=out, LD_PRELOAD=os.path.abspath(so))
            subprocess.run([smbin, "generate", "-m", model, "-p", "", "-n", n, "--temp", "0", "-t", "2"],
                           env=env, capture_output=True, timeout=900)
            counts.append(open(out).read().strip() if os.path.exists(out) else "")
    check(counts[0] and counts[0] == counts[1],
          f"stories260K (Llama, SentencePiece): heap allocations for 16 and 255 tokens are equal ({counts[0]})",
          f"{counts}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build")
    ap.add_argument("--shared", default=os.path.join("..", "shared"))
    a = ap.parse_args()
    smbin = os.path.join(a.bin, "smallmind")
    models = os.path.join(a.shared, "models")
    s260 = os.path.join(models, "stories260K")
    tiny = os.path.join(models, "tiny-gpt2")
    with tempfile.TemporaryDirectory() as tmp:
        bad_conversions(smbin, tmp)
        if os.path.isdir(s260):
            out = os.path.join(tmp, "s260")
            p = run([smbin, "convert", os.path.join(s260, "stories260K.bin"), out, "--tokenizer",
                     os.path.join(s260, "tok512.bin")])
            check(p.returncode == 0, "convert stories260K.bin + tok512.bin", p.stderr.decode())
            with open(os.path.join(s260, "reference_greedy.txt"), "rb") as f:
                want = f.read().rstrip(b"\n")
            for kern in ("scalar", "avx2", "avx512"):
                for t in ("2",) if SANITIZED else ("1", "2"):
                    # llama2.c's 256 steps: BOS, then 256 sampled tokens (it stops at BOS)
                    p = run([smbin, "generate", "-m", out, "-p", "", "-n", "256", "--temp", "0",
                             "--kernels", kern, "-t", t])
                    if p.returncode != 0 and b"not supported by this CPU" in p.stderr:
                        T.skip(f"stories260K greedy with {kern}", "this CPU lacks it")
                        break
                    check(p.stdout == want, "stories260K greedy = llama2.c's reference_greedy.txt "
                          f"({len(want)} bytes; {kern}, {t} threads)", repr(p.stdout[-80:]))
            allocs_per_token(smbin, a.bin, out)
            # kept at f16 (half the bytes), greedy decoding still gives the reference text
            out16 = os.path.join(tmp, "s260-f16")
            p = run([smbin, "convert", os.path.join(s260, "stories260K.bin"), out16, "--tokenizer",
                     os.path.join(s260, "tok512.bin"), "--dtype", "f16"])
            check(p.returncode == 0 and matrix_dtypes(out16)[0] == {"f16"}, "convert stories260K --dtype f16",
                  p.stderr.decode())
            for kern in ("scalar", "auto"):
                p = run([smbin, "generate", "-m", out16, "-p", "", "-n", "256", "--temp", "0", "--kernels", kern])
                check(p.stdout == want, f"stories260K at f16 greedy = reference_greedy.txt ({kern} kernels)",
                      repr(p.stdout[-80:]))
        else:
            T.skip("stories260K", f"{s260} is absent")
        if os.path.isdir(tiny):
            out = os.path.join(tmp, "tiny")
            p = run([smbin, "convert", tiny, out])
            ok = p.returncode == 0
            if ok:
                p = run([smbin, "generate", "-m", out, "-p", "Hello world", "-n", "8", "--temp", "0", "--json"])
                r = json.loads(p.stdout) if p.returncode == 0 else {}
                ok = r.get("tokens_prompt") == 2 and r.get("tokens_generated", 0) >= 1
            check(ok, "tiny-gpt2 (HF directory, transformer. prefix, Conv1D, tied) converts and generates",
                  p.stderr.decode())
            # run in place with only tokenizer.json beside it (written out to a private temporary
            # directory at load, removed at exit)
            tj = os.path.join(tmp, "tiny-tokjson")
            os.makedirs(tj)
            for n in ("config.json", "model.safetensors", "tokenizer.json"):
                os.symlink(os.path.abspath(os.path.join(tiny, n)), os.path.join(tj, n))
            in_place(smbin, tj, out, "Hello world, this is a test of the tokenizer.", "tiny-gpt2 (tokenizer.json only)")
        else:
            T.skip("tiny-gpt2", f"{tiny} is absent")
        try:
            import torch
        except ImportError:
            torch = None
            T.skip("PyTorch references", "torch is not importable (apt-get install python3-torch)")
        if torch is not None:
            torch.set_num_threads(2)
            DTYPES.update({torch.float16: "f16", torch.bfloat16: "bf16"})
            if os.path.isdir(tiny):
                families = (test_gpt2, test_llama_hf_in_place, test_qwen2, test_llama3_qwen3, test_mistral_phi3,
                            test_gemma3, test_smollm2)
                for k, dt in enumerate((torch.float32, torch.bfloat16)):
                    for i, family in enumerate(families):
                        # make asan: each family at one dtype, the two dtypes in turn (make test: both)
                        if not SANITIZED or i % 2 == k:
                            family(torch, smbin, tmp, tiny, dt)
            else:
                T.skip("HF GPT-2 reference", "needs tiny-gpt2's vocab.json and merges.txt")
            tokbin = os.path.join(s260, "tok512.bin")
            if os.path.exists(tokbin):
                for dt in (torch.float16,) if SANITIZED else (torch.float32, torch.float16, torch.bfloat16):
                    test_llama_hf(torch, smbin, tmp, tokbin, dt)
                test_llama2c(torch, smbin, tmp, tokbin)
            else:
                T.skip("Llama references", "need stories260K's tok512.bin")
    return T.close()


if __name__ == "__main__":
    sys.exit(main())
