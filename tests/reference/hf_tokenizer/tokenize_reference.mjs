// Reference tokenization with @lenml/tokenizers (transformers.js's tokenizer code) for the
// C++ comparison test. Usage: node tokenize_reference.mjs MODEL_DIR CORPUS_JSON OUT_JSON
// Writes {plain: [[ids]...], special: [[ids]...] (add_special_tokens), decoded: [text...],
//         bench: {bytes, seconds}} for the corpus strings, in order.
import fs from "fs";
import { createRequire } from "module";
const require = createRequire(process.env.NPM_CACHE + "/node_modules/");
const { TokenizerLoader } = require("@lenml/tokenizers");

const [modelDir, corpusPath, outPath] = process.argv.slice(2);
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(modelDir + "/tokenizer.json", "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(modelDir + "/tokenizer_config.json", "utf8")),
});
const corpus = JSON.parse(fs.readFileSync(corpusPath, "utf8"));
const plain = corpus.map((text) => tokenizer.encode(text, { add_special_tokens: false }));
const special = corpus.map((text) => tokenizer.encode(text, { add_special_tokens: true }));
const decoded = plain.map((ids) =>
  ids.length ? tokenizer.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false }) : "");

// Throughput: the whole corpus as one text, repeated to about 1 MB, encoded once to warm up.
const joined = corpus.join("\n");
const big = joined.repeat(Math.max(1, Math.ceil(1e6 / Buffer.byteLength(joined))));
tokenizer.encode(big, { add_special_tokens: false });
const start = process.hrtime.bigint();
tokenizer.encode(big, { add_special_tokens: false });
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
fs.writeFileSync(outPath, JSON.stringify({ plain, special, decoded, bench: { bytes: Buffer.byteLength(big), seconds } }));
