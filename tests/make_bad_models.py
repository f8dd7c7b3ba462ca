#!/usr/bin/python3
"""Writes broken model directories for the CLI tests (../shared/BAD_INPUTS.md).

    make_bad_models.py GOOD_MODEL_DIR OUT_DIR

Each case is a copy of GOOD_MODEL_DIR with one thing wrong. OUT_DIR/cases.tsv
lists them, one per line: name, BAD_INPUTS number, subcommand, and a piece of
text the one-line error must contain. Pure Python (no NumPy).
"""
import copy
import json
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import sm_model  # noqa: E402

good, out = sys.argv[1], sys.argv[2]
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
with open(os.path.join(good, "config.json")) as f:
    CFG = json.load(f)
with open(os.path.join(good, "model.bin"), "rb") as f:
    BIN = f.read()
TENSORS = [(t["name"], t["shape"], BIN[t["offset"]:t["offset"] + 4 * _n])
           for t in CFG["tensors"] for _n in [__import__("math").prod(t["shape"])]]
HYPER = {k: v for k, v in CFG.items() if k != "tensors"}
cases = []


def case(name, num, needle, cmd="info"):
    cases.append((name, num, cmd, needle))
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    return d


def copy_good(name, num, needle, cmd="info"):
    d = case(name, num, needle, cmd)
    shutil.copy(os.path.join(good, "config.json"), d)
    shutil.copy(os.path.join(good, "model.bin"), d)
    return d


def put_config(d, text):
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(text)


def put_bin(d, data):
    with open(os.path.join(d, "model.bin"), "wb") as f:
        f.write(data)


def edit_config(name, num, needle, fn, cmd="info"):
    d = copy_good(name, num, needle, cmd)
    cfg = copy.deepcopy(CFG)
    fn(cfg)
    put_config(d, json.dumps(cfg))
    return d


def rewrite(name, num, needle, hyper=None, tensors=None, cmd="info"):
    d = case(name, num, needle, cmd)
    sm_model.write_model(d, hyper or HYPER, tensors if tensors is not None else TENSORS)
    return d


# 1: no config.json in an existing directory
case("no_config", 1, "cannot open", "info")
# 2: weight file empty / shorter than its header
put_bin(copy_good("weights_empty", 2, "file is empty"), b"")
put_bin(copy_good("weights_short", 2, "shorter than the 64-byte"), b"SMWEIGHT\x01\x00")
# 3: foreign formats where the raw format is expected
put_bin(copy_good("weights_gguf", 3, "this is a GGUF file; expected a smallmind weight file"),
        b"GGUF" + struct.pack("<IQQ", 3, 0, 0) + b"\0" * 100)
hdr = json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
put_bin(copy_good("weights_safetensors", 3, "this is a safetensors file"),
        struct.pack("<Q", len(hdr)) + hdr + b"\0" * 4)
put_bin(copy_good("weights_llama2c", 3, "this is a llama2.c checkpoint"),
        struct.pack("<7i", 64, 172, 5, 8, 4, 512, 512) + b"\0" * 400)
# 4: truncated; 5: extra bytes
put_bin(copy_good("weights_truncated", 4, "truncated: tensor ln_f.bias needs bytes"), BIN[:-100])
put_bin(copy_good("weights_extra", 5, "extra bytes after the last tensor"), BIN + b"\0" * 12)
# 6: offset past the end; offset + size wrapping
edit_config("offset_past_end", 6, "past the end of the file",
            lambda c: c["tensors"][-1].update(offset=1 << 40))
