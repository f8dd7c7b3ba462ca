// Writes tests/fixtures/chat_template_reference.json: how the npm package
// @huggingface/jinja (the Jinja engine of transformers.js) renders the chat
// template of every tokenizer_config.json in ../shared/models/tokenizers for
// a set of conversations: 1 to 6 messages, with and without a system
// message, add_generation_prompt true and false, a message with Unicode and
// template braces, roles that do not alternate (templates that raise say
// so: the case records the error), tools (Llama 3.2, Qwen) and thinking on
// and off (Qwen 3); Llama 2, whose config has none, with Llama 2 Chat's
// template (tests/fixtures/llama2-chat.jinja). Variables as transformers passes them: messages,
// add_generation_prompt and the special tokens the config sets. Llama
// 3.2's template takes today's date from strftime_now unless date_string is
// given; these renderings give date_string "23 Nov 2026" so they do not
// change with the day they are made (strftime_now is tested on its own).
//   node scripts/chat_template_reference.mjs [../shared]
import { createRequire } from "module";
import { readFileSync, writeFileSync, readdirSync, mkdtempSync, mkdirSync, copyFileSync, existsSync } from "fs";
import { tmpdir } from "os";
import { join } from "path";

const require = createRequire(process.cwd() + "/");
const { Template } = await import(require.resolve("@huggingface/jinja"));
const { AutoTokenizer, env } = await import(require.resolve("@huggingface/transformers"));
const shared = process.argv[2] || "../shared";
const dir = join(shared, "models", "tokenizers");

const configs = {};
for (const sub of readdirSync(dir).sort())
  for (const f of readdirSync(join(dir, sub)).sort()) {
    if (!f.startsWith("tokenizer_config")) continue;
    const j = JSON.parse(readFileSync(join(dir, sub, f), "utf8"));
    const tok = (t) => (t && typeof t === "object" ? t.content : t);
    configs[`${sub}/${f}`] = { chat_template: j.chat_template ?? null, bos_token: tok(j.bos_token) ?? null,
                               eos_token: tok(j.eos_token) ?? null };
  }
// Llama 2's tokenizer_config.json has no chat_template (transformers refuses to apply one, and so
// do we); its chat model's template (meta-llama/Llama-2-7b-chat-hf's, what a user passes with
// --chat-template) is rendered with that config's special tokens.
const l2 = configs["llama2/tokenizer_config.json"];
if (l2 && !l2.chat_template) {
  l2.chat_template = readFileSync("tests/fixtures/llama2-chat.jinja", "utf8");
  l2.template_file = "tests/fixtures/llama2-chat.jinja";
}

const U = (content) => ({ role: "user", content });
const A = (content) => ({ role: "assistant", content });
const S = (content) => ({ role: "system", content });
const odd = "Unicode: café, ñ, 日本語, 😀 — and braces {{ x }} {% y %} {# z #} }} {{";
const conversations = [
  [U("Hello!")],
  [S("You are a helpful assistant."), U("What is the capital of France?")],
  [U("Hi"), A("Hello! How can I help?"), U("Tell me a joke.")],
  [S("Be brief."), U("2+2?"), A("4"), U("And 3+3?")],
  [U("one"), A("two"), U("three"), A("four"), U("five"), A("six")],
  [S("  Spaces around the system message.  "), U(odd), A("  " + odd + "  "), U("Thanks\nbye\n")],
  [U("first"), U("second")],
  [U("What is 7*6?"), A("<think>\n7*6 is 42.\n</think>\n\nIt is 42."), U("And 6*7?")],
];
const tools = [{ type: "function", function: { name: "get_weather", description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string", description: "The city" } },
                required: ["city"] } } }];

env.allowRemoteModels = false;
env.localModelPath = mkdtempSync(join(tmpdir(), "chat-ref-"));
const cases = [];
for (const [name, c] of Object.entries(configs)) {
  if (!c.chat_template) continue;
  const tpl = new Template(c.chat_template);
  let tok = null;
  const sub = name.split("/")[0];
  if (existsSync(join(dir, sub, "tokenizer.json"))) {
    const d = name.replace(/[/.]/g, "_");
    mkdirSync(join(env.localModelPath, d));
    copyFileSync(join(dir, sub, "tokenizer.json"), join(env.localModelPath, d, "tokenizer.json"));
    copyFileSync(join(dir, name), join(env.localModelPath, d, "tokenizer_config.json"));
    tok = await AutoTokenizer.from_pretrained(d);
  }
  const extras = [name.includes("llama3_2") ? { date_string: "23 Nov 2026" } : {}];
  if (name.startsWith("qwen3/")) extras.push({ enable_thinking: false });
  if (name.includes("llama3_2") || name.startsWith("qwen")) extras.push({ ...extras[0], tools });
  for (const messages of conversations)
    for (const add_generation_prompt of [true, false])
      for (const vars of extras) {
        const ctx = { messages, add_generation_prompt, ...vars };
        if (c.bos_token !== null) ctx.bos_token = c.bos_token;
        if (c.eos_token !== null) ctx.eos_token = c.eos_token;
        const rec = { config: name, messages, add_generation_prompt, vars };
        try {
          rec.text = tpl.render(ctx);
          if (tok) {
            const { tools: t, ...rest } = vars;
            const r = tok.apply_chat_template(messages, { tokenize: true, return_tensor: false,
                                                          add_generation_prompt, tools: t, ...rest });
            rec.ids = Array.isArray(r) ? r : r.input_ids;
          }
        } catch (e) {
          rec.error = String(e.message || e);
        }
        cases.push(rec);
      }
}
writeFileSync("tests/fixtures/chat_template_reference.json", JSON.stringify({ configs, cases }, null, 1) + "\n");
console.log(`wrote ${cases.length} renderings of ${Object.values(configs).filter((c) => c.chat_template).length} templates`);
