// Encode speed of hpu-train's tokenizers against the reference,
// @huggingface/tokenizers, in one run: both stay loaded (tokenize_tool
// --serve, reference_encode.mjs --serve) and encode the same documents in
// turn, interleaved, ROUNDS times each; the medians and the spread
// (min..max) of the seconds per pass are compared (warm: both keep a word
// cache). The first pass of each, with empty caches, is shown apart.
// Needs the reference data: tests/tokenizers/make_fixtures.sh [BUILD_DIR].
// Usage: node bench/tokenizers/bench_tokenizers.mjs [BUILD_DIR] [ROUNDS]
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const build = path.resolve(process.argv[2] ?? path.join(repo, "build"));
const rounds = Number(process.argv[3] ?? 9);
const cache = path.join(build, "tokenizer-fixtures");
const docs = path.join(cache, "documents.json");
if (!fs.existsSync(docs)) {
  console.error(`no ${docs}: run tests/tokenizers/make_fixtures.sh first`);
  process.exit(2);
}
const bytes = JSON.parse(fs.readFileSync(docs, "utf8")).reduce((n, d) => n + Buffer.byteLength(d), 0);

// A process that answers each line on stdin with "<seconds> <tokens>".
function server(command, args) {
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    async pass() {
      child.stdin.write("go\n");
      const { value } = await lines.next();
      const [seconds, tokens] = value.split(" ").map(Number);
      return { seconds, tokens };
    },
    close() { child.stdin.end(); },
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const tool = path.join(build, "tokenize_tool");
console.log(`${bytes} bytes of documents, ${rounds} interleaved passes each (after one warm-up pass)`);
console.log("tokenizer          hpu-train s (min..max)       reference s (min..max)      speed-up (median)" +
            "  [MB/s]             first pass: hpu-train, reference, speed-up");
for (const name of ["gpt2", "llama2", "llama2-metaspace", "llama3"]) {
  const dir = path.join(cache, name);
  const ours = server(tool, [dir, docs, "--serve"]);
  const ref = server("node", [path.join(repo, "tests/tokenizers/reference_encode.mjs"), path.join(cache, "npm"), dir, docs, "--serve"]);
  const a = await ours.pass(), b = await ref.pass();  // first pass: empty caches, JIT warm-up
  if (a.tokens !== b.tokens) console.log(`${name}: token counts differ (${a.tokens} vs ${b.tokens})`);
  const t = { ours: [], ref: [] };
  for (let i = 0; i < rounds; ++i) {
    if (i % 2 === 0) { t.ours.push((await ours.pass()).seconds); t.ref.push((await ref.pass()).seconds); }
    else { t.ref.push((await ref.pass()).seconds); t.ours.push((await ours.pass()).seconds); }
  }
  ours.close();
  ref.close();
  const fmt = (xs) => `${median(xs).toFixed(4)} (${Math.min(...xs).toFixed(4)}..${Math.max(...xs).toFixed(4)})`;
  console.log(`${name.padEnd(18)} ${fmt(t.ours).padEnd(28)} ${fmt(t.ref).padEnd(27)} ${(median(t.ref) / median(t.ours)).toFixed(1)}x` +
              `  [${(bytes / median(t.ours) / 1e6).toFixed(1)} vs ${(bytes / median(t.ref) / 1e6).toFixed(1)}]`.padEnd(20) +
              `  ${a.seconds.toFixed(4)} s, ${b.seconds.toFixed(4)} s, ${(b.seconds / a.seconds).toFixed(1)}x`);
}
