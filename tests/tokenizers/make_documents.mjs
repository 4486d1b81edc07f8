// Writes the documents the reference agreement test encodes (a JSON list of
// strings, more than 1 MB in all): Debian's fortunes, C++ headers from
// /usr/include, and generated text mixing scripts (CJK, Hangul, Arabic,
// Hebrew, Cyrillic, Greek, Devanagari, Thai), accents precomposed and
// combining (and what NFC composes, reorders or leaves apart), emoji with modifiers, ZWJ sequences, flags and keycaps, runs of
// whitespace of every kind, digit runs in several scripts, contractions in
// any case, and the special tokens' strings inside text. Deterministic.
// Usage: node make_documents.mjs OUT.json
import fs from "node:fs";
import path from "node:path";

const out = process.argv[2];
const docs = [];

// Fortunes, grouped into documents of about 8 KiB.
{
  const dir = "/usr/share/games/fortunes";
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
  let budget = 700 * 1024, doc = "";
  for (const name of files) {
    const file = path.join(dir, name);
    if (name.endsWith(".dat") || fs.lstatSync(file).isSymbolicLink() || !fs.statSync(file).isFile()) continue;
    for (const fortune of fs.readFileSync(file, "utf8").split("\n%\n")) {
      doc += fortune + "\n%\n";
      if (doc.length > 8192) { docs.push(doc); budget -= doc.length; doc = ""; }
      if (budget <= 0) break;
    }
    if (budget <= 0) break;
  }
  if (doc) docs.push(doc);
}

// C++ headers, one document per file (at most 32 KiB of it).
{
  const dir = "/usr/include/c++/12/bits";
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
  let budget = 400 * 1024;
  for (const name of files) {
    if (budget <= 0) break;
    const text = fs.readFileSync(path.join(dir, name), "utf8").slice(0, 32768);
    docs.push(text);
    budget -= text.length;
  }
}

// Generated text from a fixed seed (mulberry32).
let seed = 20261127;
function random() {
  seed = (seed + 0x6D2B79F5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (list) => list[Math.floor(random() * list.length)];
const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));
const words = {
  latin: ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Hello", "WORLD", "tokenizer", "Gaudi",
          "training", "naïve", "café", "résumé", "über", "Straße", "façade", "jalapeño", "Ångström", "coöperate",
          "e\u0301te\u0301", "n\u0303o", "Việt", "Nguyễn", "Łódź", "Žižek", "İstanbul", "ǅemal", "ﬁnance"],
  cjk: ["日本語", "東京", "こんにちは", "カタカナ", "ひらがな", "中文", "汉字", "你好世界", "漢字", "機械学習", "大規模言語モデル", "ｶﾀｶﾅ"],
  hangul: ["안녕하세요", "한국어", "토크나이저", "세계"],
  arabic: ["مرحبا", "العالم", "السَّلَامُ", "عَلَيْكُمْ", "الذكاء", "الاصطناعي"],
  hebrew: ["שלום", "עולם", "בְּרֵאשִׁית"],
  cyrillic: ["Привет", "мир", "ёжик", "Щука", "українська", "ЖЖЖ"],
  greek: ["Γειά", "σου", "Κόσμε", "λόγος", "ΑΘΗΝΑ", "ϐϑϕ"],
  devanagari: ["नमस्ते", "दुनिया", "हिन्दी", "क्षत्रिय"],
  thai: ["สวัสดี", "ชาวโลก", "ภาษาไทย"],
  // Canonical composition and ordering: marks in either order, singletons,
  // conjoining jamo, composition exclusions, a leading mark.
  decomposed: ["A\u030a", "\u212b", "\u2126", "\u1100\u1161\u11a8", "\uac00\u11a8", "\u1112\u1161\u11ab",
               "a\u0323\u0302", "a\u0302\u0323", "q\u0307\u0323", "\u0958", "\u0915\u093c", "\uf900",
               "\u0344", "\u1e9b\u0323", "A\u0301\u0301", "\u00c5\u0300", "\u05d1\u05bc", "\u0627\u0653",
               "\u00e7\u0301", "\u0301x", "\u304b\u3099", "\u30cf\u309a", "o\u0308\u0304", "\u1f00\u0345"],
};
const emoji = ["😀", "🤷🏽‍♀️", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "1️⃣", "#️⃣", "❤️", "👍🏿", "🧑‍💻", "🐕‍🦺", "☕", "✨", "🫠", "©", "™"];
const spaces = [" ", "  ", "   ", "        ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n", "\n ", " \t \n  ",
                "\u00a0", "\u3000", "\u2003", "\u2009", "\u202f", "\u000b", "\u000c", "  \r\n\r\n  ",
                "\u2028", "\u200b", "\u1680"];
