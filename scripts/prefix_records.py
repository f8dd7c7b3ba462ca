#!/usr/bin/python3
"""Inputs for bench_peers.sh's prefix rows: 256 --batch records of a
400-token instruction (shared by all, or different per record) and a
20-40-token item, counted in the model's own tokens (smallmind tokenize),
with llama-server request bodies of the same prompts; or one long prompt.

    prefix_records.py --model M.gguf --bin build/smallmind --shared 1 --out R.jsonl --curl R.curl
    prefix_records.py --model M.gguf --bin build/smallmind --long 1500 --out P.txt
"""
import argparse
import json
import os
import random
import subprocess

WORDS = ("the a of to and in is was for on with as by at from that this it be are an or which "
         "record answer summary item field value list name city river market letter number data "
         "careful brief short long clear exact simple write read keep give return describe explain "
         "each every one two three small large first last new old good bad red green blue").split()


def text_of(bin_, model, rng, n_tokens):
    """Words until the model's tokenizer counts n_tokens, cut to exactly that many and decoded."""
    words = []
    while True:
        words += [rng.choice(WORDS) for _ in range(n_tokens)]
        t = " ".join(words)
        ids = subprocess.run([bin_, "tokenize", "-m", model, "--no-bos", "-p", t], capture_output=True,
                             check=True).stdout.split()
        if len(ids) >= n_tokens:
            return subprocess.run([bin_, "detokenize", "-m", model, *[i.decode() for i in ids[:n_tokens]]],
                                  capture_output=True, check=True).stdout.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shared", type=int, default=1)
    ap.add_argument("--curl")
    ap.add_argument("--long", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(35)
    if a.long:
        with open(a.out, "w") as f:
            f.write(text_of(a.bin, a.model, rng, a.long))
        return
    instr = text_of(a.bin, a.model, rng, 400)
    bodies = os.path.splitext(a.out)[0] + ".bodies"
    os.makedirs(bodies, exist_ok=True)
    with open(a.out, "w") as f, open(a.curl, "w") as c:
        for i in range(256):
            pre = instr if a.shared else text_of(a.bin, a.model, rng, 400)
            item = text_of(a.bin, a.model, rng, rng.randint(20, 40))
            prompt = pre + "\nItem " + str(i) + ": " + item + "\nAnswer:"
            f.write(json.dumps({"id": i, "prompt": prompt}) + "\n")
            path = os.path.join(bodies, f"{i}.json")
            with open(path, "w") as b:
                json.dump({"prompt": prompt, "n_predict": 16, "temperature": 0, "cache_prompt": True}, b)
            c.write(path + "\n")


if __name__ == "__main__":
    main()