edit_config("offset_huge", 6, "offset\" is", lambda c: c["tensors"][0].update(offset=2 ** 64 - 64))
# 7: overlapping, gapped, misaligned
edit_config("overlap", 7, "overlaps", lambda c: c["tensors"][3].update(offset=c["tensors"][2]["offset"]))
edit_config("gap", 7, "gap before tensor", lambda c: c["tensors"][0].update(offset=128))
edit_config("misaligned", 7, "not 64-byte aligned", lambda c: c["tensors"][1].update(offset=c["tensors"][1]["offset"] + 4))
# 8: a span that is not shape x dtype size (the manifest says one size, the file holds another)
edit_config("span_mismatch", 8, "overlaps", lambda c: c["tensors"][0]["shape"].__setitem__(0, c["tensors"][0]["shape"][0] + 1))
# 9: zero or negative dimension; overflowing product
edit_config("dim_zero", 9, "tok_embd.shape[0]\" is 0", lambda c: c["tensors"][0]["shape"].__setitem__(0, 0))
edit_config("dim_negative", 9, "tok_embd.shape[1]\" is -3", lambda c: c["tensors"][0]["shape"].__setitem__(1, -3))
edit_config("dim_overflow", 9, "shape product overflows", lambda c: c["tensors"][0].update(shape=[2 ** 31 - 1] * 4))
# 10: too many dimensions; unknown dtype
edit_config("dims_5", 10, "5 dimensions", lambda c: c["tensors"][0].update(shape=[1, 1, 1, 1, 1]))
edit_config("dtype_unknown", 10, "unknown dtype \"q3_0\"", lambda c: c["tensors"][0].update(dtype="q3_0"))
# a norm gain stored f16 (matrices may be 16-bit, vectors must be f32)
rewrite("vector_f16", 10, "tensor ln_f.weight has dtype f16; vectors (norms, biases) must be f32",
        tensors=[(n, s, d[:len(d) // 2], "f16") if n == "ln_f.weight" else (n, s, d) for n, s, d in TENSORS])
# quantized: a vector (vectors must be f32), rows that are not whole blocks, a NaN scale
rewrite("vector_q8_0", 10, "tensor ln_f.weight has dtype q8_0; vectors (norms, biases) must be f32",
        tensors=[(n, s, (b"\0" * 34) * (len(d) // 128), "q8_0") if n == "ln_f.weight" else (n, s, d)
                 for n, s, d in TENSORS])
edit_config("q4_0_rows", 10, "tensor tok_embd: dtype q4_0 needs rows of whole 32-weight blocks, not 250",
            lambda c: c["tensors"][0].update(dtype="q4_0", shape=[256, 250]))
nan_blocks = (struct.pack("<H", 0x7E00) + b"\0" * 32) * (len(TENSORS[0][2]) // 128)
rewrite("q8_0_scale_nan", 14, "NaN", cmd="generate",
        tensors=[(TENSORS[0][0], TENSORS[0][1], nan_blocks, "q8_0")] + TENSORS[1:])
# the k types: q6_k's d is last in its block; q4_k's dmin (the second scale) infinite in block 3
q6_nan = (b"\0" * 208 + struct.pack("<H", 0x7E00)) * (len(TENSORS[0][2]) // 1024)
rewrite("q6_k_scale_nan", 14, "NaN", cmd="generate",
        tensors=[(TENSORS[0][0], TENSORS[0][1], q6_nan, "q6_k")] + TENSORS[1:])
q4k_inf = b"".join(b"\0\0" + struct.pack("<H", 0x7C00 if b == 3 else 0) + b"\0" * 140
                   for b in range(len(TENSORS[0][2]) // 1024))
rewrite("q4_k_dmin_inf", 14, "inf", cmd="generate",
        tensors=[(TENSORS[0][0], TENSORS[0][1], q4k_inf, "q4_k")] + TENSORS[1:])
# 11: absurd lengths and counts
edit_config("name_huge", 11, "name must be 1 to 127 bytes", lambda c: c["tensors"][0].update(name="x" * 100000))
edit_config("layers_huge", 11, "\"n_layer\" is 1.84467440737096e+19",
            lambda c: c.update(n_layer=18446744073709551615))
d = copy_good("config_huge", 11, "bytes, more than the 67108864 such a file may have")
with open(os.path.join(d, "config.json"), "r+b") as f:
    f.truncate(65 << 20)  # sparse: no disk used
# 12: missing tensor; duplicate name
rewrite("tensor_missing", 12, "missing required tensor blk.1.mlp_up.bias",
        tensors=[t for t in TENSORS if t[0] != "blk.1.mlp_up.bias"])
edit_config("tensor_duplicate", 12, "duplicate tensor name \"tok_embd\"",
            lambda c: c["tensors"][1].update(name="tok_embd"))
rewrite("tensor_unexpected", 12, "unexpected tensor output.weight",
        tensors=TENSORS + [("output.weight", TENSORS[0][1], TENSORS[0][2])])
# 13: tensor shape disagrees with the config
rewrite("shape_vs_config", 13, "tensor pos_embd has [256,256], expected [128,256]",
        hyper=dict(HYPER, n_ctx=128))
# 14: NaN weights: generation stops with an error instead of printing garbage
nan = struct.pack("<f", float("nan")) * (len(TENSORS[-1][2]) // 4)
rewrite("weights_nan", 14, "NaN", tensors=TENSORS[:-1] + [(TENSORS[-1][0], TENSORS[-1][1], nan)],
        cmd="generate")
# 15: invalid JSON, trailing garbage, deep nesting
put_config(copy_good("json_invalid", 15, "invalid JSON at line 3, column"), '{\n "format": "smallmind",\n "n_layer": ,\n}')
put_config(copy_good("json_trailing", 15, "unexpected text after the JSON value at line 1"),
           json.dumps(CFG) + " garbage")
put_config(copy_good("json_deep", 15, "invalid JSON at line 1"), "[" * 100000 + "]" * 100000)
put_config(copy_good("json_nul", 15, "NUL byte"), json.dumps(CFG)[:20] + "\0" + json.dumps(CFG)[20:])
# 16: missing key, wrong type, fraction, zero, negative, above range
edit_config("key_missing", 16, "missing key \"n_head\"", lambda c: c.pop("n_head"))
edit_config("key_string", 16, "\"n_embd\" must be a number", lambda c: c.update(n_embd="256"))
edit_config("key_fraction", 16, "\"n_embd\" must be a whole number, got 256.5", lambda c: c.update(n_embd=256.5))
edit_config("key_zero", 16, "\"n_head\" is 0, expected 1 to 1024", lambda c: c.update(n_head=0))
edit_config("key_negative", 16, "\"n_vocab\" is -1", lambda c: c.update(n_vocab=-1))
edit_config("key_range", 16, "\"n_ctx\" is 2000000, expected 1 to 1048576", lambda c: c.update(n_ctx=2000000))
# 17: duplicate keys
put_config(copy_good("key_duplicate", 17, "duplicate key \"n_layer\""),
           json.dumps(CFG).replace('"n_layer"', '"n_layer": 4, "n_layer"', 1))
# 18: hyperparameters that do not fit
edit_config("heads_not_divisor", 18, "n_embd (256) is not a multiple of n_head (7)", lambda c: c.update(n_head=7))
edit_config("ctx_zero", 18, "\"n_ctx\" is 0", lambda c: c.update(n_ctx=0))
# 19: tokenizer vocabulary larger than the model's
small = [(n, ([200] + s[1:]) if n == "tok_embd" else s, d[:200 * 4 * s[1]] if n == "tok_embd" else d)
         for n, s, d in TENSORS]
rewrite("vocab_too_small", 19, "n_vocab is 200 but the byte tokenizer needs 256",
        hyper=dict(HYPER, n_vocab=200), tensors=small)
# 20: unknown architecture or option
edit_config("arch_unknown", 20, "unsupported architecture \"llama9\"", lambda c: c.update(architecture="llama9"))
edit_config("option_unknown", 20, "unsupported key \"rope_scaling\"", lambda c: c.update(rope_scaling=2))
edit_config("option_other_arch", 20, "\"rope_theta\" is not supported for gpt2 models", lambda c: c.update(rope_theta=10000))
edit_config("format_other", 20, "\"format\" is \"gguf\"", lambda c: c.update(format="gguf"))

with open(os.path.join(out, "cases.tsv"), "w") as f:
    for c in cases:
        f.write("\t".join(map(str, c)) + "\n")
print(f"wrote {len(cases)} broken models to {out}")
