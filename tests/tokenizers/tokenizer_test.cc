// Hugging Face tokenizers on small committed fixtures (fixtures/, written by
// fixtures/make_unit_fixtures.py): exact ids, as the Python tokenizers
// package 0.23 gives them, and the errors for what is not supported.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/config/normalize.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/yaml_io.h"
#include "hpu/core/data/datamodule.h"
#include "hpu/core/data/tokenizer.h"

namespace hpu::core::data {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<std::int64_t>;

const fs::path kFixtures = fs::path(HPU_SOURCE_DIR) / "tests/tokenizers/fixtures";

std::unique_ptr<Tokenizer> fixture(const std::string& name) { return loadTokenizer(kFixtures / name); }

struct Case {
  std::string text;
  Ids ids;
  std::string decoded;  // decode(ids), special tokens kept
};

void expectCases(const Tokenizer& t, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    EXPECT_EQ(t.encode(c.text, "test"), c.ids) << c.text;
    EXPECT_EQ(t.decode(c.ids), c.decoded) << c.text;
  }
}

fs::path tempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("hpu_tokenizer_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

TEST(ByteLevelBpe, EncodesAsGpt2) {
  const auto t = fixture("byte_bpe");
  expectCases(*t, {
                      {"hello the world's 12 123", {256, 259, 111, 258, 32, 119, 111, 114, 108, 100, 262, 32, 263, 32, 263, 51},
                       "hello the world's 12 123"},
                      {"  two  spaces\n\n\tx", {32, 257, 119, 111, 32, 32, 115, 112, 97, 99, 101, 115, 10, 10, 9, 120},
                       "  two  spaces\n\n\tx"},
                      {"a<|endoftext|>b", {97, 266, 98}, "a<|endoftext|>b"},
                      {"x  [X]  y", {120, 267, 121}, "x[X]y"},  // lstrip and rstrip take the spaces
                      {"cat cats concat", {268, 32, 99, 97, 116, 115, 32, 99, 111, 110, 99, 97, 116}, "cat cats concat"},
                      {"naïve 日本 🤷🏽‍♀️",
                       {110, 97, 195, 175, 118, 101, 32, 230, 151, 165, 230, 156, 172, 32, 240, 159, 164, 183, 240, 159,
                        143, 189, 226, 128, 141, 226, 153, 128, 239, 184, 143},
                       "naïve 日本 🤷🏽‍♀️"},
                      // \s is White_Space, as in the Rust crate: U+0085 is a space, U+FEFF is not.
                      {"a \uFEFFb", {97, 32, 239, 187, 191, 98}, "a \uFEFFb"},
                      {"a  \u0085 b", {97, 264, 194, 133, 32, 98}, "a  \u0085 b"},
                      // single_word: "_" is a word character.
                      {"_cat cat_ (cat)", {95, 99, 97, 116, 32, 99, 97, 116, 95, 32, 40, 268, 41}, "_cat cat_ (cat)"},
                  });
  EXPECT_EQ(t->encodeWithSpecialTokens("hello", "test"), (Ids{256, 259, 111}));  // ByteLevel adds nothing
  EXPECT_EQ(t->vocabSize(), 269);
  EXPECT_FALSE(t->byteLevel());
  EXPECT_EQ(t->settings().eos_token, "<|endoftext|>");
  EXPECT_EQ(t->settings().eos_id, 266);
  EXPECT_EQ(t->settings().bos_id, 266);
  EXPECT_FALSE(t->settings().pad_id);
}

TEST(ByteLevelBpe, Llama3SplitIgnoreMergesAndTemplate) {
  const auto t = fixture("llama3_style");
  expectCases(*t, {
                      {"hello HELLO'S we'RE", {256, 259, 111, 32, 72, 69, 76, 76, 79, 39, 83, 266, 101, 39, 82, 69},
                       "hello HELLO'S we'RE"},
                      {" hello hello", {268, 268}, " hello hello"},  // a whole-word token, unreachable by merges
                      {"1234567 x", {263, 51, 52, 53, 54, 55, 32, 120}, "1234567 x"},
                      {"ab  \n\n  cd", {97, 98, 264, 10, 10, 32, 32, 99, 100}, "ab  \n\n  cd"},
                      {"<|begin_of_text|>hi<|eot_id|>", {269, 104, 105, 270}, "<|begin_of_text|>hi<|eot_id|>"},
                      {"(hello)\r\n", {40, 256, 259, 111, 41, 13, 10}, "(hello)\r\n"},
                  });
  EXPECT_EQ(t->encodeWithSpecialTokens("hi", "test"), (Ids{269, 104, 105}));
  EXPECT_EQ(t->settings().bos_id, 269);
  EXPECT_EQ(t->settings().eos_id, 270);
  EXPECT_EQ(t->settings().chat_template, "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}");
}

TEST(ByteLevelBpe, Qwen2NfcSingleDigitsAndChatTokens) {
  const auto t = fixture("qwen2_style");
  expectCases(*t, {
                      {"hello the world's 12 123",
                       {256, 259, 111, 258, 266, 111, 114, 108, 100, 262, 32, 49, 50, 32, 49, 50, 51},
                       "hello the world's 12 123"},
                      // NFC composes e + U+0301 into é, whose bytes have a token; the
                      // normalized added token "café!" is found after NFC. Decoding an
                      // added token's text through ByteLevel reads é as the byte 0xE9.
                      {"cafe\u0301 cafe\u0301! caf\u00e9!", {271, 32, 275, 32, 275}, "café caf\uFFFD! caf\uFFFD!"},
                      {"<|im_start|>user\nhi<|im_end|>\n", {273, 117, 115, 101, 114, 10, 104, 105, 274, 10},
                       "<|im_start|>user\nhi<|im_end|>\n"},
                      // Canonical order and composition past a mark of a lower class
                      // (x, dot below, dot above: ẋ and the dot below), a singleton
                      // (the angstrom sign is Å), conjoining jamo into a syllable.
                      {"x\u0307\u0323 \u212B \u1112\u1161\u11AB",
                       {225, 186, 139, 204, 163, 32, 195, 133, 32, 237, 149, 156},
                       "\u1E8B\u0323 \u00C5 \uD55C"},
                  });
  EXPECT_EQ(t->encodeWithSpecialTokens("hi", "test"), (Ids{104, 105}));  // ByteLevel adds nothing
  EXPECT_EQ(t->settings().eos_id, 274);
  EXPECT_EQ(t->settings().pad_id, 272);
  EXPECT_FALSE(t->settings().bos_id);
}

TEST(SentencePieceBpe, NormalizerByteFallbackAndConfig) {
  const auto t = fixture("sentencepiece_bpe");
  expectCases(*t, {
                      {"the ab", {269, 270, 264}, "the ab"},
                      {" the  tab", {259, 269, 259, 267, 271}, " the  tab"},
                      {"é€x", {259, 266, 229, 133, 175, 123}, "é€x"},  // € and x by their bytes
                      {"<s>the</s>", {1, 269, 2}, "<s> the</s>"},
                      {"", {}, ""},
                  });
  // tokenizer_config.json's add_bos_token / add_eos_token decide, as transformers' Llama tokenizers.
  EXPECT_EQ(t->encodeWithSpecialTokens("the", "test"), (Ids{1, 269, 2}));
  const TokenizerSettings& s = t->settings();
  EXPECT_EQ(s.bos_token, "<s>");
  EXPECT_EQ(s.bos_id, 1);
  EXPECT_EQ(s.eos_id, 2);
  EXPECT_EQ(s.unk_token, "<unk>");  // from special_tokens_map.json
  EXPECT_EQ(s.unk_id, 0);
  EXPECT_EQ(s.pad_token, "");  // null in tokenizer_config.json wins over the map
  EXPECT_EQ(t->decode({229, 133}), "\xEF\xBF\xBD\xEF\xBF\xBD");  // an incomplete character: one U+FFFD per byte
  EXPECT_EQ(t->decode({269, 99999}), "the");                       // unknown ids are left out
}

TEST(SentencePieceBpe, MetaspaceAndFusedUnknown) {
  const auto t = fixture("metaspace_unk");
  expectCases(*t, {
                      {"the xyz ab", {11, 3, 0, 12, 8}, "the <unk> ab"},
                      {"zz the", {3, 0, 11}, "<unk> the"},
                      {"<s> the", {1, 11}, "<s> the"},
                      {"ab  b", {12, 8, 3, 3, 8}, "ab  b"},
                  });
  EXPECT_EQ(t->encodeWithSpecialTokens("the", "test"), (Ids{1, 11}));
}

TEST(SentencePieceBpe, GemmaNoDummyPrefixAndAddedRuns) {
  const auto t = fixture("gemma_style");
  expectCases(*t, {
                      {"the ab", {261, 272, 274, 265}, "the ab"},  // no "▁" before the text
                      {" the  tab", {273, 260, 271, 275}, " the  tab"},
                      {"<start_of_turn>user\nthe<end_of_turn>\n", {269, 121, 119, 263, 118, 267, 261, 272, 270, 267},
                       "<start_of_turn>user\nthe<end_of_turn>\n"},
                      // Added runs of "\n" and "▁" (normalized false: "▁" in the input, not spaces).
                      {"a\n\n\n\nb", {264, 282, 267, 265}, "a\n\n\n\nb"},
                      {"\u2581\u2581\u2581the   ab", {283, 261, 272, 276, 274, 265}, "   the   ab"},
                      {"\u00e9x z", {199, 173, 124, 260, 126}, "\u00e9x z"},
                      {"", {}, ""},
                  });
  EXPECT_EQ(t->encodeWithSpecialTokens("the ab", "test"), (Ids{2, 261, 272, 274, 265}));  // add_bos_token
  const TokenizerSettings& s = t->settings();
  EXPECT_EQ(s.bos_id, 2);
  EXPECT_EQ(s.eos_id, 1);
  EXPECT_EQ(s.pad_id, 0);
  EXPECT_EQ(s.unk_id, 3);
}

TEST(SentencePieceBpe, SplitOnAStringByEveryBehavior) {
  // gemma_style without its normalizer, so that its Split on " " finds spaces.
  auto json = nlohmann::json::parse(readFile((kFixtures / "gemma_style/tokenizer.json").string()));
  json["normalizer"] = nullptr;
  const fs::path dir = tempDir("split");
  fs::create_directories(dir);
  const std::pair<std::string, Ids> cases[] = {
      {"Removed", {275, 261, 275, 261, 266}},
      {"Isolated", {275, 268, 268, 261, 275, 268, 261, 266, 268}},
      {"MergedWithPrevious", {275, 268, 268, 261, 275, 268, 261, 279}},
      {"MergedWithNext", {275, 268, 281, 275, 281, 266, 268}},
      {"Contiguous", {275, 280, 261, 275, 268, 261, 266, 268}},
  };
  for (const auto& [behavior, ids] : cases) {
    json["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", behavior}, {"invert", false}};
    writeFileAtomically((dir / "tokenizer.json").string(), json.dump());
    EXPECT_EQ(loadTokenizer(dir / "tokenizer.json")->encode("ab  tab tc ", "test"), ids) << behavior;
  }
  json["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"},
                           {"invert", true}};
  writeFileAtomically((dir / "tokenizer.json").string(), json.dump());
  EXPECT_EQ(loadTokenizer(dir / "tokenizer.json")->encode("ab  tab tc ", "test"), (Ids{275, 268, 281, 275, 281, 266, 268}));
  fs::remove_all(dir);
}

