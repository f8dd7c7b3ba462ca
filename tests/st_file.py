"""safetensors files for the tests, written here (no safetensors package),
and Hugging Face directories made from ../shared's.

A file is the 8-byte little-endian length of a JSON header (padded with
spaces to a multiple of 8), the header {name: {dtype, shape, data_offsets}},
then the tensors' bytes back to back.
"""
import json
import math
import os
import shutil
import struct


def safetensors_bytes(tensors):
    """tensors: [(name, dtype "F32" | "F16" | "BF16", shape, raw little-endian bytes)]."""
    header, off = {}, 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors)


def gpt2_shapes(C, V, ctx):
    """{name: shape} of a one-block Hugging Face GPT-2 (no transformer. prefix, Conv1D layout)."""
    shapes = {"wte.weight": [V, C], "wpe.weight": [ctx, C], "ln_f.weight": [C], "ln_f.bias": [C]}
    for k, sh in (("ln_1.weight", [C]), ("ln_1.bias", [C]), ("attn.c_attn.weight", [C, 3 * C]),
                  ("attn.c_attn.bias", [3 * C]), ("attn.c_proj.weight", [C, C]), ("attn.c_proj.bias", [C]),
                  ("ln_2.weight", [C]), ("ln_2.bias", [C]), ("mlp.c_fc.weight", [C, 4 * C]),
                  ("mlp.c_fc.bias", [4 * C]), ("mlp.c_proj.weight", [4 * C, C]), ("mlp.c_proj.bias", [C])):
        shapes["h.0." + k] = sh
    return shapes


def zeros(shapes):
    """F32 zero tensors for safetensors_bytes: shapes is {name: shape}."""
    return [(name, "F32", shape, b"\0" * (4 * math.prod(shape))) for name, shape in shapes.items()]


def writable_copy(src, dest):
    """A copy of the directory src at dest that the tests may change, whatever src allowed."""
    shutil.copytree(src, dest)
    for root, dirs, files in os.walk(dest):
        for n in dirs + files:
            p = os.path.join(root, n)
            os.chmod(p, os.stat(p).st_mode | 0o200)
    os.chmod(dest, os.stat(dest).st_mode | 0o200)
    return dest


def with_chat_template(src, tokenizer_config, dest):
    """A copy of the Hugging Face directory src at dest whose tokenizer_config.json has
    tokenizer_config's chat_template (and GPT-2's <|endoftext|> as eos_token)."""
    writable_copy(src, dest)
    with open(tokenizer_config, encoding="utf-8") as f:
        tpl = json.load(f)["chat_template"]
    with open(os.path.join(dest, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": tpl, "eos_token": "<|endoftext|>"}, f)
    return dest
