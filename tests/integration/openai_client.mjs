// The official `openai` npm client against the router's HTTP edge: streams a chat completion
// and a completion (greedy), and checks that an unsupported parameter is refused.
// Usage: node openai_client.mjs BASE_URL API_KEY MODEL; prints one JSON object.
import { createRequire } from "module";
const require = createRequire(process.env.NPM_CACHE + "/node_modules/");
const OpenAI = require("openai");

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });

async function collect(stream, pick) {
  const out = { text: "", chunks: 0, finish_reason: null, usage: null };
  for await (const chunk of stream) {
    out.chunks += 1;
    if (chunk.usage) out.usage = chunk.usage;
    for (const choice of chunk.choices) {
      out.text += pick(choice) ?? "";
      if (choice.finish_reason) out.finish_reason = choice.finish_reason;
    }
  }
  return out;
}

const chat = await collect(
  await client.chat.completions.create({
    model, stream: true, stream_options: { include_usage: true }, temperature: 0, max_tokens: 16,
    messages: [{ role: "system", content: "You are terse." }, { role: "user", content: "Write a haiku about speculative decoding." }],
  }),
  (choice) => choice.delta?.content);
const completion = await collect(
  await client.completions.create({ model, stream: true, temperature: 0, max_tokens: 16, prompt: "def fibonacci(n):" }),
  (choice) => choice.text);
let refused = null;
try {
  await client.chat.completions.create({ model, n: 2, messages: [{ role: "user", content: "hi" }] });
} catch (e) {
  refused = { status: e.status, param: e.param ?? e.error?.param ?? null };
}
const models = await client.models.list();
console.log(JSON.stringify({ chat, completion, refused, models: models.data.map((m) => m.id) }));
