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

The other Llama-family layouts are in model_families.py, the helpers and
reference forward passes both use in model_ref.py.

    tests/test_models.py --bin build [--shared ../shared]
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_file import gpt2_shapes, safetensors_bytes, zeros  # noqa: E402
from model_ref import (DTYPES, EXACT, SANITIZED, T, TOL, check, compare, gpt2_reference, in_place,  # noqa: E402
                       keep_16bit, llama_hf_reference, llama_hf_weights, matrix_dtypes, model_tensor, rms, run,
                       score, score_vs_torch, with_gpt2_tokenizer_converted, write_safetensors)
from model_families import (test_gemma3, test_llama3_qwen3, test_llama_hf_in_place,  # noqa: E402
                            test_mistral_phi3, test_qwen2, test_smollm2)


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