TEST(PretrainedTokenizer, RefusesInvalidUtf8) {
  const auto t = fixture("byte_bpe");
  try {
    t->encode("ab\xC3(", "corpus.txt");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(),
                 "corpus.txt: byte 0xc3 at offset 2 is not valid UTF-8; a Hugging Face tokenizer reads UTF-8 text "
                 "(convert the file, e.g. with iconv)");
  }
}

TEST(PretrainedTokenizer, SaveWritesBackWhatItRead) {
  const fs::path dir = tempDir("save");
  fixture("sentencepiece_bpe")->save(dir);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
    EXPECT_EQ(readFile((dir / file).string()), readFile((kFixtures / "sentencepiece_bpe" / file).string())) << file;
  EXPECT_EQ(loadTokenizer(dir / "tokenizer.json")->encode("the ab", "test"), (Ids{269, 270, 264}));
  fs::remove_all(dir);
}

TEST(PretrainedTokenizer, Gpt2VocabAndMerges) {
  // vocab.json + merges.txt of the byte_bpe fixture: the same tokenizer but
  // for its non-special added tokens.
  const fs::path dir = tempDir("gpt2_pair");
  fs::create_directories(dir);
  const auto json = nlohmann::json::parse(readFile((kFixtures / "byte_bpe/tokenizer.json").string()));
  auto vocab = json["model"]["vocab"];
  vocab["<|endoftext|>"] = 266;
  std::ofstream(dir / "vocab.json") << vocab.dump();
  std::ofstream merges(dir / "merges.txt");
  merges << "#version: 0.2\n";
  for (const auto& m : json["model"]["merges"]) merges << m.get<std::string>() << "\n";
  merges.close();
  const auto t = loadTokenizer(dir);
  EXPECT_EQ(t->encode("hello the world's<|endoftext|>", "test"),
            (Ids{256, 259, 111, 258, 32, 119, 111, 114, 108, 100, 262, 266}));
  t->save(dir / "saved");
  EXPECT_EQ(loadTokenizer(dir / "saved" / "tokenizer.json")->encode("hello the", "test"), (Ids{256, 259, 111, 258}));
  fs::remove_all(dir);
}

