// Reference chat-template renders with @huggingface/jinja (what transformers.js uses).
// Usage: node render_reference.mjs TOKENIZER_CONFIG CONVERSATIONS_JSON OUT_JSON
// Writes [{prompt: [text|null, text|null], error: [msg|null, msg|null]}...]: per conversation,
// add_generation_prompt false and true.
import fs from "fs";
import { createRequire } from "module";
const require = createRequire(process.env.NPM_CACHE + "/node_modules/");
const { Template } = require("@huggingface/jinja");

const [configPath, conversationsPath, outPath] = process.argv.slice(2);
const config = JSON.parse(fs.readFileSync(configPath, "utf8"));
const token = (t) => (t && typeof t === "object" ? t.content : t ?? "");
const template = new Template(config.chat_template);
const out = JSON.parse(fs.readFileSync(conversationsPath, "utf8")).map((messages) => {
  const result = { prompt: [], error: [] };
  for (const add_generation_prompt of [false, true]) {
    try {
      result.prompt.push(template.render({ messages, add_generation_prompt,
        bos_token: token(config.bos_token), eos_token: token(config.eos_token) }));
      result.error.push(null);
    } catch (e) {
      result.prompt.push(null);
      result.error.push(String(e.message ?? e));
    }
  }
  return result;
});
fs.writeFileSync(outPath, JSON.stringify(out));
