// The official OpenAI client (npm "openai", installed by scripts/test_deps.sh into
// build/npm) against a smallmind server, for tests/test_serve.py.
//   node serve_client.mjs BASE_URL API_KEY < calls.json
// calls.json: [{op: "chat"|"completion"|"models", stream: bool, params: {...}}, ...]
// Prints one JSON result per call: {text, finish_reason, usage, chunks, model, error}.
import { createRequire } from "node:module";
import path from "node:path";
import fs from "node:fs";

const require = createRequire(path.resolve(process.env.SM_NPM || "build/npm") + "/");
const OpenAI = require("openai");

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: apiKey || "none", maxRetries: 0, timeout: 600000 });
const calls = JSON.parse(fs.readFileSync(0, "utf8"));

async function one(c) {
  try {
    if (c.op === "models") {
      const list = await client.models.list();
      return { ids: list.data.map((m) => m.id), objects: list.data.map((m) => m.object) };
    }
    const api = c.op === "chat" ? client.chat.completions : client.completions;
    if (!c.stream) {
      const r = await api.create({ ...c.params, stream: false });
      const ch = r.choices[0];
      const choices = r.choices.map((x) => ({ index: x.index, text: c.op === "chat" ? x.message.content : x.text,
                                              finish_reason: x.finish_reason, logprobs: x.logprobs }));
      return { text: c.op === "chat" ? ch.message.content : ch.text, finish_reason: ch.finish_reason,
               usage: r.usage, model: r.model, object: r.object, role: ch.message ? ch.message.role : null,
               logprobs: ch.logprobs, choices };
    }
    const s = await api.create({ ...c.params, stream: true });
    let usage = null, chunks = 0;
    const by = new Map(); // index -> {text, finish_reason, role, logprobs, finishes}
    for await (const ev of s) {
      chunks++;
      if (ev.usage) usage = ev.usage;
      for (const ch of ev.choices) {
        if (!by.has(ch.index)) by.set(ch.index, { index: ch.index, text: "", finish_reason: null, role: null,
                                                  logprobs: [], token_logprobs: [], finishes: 0 });
        const o = by.get(ch.index);
        if (c.op === "chat") {
          if (ch.delta.role) o.role = ch.delta.role;
          if (ch.delta.content) o.text += ch.delta.content;
          if (ch.logprobs && ch.logprobs.content) o.logprobs.push(...ch.logprobs.content);
        } else {
          o.text += ch.text;
          if (ch.logprobs && ch.logprobs.tokens) o.logprobs.push(...ch.logprobs.tokens);
          if (ch.logprobs && ch.logprobs.token_logprobs) o.token_logprobs.push(...ch.logprobs.token_logprobs);
        }
        if (ch.finish_reason) o.finish_reason = ch.finish_reason, o.finishes++;
      }
    }
    const choices = [...by.values()].sort((a, b) => a.index - b.index);
    const first = choices[0] || { text: "", finish_reason: null, role: null, logprobs: [] };
    return { text: first.text, finish_reason: first.finish_reason, usage, chunks, role: first.role,
             logprobs: first.logprobs, choices };
  } catch (e) {
    return { error: String(e.status || "") + " " + String(e.message).slice(0, 300), status: e.status || null };
  }
}

const results = await Promise.all(calls.map(one));
for (const r of results) process.stdout.write(JSON.stringify(r) + "\n");