std::string loadError(const fs::path& path) {
  try {
    loadTokenizer(path);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(loaded)";
}

TEST(PretrainedTokenizer, RefusesWhatItDoesNotSupportByName) {
  const fs::path bad = kFixtures / "bad";
  const std::string p = bad.string() + "/";
  EXPECT_EQ(loadError(bad / "wordpiece.json"),
            p + "wordpiece.json: model.type: WordPiece is not supported; hpu-train reads BPE models (WordPiece, "
                "Unigram and WordLevel are not implemented)");
  EXPECT_EQ(loadError(bad / "nfkc.json"),
            p + "nfkc.json: normalizer.type: NFKC is not supported; hpu-train reads the normalizers NFC, NFD, "
                "Prepend, Replace (String pattern) and Sequence");
  EXPECT_EQ(loadError(bad / "regex.json"),
            p + "regex.json: pre_tokenizer.pattern.Regex: the regex \"\\\\w+\" is not supported; hpu-train reads "
                "GPT-2's, Llama 3's and Qwen2's");
  EXPECT_EQ(loadError(bad / "merge.json"),
            p + "merge.json: model: the result of merge 0 ('a b') 'ab' is not in the vocabulary");
  EXPECT_EQ(loadError(bad / "syntax.json"), p + "syntax.json:3:27: not valid JSON: syntax error while parsing "
                                                "object key - unexpected ','; expected string literal");
  EXPECT_THAT(loadError(bad / "missing"), testing::HasSubstr("missing: does not exist"));
  // Values of the wrong type are named by key, never an unexplained crash.
  const fs::path dir = tempDir("shapes");
  const std::pair<std::string, std::string> shapes[] = {
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": "a b"}})", "model.merges: must be a list"},
      {R"({"model": {"vocab": [], "merges": []}})", "model.vocab: must be an object of token: id"},
      {R"({"added_tokens": [{"id": "1", "content": "x"}], "model": {}})", "added_tokens[0].id: must be an integer"},
      {R"({"decoder": {"type": "Sequence", "decoders": 3}, "model": {"vocab": {}, "merges": []}})",
       "decoder.decoders: must be a list"},
      {R"([1, 2])", "(top level): must be a JSON object"},
  };
  for (const auto& [text, error] : shapes) {
    writeFileAtomically((dir / "tokenizer.json").string(), text);
    EXPECT_EQ(loadError(dir / "tokenizer.json"), (dir / "tokenizer.json").string() + ": " + error) << text;
  }
  fs::remove_all(dir);
  EXPECT_THAT(loadError(bad), testing::HasSubstr("has no tokenizer.json, nor GPT-2's vocab.json and merges.txt"));
}