// Not U+0085 and U+FEFF: the reference's GPT-2 pattern is a JavaScript
// regex, whose \s takes U+FEFF and not U+0085, unlike the Rust crate's
// (Oniguruma's White_Space), which hpu-train follows; check_python_tokenizers.py
// covers them.
const digits = () => pick([
  () => String(int(0, 9)), () => String(int(10, 99999)), () => String(int(0, 1e9)) + String(int(0, 1e9)),
  () => `${int(1, 999)},${int(100, 999)}.${int(0, 99)}`, () => "٠١٢٣٤٥٦٧٨٩".slice(0, int(1, 10)),
  () => "１２３４５".slice(0, int(1, 5)), () => "²³½⅓Ⅻⅻ", () => "०१२३", () => `v${int(1, 9)}.${int(0, 20)}.${int(0, 99)}`,
])();
const special = ["<s>", "</s>", "<unk>", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>",
                 "<|endoftext", "<|reserved_special_token_5|>", "<0x0A>", "▁", "▁▁hello", "<s><s>", "</s>\n",
                 "<|im_start|>", "<|im_end|>\n", "<|im_start|>assistant\n", "<tool_call>", "<|fim_prefix|>",
                 "<bos>", "<eos>", "<pad>", "<start_of_turn>user\n", "<end_of_turn>\n", "<unused7>", "<mask>",
                 "[@BOS@]", "<table><tr><td>", "</b>", "▁▁▁▁", "\t\t\t\t"];
const contractions = ["'s", "'S", "'t", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'Ll", "'d", "'D",
                      "''s", "' s", "’s", "don't", "I'M", "you'Ve", "'ſ", "'\u017fomething", "'K"];
const punctuation = ["!", "?", "...", "—", "–", "“", "”", "«", "»", "(", ")", "[", "]", "{", "}", "::", "->", "=>",
                     "!=", "&&", "||", "%", "$", "€", "£", "¥", "@", "#", "~", "`", "^", "|", "\\", "/", "*", ";", "\"",
                     "¡", "¿", "…", "·", "†", "\u0000", "\u0007", "\u001b"];
function segment() {
  const r = random();
  if (r < 0.40) return pick(words[pick(Object.keys(words))]);
  if (r < 0.55) return pick(spaces);
  if (r < 0.65) return digits();
  if (r < 0.73) return pick(emoji);
  if (r < 0.78) return pick(special);
  if (r < 0.85) return pick(contractions);
  return pick(punctuation);
}
let generated = 0;
while (generated < 300 * 1024) {
  let doc = "";
  const n = int(1, 3) === 1 ? int(1, 20) : int(50, 2000);
  for (let i = 0; i < n; ++i) doc += segment() + (random() < 0.6 ? " " : "");
  docs.push(doc);
  generated += Buffer.byteLength(doc);
}
docs.push("", " ", "\n", "  ", "x", "<s>", "<|endoftext|>", "▁", " <s> ", "\t\t", "'s", "12345678901234567890");

fs.writeFileSync(out, JSON.stringify(docs));
const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d), 0);
console.error(`${out}: ${docs.length} documents, ${bytes} bytes`);
