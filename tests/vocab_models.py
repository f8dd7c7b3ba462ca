"""Small random-weight models with real vocabularies, for tests whose subject
is the tokenizer's vocabulary rather than the model (structured output):
one-layer Hugging Face Llama directories (model.safetensors of small random
weights, so that unconstrained output is noise) carrying a real
tokenizer.json, or llama2.c's tokenizer.bin (passed with --tokenizer).

    models = vocab_models(shared, root)   # {name: (model path, extra flags)}
"""
import json
import os
import shutil
import struct

import numpy as np

# name: (tokenizer folder in ../shared/models/tokenizers, vocabulary size of the model, BOS and EOS ids
# as the models' own config.json files give them)
VOCABS = {"llama2": ("llama2", 32000, 1, 2), "llama3": ("llama3", 128256, 128000, 128001),
          "qwen2_5": ("qwen2_5", 151936, 151643, 151643), "gemma3": ("gemma3", 262208, 2, 1)}


def _safetensors(tensors):
    header, off = {}, 0
    for name, arr in tensors:
        raw = arr.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(a.astype("<f4").tobytes() for _, a in tensors)


def llama_dir(path, V, seed, bos, eos, C=16, F=32):
    """A one-layer Llama of width C with random weights and tied embeddings."""
    rng = np.random.default_rng(seed)
    w = lambda *shape: rng.standard_normal(shape).astype(np.float32) * 0.5
    tensors = [("model.embed_tokens.weight", w(V, C)), ("model.norm.weight", np.ones(C, np.float32))]
    for k, sh in (("input_layernorm", (C,)), ("post_attention_layernorm", (C,)), ("self_attn.q_proj", (C, C)),
                  ("self_attn.k_proj", (C, C)), ("self_attn.v_proj", (C, C)), ("self_attn.o_proj", (C, C)),
                  ("mlp.gate_proj", (F, C)), ("mlp.up_proj", (F, C)), ("mlp.down_proj", (C, F))):
        tensors.append((f"model.layers.0.{k}.weight", np.ones(sh, np.float32) if len(sh) == 1 else w(*sh)))
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "model.safetensors"), "wb") as f:
        f.write(_safetensors(tensors))
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "hidden_size": C, "intermediate_size": F, "num_hidden_layers": 1,
                   "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 2048,
                   "vocab_size": V, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True,
                   "bos_token_id": bos, "eos_token_id": eos}, f)


def vocab_models(shared, root):
    """{name: (model path, [extra flags])}: GPT-2 (tiny-gpt2 as it is), Llama 2 (SentencePiece,
    tokenizer.bin), Llama 3, Qwen 2.5 and Gemma 3 (tokenizer.json), made under root once."""
    models = {"gpt2": (os.path.join(shared, "tiny-gpt2"), [])}
    for name, (tdir, V, bos, eos) in VOCABS.items():
        src = os.path.join(shared, "tokenizers", tdir)
        if not os.path.isdir(src):
            continue
        path = os.path.join(root, f"vocab-{name}")
        flags = []
        if not os.path.exists(os.path.join(path, "config.json")):
            llama_dir(path, V, len(name), bos, eos)
            for fn in ("tokenizer.json", "tokenizer_config.json"):
                if os.path.exists(os.path.join(src, fn)):
                    shutil.copy(os.path.join(src, fn), os.path.join(path, fn))
        if name == "llama2":
            flags = ["--tokenizer", os.path.join(src, "tokenizer.bin")]
        models[name] = (path, flags)
    return models