TEST(ByteTokenizer, SavesAMergelessByteLevelBpe) {
  const fs::path dir = tempDir("byte");
  makeByteTokenizer()->save(dir);
  const auto t = loadTokenizer(dir);
  const std::string text = "héllo \x01 日本 🤷\n\t  x";
  Ids bytes;
  for (unsigned char c : text) bytes.push_back(c);
  EXPECT_EQ(t->encode(text, "test"), bytes);
  EXPECT_EQ(t->decode(bytes), text);
  EXPECT_EQ(t->vocabSize(), 256);
  fs::remove_all(dir);
}

TEST(CharTokenizer, SavesAMergelessBpeOverItsCharacters) {
  const fs::path dir = tempDir("char");
  const std::string corpus = "hello wörld\n日本";
  const auto chars = makeCharTokenizer(corpus, "corpus");
  chars->save(dir);
  const auto t = loadTokenizer(dir);
  EXPECT_EQ(t->encode("wörld 日\n", "test"), chars->encode("wörld 日\n", "test"));
  EXPECT_EQ(t->decode(chars->encode("hello 本", "test")), "hello 本");
  EXPECT_EQ(t->vocabSize(), chars->vocabSize());
  fs::remove_all(dir);
}

// TextDataModule with tokenizer: PATH.
std::unique_ptr<DataModule> textData(const std::string& init_args) {
  const config::Node node =
      config::loadYamlString("class_path: TextDataModule\ninit_args: " + init_args, "test.yaml");
  std::vector<std::string> problems;
  const config::Node canonical =
      config::normalize(node, config::Type::component({config::ComponentKind::kDataModule}), "data", problems);
  if (!problems.empty()) throw ConfigError(problems);
  return config::ComponentFactory<DataModule>::instance().create(canonical, "data");
}

