// Encodes documents with the reference, @huggingface/tokenizers.
//   node reference_encode.mjs NPM_DIR TOKENIZER_DIR DOCS.json OUT.json
//       OUT: [{"ids": [...], "decoded": "..."}] per document (no special
//       tokens added; decode keeps special tokens)
//   node reference_encode.mjs NPM_DIR TOKENIZER_DIR DOCS.json --serve
//       for each line on stdin, encodes every document and prints
//       "<seconds> <tokens>" (bench/tokenizers/)
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const [npmDir, dir, docsFile, out] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(
  path.join(npmDir, "node_modules", "@huggingface", "tokenizers", "dist", "tokenizers.mjs")));
const json = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
const configFile = path.join(dir, "tokenizer_config.json");
const config = fs.existsSync(configFile) ? JSON.parse(fs.readFileSync(configFile, "utf8")) : {};
const tokenizer = new Tokenizer(json, config);
const docs = JSON.parse(fs.readFileSync(docsFile, "utf8"));

if (out === "--serve") {
  const lines = readline.createInterface({ input: process.stdin });
  for await (const _ of lines) {
    const start = process.hrtime.bigint();
    let tokens = 0;
    for (const doc of docs) tokens += tokenizer.encode(doc, { add_special_tokens: false }).ids.length;
    console.log(`${Number(process.hrtime.bigint() - start) / 1e9} ${tokens}`);
  }
} else {
  const results = docs.map((doc) => {
    const ids = tokenizer.encode(doc, { add_special_tokens: false }).ids;
    return { ids, decoded: ids.length ? tokenizer.decode(ids) : "" };
  });
  fs.writeFileSync(out, JSON.stringify(results));
}
