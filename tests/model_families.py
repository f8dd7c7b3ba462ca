"""The Llama-family layouts beyond Llama itself, for test_models.py: Qwen2,
Llama 3 / Qwen3, Mistral / Phi-3, Gemma 3 and SmolLM2 as Hugging Face
directories (and GGUF files where llama.cpp's layout differs), each scored
against an independent PyTorch forward pass (model_ref.py) and greedy-decoded
against it, plus the prefix cache's window on one of them."""
import json
import math
import os
import re
import subprocess
import sys

from model_ref import (HERE, T, check, greedy_vs_torch, llama_hf_reference, llama_hf_weights,
                       run, score, score_vs_torch, with_gpt2_tokenizer_converted, write_llama_family_dir,
                       write_safetensors)


def gguf_writer():
    """scripts/make_gguf.py, imported when a family test runs (it needs NumPy, as they do)."""
    scripts = os.path.join(HERE, "..", "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    import make_gguf
    return make_gguf


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


def gguf_family(torch, smbin, W, tiny, arch, gpath, L, H, KVH, C, F, ctx, eps, theta, text, ref, label,
                meta=(), extra=(), pre="gpt-2", added=(), reps=3):
    """W (Hugging Face names) written as a GGUF file of llama.cpp's layout for arch (Q and K rows
    permuted into rotary pairs for llama, as its converter does; as stored for qwen2/qwen3), with
    tiny-gpt2's tokenizer and extra tensors (GGUF names), scored against ref."""
    mg = gguf_writer()
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
    mg = gguf_writer()
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
    mg = gguf_writer()
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
    mg = gguf_writer()
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
