"""What test_models.py and model_families.py share: running smallmind, writing
safetensors, comparing its log-probabilities with a PyTorch forward pass,
and the reference forward passes of GPT-2 and the Hugging Face Llama layout
(written here from the papers' equations, not imported from transformers).
One tally ("models") for both files."""
import json
import os
import subprocess

from st_file import safetensors_bytes  # test_models.py put tests/ on the path
from tally import Tally

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