TEST(TextDataModule, TokenizesWithAHuggingFaceTokenizer) {
  const fs::path dir = tempDir("text");
  fs::create_directories(dir);
  const std::string corpus = (dir / "corpus.txt").string();
  const std::string text = "the ab the ab the ab the ab the ab";
  writeFileAtomically(corpus, text);
  auto data = textData("{path: " + corpus + ", tokenizer: " + (kFixtures / "sentencepiece_bpe").string() +
                       ", block_size: 2, val_split: 0.25}");
  data->setup(Stage::kFit);
  EXPECT_EQ(data->tokenizer()->settings().bos_id, 1);
  EXPECT_EQ(data->tokenizer()->encode("the ab", "test"), (Ids{269, 270, 264}));
  // 15 tokens: 12 of training text and 3 of validation text, in blocks of 2 + 1.
  EXPECT_EQ(data->tokenizer()->encode(text, "test").size(), 15u);
  EXPECT_EQ(data->dataset(Split::kTrain)->size(), 5);
  EXPECT_EQ(data->dataset(Split::kVal)->size(), 1);
  try {
    textData("{path: " + corpus + ", tokenizer: /no/such/tokenizer.json}")->setup(Stage::kFit);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(),
                 "data.init_args.tokenizer: /no/such/tokenizer.json: does not exist; give a Hugging Face model "
                 "directory (with tokenizer.json, or vocab.json and merges.txt) or a tokenizer.json file (the value "
                 "is byte, char, or a Hugging Face model directory or tokenizer.json)");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hpu::core::data
