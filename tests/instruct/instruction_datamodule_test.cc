// InstructionDataModule: prompt/completion and chat examples tokenized with a
// small Hugging Face tokenizer (the byte tokenizer's files plus <s>, </s>
// and <pad>), their exact ids, shifted labels and masks, padding,
// truncation, packing, splits, and the errors for bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "hpu/core/data/datamodule.h"
#include "instruct_support.h"

namespace hpu::core::data {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using core::testing::errorOf;
using core::testing::TempDir;
using ::testing::HasSubstr;
using Ids = std::vector<std::int64_t>;

constexpr std::int64_t kBos = 256, kEos = 257, kPad = 258, kIgnore = -100;

json readJson(const fs::path& file) {
  std::ifstream in(file);
  return json::parse(in);
}

// A tokenizer directory: byte ids 0-255 (the byte tokenizer's BPE), <s> 256,
// </s> 257, <pad> 258 (unless !with_pad), a leading <s> with special tokens.
// With add_eos: </s> after a text too (Llama's add_eos_token).
std::string writeTokenizer(const TempDir& dir, bool with_pad, const std::string& chat_template = "",
                           bool add_eos = false) {
  const fs::path out =
      dir.path() / (std::string(with_pad ? "tokenizer" : "tokenizer-no-pad") + (add_eos ? "-eos" : ""));
  fs::create_directories(out);
  makeByteTokenizer()->save(out);
  json tok = readJson(out / "tokenizer.json");
  int id = 256;
  for (const char* special : {"<s>", "</s>", "<pad>"}) {
    if (std::string(special) == "<pad>" && !with_pad) break;
    tok["added_tokens"].push_back({{"id", id++}, {"content", special}, {"single_word", false}, {"lstrip", false},
                                   {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  std::ofstream(out / "tokenizer.json") << tok.dump(2);
  json config = readJson(out / "tokenizer_config.json");
  config["bos_token"] = "<s>";
  config["eos_token"] = "</s>";
  if (with_pad) config["pad_token"] = "<pad>";
  config["add_bos_token"] = true;
  if (add_eos) config["add_eos_token"] = true;
  if (!chat_template.empty()) config["chat_template"] = chat_template;
  std::ofstream(out / "tokenizer_config.json") << config.dump(2);
  fs::remove(out / "special_tokens_map.json");
  return out.string();
}

std::unique_ptr<DataModule> instructionData(const std::string& init_args) {
  return core::testing::buildComponent<DataModule>(
      config::ComponentKind::kDataModule, "class_path: InstructionDataModule\ninit_args: " + init_args, "data");
}

struct Sample {
  Ids ids, labels, mask;
};

std::vector<Sample> samples(const Dataset& d) {
  EXPECT_EQ(d.fields().size(), 3u);
  const std::int64_t block = d.fields()[0].shape[0];
  std::vector<Sample> out;
  for (std::int64_t i = 0; i < d.size(); ++i) {
    const auto n = static_cast<std::size_t>(block);
    Sample s{Ids(n), Ids(n), Ids(n)};
    const std::int64_t index[] = {i};
    const FieldBuffer buffers[] = {{nullptr, s.ids.data()}, {nullptr, s.labels.data()}, {nullptr, s.mask.data()}};
    d.fetch(index, buffers);
    out.push_back(s);
  }
  return out;
}

Ids bytes(const std::string& s) { return Ids(s.begin(), s.end()); }
Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(InstructionDataModule, PromptTokensAreMaskedAndExamplesPaddedWithAnAttentionMask) {
  TempDir dir;
  const std::string tok = writeTokenizer(dir, true);
  const std::string train = dir.file("train.jsonl",
                                     "{\"prompt\": \"ab\", \"completion\": \"cd\"}\n\n"
                                     "{\"prompt\": \"x\", \"completion\": \"y</s>\"}\n");
  auto dm = instructionData("{train_file: " + train + ", tokenizer: " + tok + ", block_size: 8, val_split: 0}");
  dm->setup(Stage::kFit);
  const auto s = samples(*dm->dataset(Split::kTrain));
  ASSERT_EQ(s.size(), 2u);
  // <s> a b | c d </s>: the prompt (with the tokenizer's <s>) masked, the completion and eos learnt.
  EXPECT_EQ(s[0].ids, (Ids{kBos, 'a', 'b', 'c', 'd', kEos, kPad, kPad}));
  EXPECT_EQ(s[0].labels, (Ids{kIgnore, kIgnore, 'c', 'd', kEos, kIgnore, kIgnore, kIgnore}));
  EXPECT_EQ(s[0].mask, (Ids{1, 1, 1, 1, 1, 1, 0, 0}));
  // A completion that ends with the eos text ends with the eos token once.
  EXPECT_EQ(s[1].ids, (Ids{kBos, 'x', 'y', kEos, kPad, kPad, kPad, kPad}));
  EXPECT_EQ(dm->dataset(Split::kVal), nullptr);
  EXPECT_EQ(dm->dataset(Split::kPredict), nullptr);
  EXPECT_EQ(dm->tokenizer()->settings().eos_id, kEos);
}

TEST(InstructionDataModule, ATokenizerAddingEosWrapsTheWholeExampleOnce) {
  TempDir dir;
  const std::string tok = writeTokenizer(dir, true, "", true);
  const std::string train = dir.file("train.jsonl", "{\"prompt\": \"ab\", \"completion\": \"cd\"}\n");
  auto dm = instructionData("{train_file: " + train + ", tokenizer: " + tok + ", block_size: 7, val_split: 0}");
  dm->setup(Stage::kFit);
  const auto s = samples(*dm->dataset(Split::kTrain));
  // Not <s> a b </s> c d </s>: the tokenizer's </s> goes after the completion, and no second eos.
  EXPECT_EQ(s[0].ids, (Ids{kBos, 'a', 'b', 'c', 'd', kEos, kPad}));
  EXPECT_EQ(s[0].labels, (Ids{kIgnore, kIgnore, 'c', 'd', kEos, kIgnore, kIgnore}));
}

TEST(InstructionDataModule, ASentencePieceTokenizerGivesItsOwnIds) {
  // tests/tokenizers' SentencePiece-style BPE: metaspace, <s> before and </s> after a text.
  const std::string tok = std::string(HPU_SOURCE_DIR) + "/tests/tokenizers/fixtures/sentencepiece_bpe";
  TempDir dir;
  const std::string train = dir.file("train.jsonl", "{\"prompt\": \"Hello world\", \"completion\": \" the end\"}\n");
  auto dm = instructionData("{train_file: " + train + ", tokenizer: " + tok + ", block_size: 64, val_split: 0}");
  dm->setup(Stage::kFit);
  const Tokenizer& t = *dm->tokenizer();
  const Ids prompt = t.encode("Hello world", "p"), completion = t.encode(" the end", "c");
  const std::int64_t bos = *t.settings().bos_id, eos = *t.settings().eos_id;
  ASSERT_EQ(t.encodeWithSpecialTokens("Hello world", "p"), concat({{bos}, prompt, {eos}}));
  const Ids ids = concat({{bos}, prompt, completion, {eos}});
  const auto s = samples(*dm->dataset(Split::kTrain));
  EXPECT_EQ(Ids(s[0].ids.begin(), s[0].ids.begin() + static_cast<std::ptrdiff_t>(ids.size())), ids);
  Ids labels(64, kIgnore);
  for (std::size_t i = prompt.size(); i + 1 < ids.size(); ++i) labels[i] = ids[i + 1];
  EXPECT_EQ(s[0].labels, labels);
}

TEST(InstructionDataModule, WithoutAPadTokenPadsWithEos) {
  TempDir dir;
  const std::string tok = writeTokenizer(dir, false);
  const std::string train = dir.file("train.jsonl", "{\"prompt\": \"\", \"completion\": \"z\"}");
  auto dm = instructionData("{train_file: " + train + ", tokenizer: " + tok + ", block_size: 5, val_split: 0}");
  dm->setup(Stage::kFit);
  const auto s = samples(*dm->dataset(Split::kTrain));
  EXPECT_EQ(s[0].ids, (Ids{kBos, 'z', kEos, kEos, kEos}));
  EXPECT_EQ(s[0].labels, (Ids{'z', kEos, kIgnore, kIgnore, kIgnore}));
  EXPECT_EQ(s[0].mask, (Ids{1, 1, 1, 0, 0}));
}

TEST(InstructionDataModule, LongExamplesAreTruncatedAndCountedInALogLine) {
  TempDir dir;
  const std::string tok = writeTokenizer(dir, true);
  const std::string train = dir.file("train.jsonl", "{\"prompt\": \"ab\", \"completion\": \"cd\"}\n"
                                     "{\"prompt\": \"abcd\", \"completion\": \"e\"}\n"
                                     "{\"prompt\": \"a\", \"completion\": \"\"}\n");
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  auto dm = instructionData("{train_file: " + train + ", tokenizer: " + tok + ", block_size: 4, val_split: 0}");
  dm->setup(Stage::kFit);
  spdlog::default_logger()->sinks().pop_back();
  const auto s = samples(*dm->dataset(Split::kTrain));
  ASSERT_EQ(s.size(), 3u);
  // The last position's next token is cut off: it predicts nothing, as in transformers.
  EXPECT_EQ(s[0].ids, (Ids{kBos, 'a', 'b', 'c'}));
  EXPECT_EQ(s[0].labels, (Ids{kIgnore, kIgnore, 'c', kIgnore}));
  EXPECT_EQ(s[0].mask, (Ids{1, 1, 1, 1}));
  EXPECT_EQ(s[1].labels, (Ids{kIgnore, kIgnore, kIgnore, kIgnore}));
  EXPECT_EQ(s[2].ids, (Ids{kBos, 'a', kEos, kPad}));
  EXPECT_EQ(s[2].labels, (Ids{kIgnore, kEos, kIgnore, kIgnore}));
  EXPECT_THAT(log.str(), HasSubstr("InstructionDataModule: " + train +
                                   ": 2 of 3 examples are longer than data.init_args.block_size=4 and were truncated "
                                   "(the longest has 7 tokens)"));
  EXPECT_THAT(log.str(), HasSubstr(": 1 of 3 examples have no completion token within block_size=4"));
}

TEST(InstructionDataModule, PackingCutsBlocksOfAllExamplesEndToEnd) {
  TempDir dir;
  const std::string tok = writeTokenizer(dir, true);
  const std::string train = dir.file("train.jsonl", "{\"prompt\": \"ab\", \"completion\": \"cd\"}\n"
                                     "{\"prompt\": \"x\", \"completion\": \"y\"}\n");
  auto dm = instructionData("{train_file: " + train + ", tokenizer: " + tok +
                            ", block_size: 4, val_split: 0, packing: true}");
  dm->setup(Stage::kFit);
  // <s> a b c | d </s> <s> x | y </s> (left over, as group_texts drops it).
  const auto s = samples(*dm->dataset(Split::kTrain));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].ids, (Ids{kBos, 'a', 'b', 'c'}));
  EXPECT_EQ(s[0].labels, (Ids{kIgnore, kIgnore, 'c', kIgnore}));
  EXPECT_EQ(s[1].ids, (Ids{'d', kEos, kBos, 'x'}));
  EXPECT_EQ(s[1].labels, (Ids{kEos, kIgnore, kIgnore, kIgnore}));
  EXPECT_EQ(s[1].mask, (Ids{1, 1, 1, 1}));
  EXPECT_EQ(errorOf([&] {
              instructionData("{train_file: " + train + ", tokenizer: " + tok +
                              ", block_size: 64, val_split: 0, packing: true}")
                  ->setup(Stage::kFit);
            }),
            train + ": 2 examples have 10 tokens, less than one block of data.init_args.block_size=64; lower "
                    "block_size, add examples, or set packing: false");
}

const char* kChat =
    "{% for m in messages %}{{ bos_token if loop.first }}{{ m.role }}: {{ m.content }}"
    "{% if m.role == 'assistant' %}{{ eos_token }}{% endif %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}";

TEST(InstructionDataModule, ConversationsAreRenderedWithTheTokenizersChatTemplate) {
  TempDir dir;
  const std::string tok = writeTokenizer(dir, true, kChat);
  const std::string train = dir.file("train.jsonl",
      R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})");
  auto dm = instructionData("{train_file: " + train + ", tokenizer: " + tok + ", block_size: 32, val_split: 0}");
  dm->setup(Stage::kFit);
  const auto s = samples(*dm->dataset(Split::kTrain));
  ASSERT_EQ(s.size(), 1u);
  // The prompt: <s>user: hi\nassistant: ; the completion: yo</s>\n (the template's eos, no other).
  const Ids prompt = concat({{kBos}, bytes("user: hi\nassistant: ")});
  const Ids ids = concat({prompt, {'y', 'o', kEos, '\n'}});
  EXPECT_EQ(Ids(s[0].ids.begin(), s[0].ids.begin() + 25), ids);
  Ids labels(32, kIgnore);
  labels[20] = 'y';
  labels[21] = 'o';
  labels[22] = kEos;
  labels[23] = '\n';
  EXPECT_EQ(s[0].labels, labels);
  EXPECT_EQ(std::count(s[0].mask.begin(), s[0].mask.end(), 1), 25);
}

TEST(InstructionDataModule, AChatTemplateInitArgReplacesTheTokenizers) {
  TempDir dir;
  const std::string tok = writeTokenizer(dir, true);  // no chat template
  const std::string line = R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})";
  const std::string train = dir.file("train.jsonl", line + "\n");
  EXPECT_EQ(errorOf([&] {
              instructionData("{train_file: " + train + ", tokenizer: " + tok + ", val_split: 0}")->setup(Stage::kFit);
            }),
            train + ":1: a \"messages\" example needs a chat template, and the tokenizer " + tok +
                " has none (tokenizer_config.json chat_template); set data.init_args.chat_template, or write "
                "prompt/completion examples");
  EXPECT_EQ(errorOf([&] {
              instructionData("{train_file: " + train + ", tokenizer: " + tok + ", chat_template: no.jinja}")
                  ->setup(Stage::kFit);
            }),
            "data.init_args.chat_template: no.jinja is neither a template (no {% or {{) nor a file it can read: "
            "cannot read no.jinja: No such file or directory");
  const std::string file = dir.file("chat.jinja", "{% for m in messages %}[{{ m.content }}]{% endfor %}");
  auto dm = instructionData("{train_file: " + train + ", tokenizer: " + tok + ", chat_template: " + file +
                            ", block_size: 6, val_split: 0}");
  dm->setup(Stage::kFit);
  const auto s = samples(*dm->dataset(Split::kTrain));
  EXPECT_EQ(s[0].ids, (Ids{'[', 'q', ']', '[', 'a', ']'}));
  EXPECT_EQ(s[0].labels, (Ids{kIgnore, kIgnore, '[', 'a', ']', kIgnore}));
}

TEST(InstructionDataModule, ValidationIsASeededDrawOfWholeExamplesOrItsOwnFile) {
  TempDir dir;
  const std::string tok = writeTokenizer(dir, true);
  std::string lines;
  for (char c = 'a'; c < 'k'; ++c) lines += fmt::format("{{\"prompt\": \"{}\", \"completion\": \"{}\"}}\n", c, c);
  const std::string train = dir.file("train.jsonl", lines);
  auto dm = instructionData("{train_file: " + train + ", tokenizer: " + tok + ", block_size: 4, val_split: 0.2}");
  dm->setup(Stage::kFit);
  const auto t = samples(*dm->dataset(Split::kTrain)), v = samples(*dm->dataset(Split::kVal));
  ASSERT_EQ(t.size(), 8u);
  ASSERT_EQ(v.size(), 2u);
  std::set<std::int64_t> seen;
  for (const auto& s : t) seen.insert(s.ids[1]);
  for (const auto& s : v) seen.insert(s.ids[1]);
  EXPECT_EQ(seen.size(), 10u) << "every example in exactly one split";
  EXPECT_EQ(dm->dataset(Split::kTest), dm->dataset(Split::kVal));
  const std::string val = dir.file("val.jsonl", "{\"prompt\": \"v\", \"completion\": \"w\"}\n");
  auto own =
      instructionData("{train_file: " + train + ", val_file: " + val + ", tokenizer: " + tok + ", block_size: 4}");
  own->setup(Stage::kFit);
  EXPECT_EQ(own->dataset(Split::kTrain)->size(), 10);
  EXPECT_EQ(samples(*own->dataset(Split::kVal))[0].ids, (Ids{kBos, 'v', 'w', kEos}));
}

TEST(InstructionDataModule, BatchFieldsNeedNoData) {
  auto dm = instructionData("{train_file: nowhere.jsonl, block_size: 16}");
  const std::vector<Field> fields = dm->batchFields(Split::kTrain);
  ASSERT_EQ(fields.size(), 3u);
  EXPECT_EQ(fields[0], (Field{"input_ids", device::DType::kInt64, {16}}));
  EXPECT_EQ(fields[1], (Field{"labels", device::DType::kInt64, {16}}));
  EXPECT_EQ(fields[2], (Field{"attention_mask", device::DType::kInt64, {16}}));
  EXPECT_EQ(dm->loaderOptions(Split::kTrain).batch_size, 8);
  EXPECT_EQ(errorOf<UsageError>([&] { dm->setup(Stage::kFit); }),
            "data.init_args.tokenizer is not set: InstructionDataModule tokenizes with the model's tokenizer; set it "
            "to a Hugging Face model directory or tokenizer.json (or set model.init_args.pretrained)");
}

TEST(InstructionDataModule, BadLinesAreNamedByFileAndLine) {
  TempDir dir;
  const std::string tok = writeTokenizer(dir, true, kChat);
  const auto error = [&](const std::string& content) {
    const std::string train = dir.file("bad.jsonl", content);
    return errorOf([&] {
      instructionData("{train_file: " + train + ", tokenizer: " + tok + ", val_split: 0}")->setup(Stage::kFit);
    });
  };
  const std::string f = (dir.path() / "bad.jsonl").string();
  const std::string ok = "{\"prompt\": \"a\", \"completion\": \"b\"}\n";
  EXPECT_EQ(error(ok + "{\"prompt\": \"a\", \"completion\": }\n"),
            f + ":2:31: not valid JSON: syntax error while parsing value - unexpected '}'; expected '[', '{', or a "
                "literal");
  EXPECT_EQ(error(ok + ok + "{\"prompt\": \"a\"}\n"),
            f + ":3: missing \"completion\"; each line is {\"prompt\": ..., \"completion\": ...} or {\"messages\": "
                "[...]}");
  EXPECT_EQ(error("[1, 2]\n"),
            f + ":1: expected a JSON object with \"prompt\" and \"completion\", or \"messages\"; got array");
  EXPECT_EQ(error("{\"prompt\": 1, \"completion\": \"b\"}"), f + ":1: \"prompt\" must be a string, not number");
  EXPECT_EQ(error(ok + R"({"messages": [{"role": "user", "content": "q"}, {"role": "bot", "content": "a"}]})"),
            f + ":2: messages[1].role 'bot' is not a role; use system, user, assistant or tool");
  EXPECT_EQ(error(R"({"messages": [{"role": "user", "content": "q"}]})"),
            f + ":1: the conversation has no assistant message to learn");
  EXPECT_EQ(error(R"({"messages": [{"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}]})"),
            f + ":1: the conversation ends with a user message after the last assistant message; a training "
                "conversation ends with the answer");
  EXPECT_EQ(error(R"({"messages": [], "prompt": "x"})"),
            f + ":1: an example has \"messages\" or \"prompt\" and \"completion\", not both");
  EXPECT_EQ(error("\n  \n"), f + ": no examples (the file is empty); each line is a JSON object {\"prompt\": ..., "
                                 "\"completion\": ...} or {\"messages\": [...]}");
  EXPECT_EQ(errorOf([&] {
              instructionData("{train_file: " + (dir.path() / "absent.jsonl").string() + ", tokenizer: " + tok + "}")
                  ->setup(Stage::kFit);
            }),
            (dir.path() / "absent.jsonl").string() + ": no such file (data.init_args.train_file)");
}

TEST(InstructionDataModule, ATemplateRefusingAConversationNamesTheLineAndTheTemplate) {
  TempDir dir;
  const std::string tok = writeTokenizer(
      dir, true, "{% if messages[0].role == 'system' %}{{ raise_exception('no system role') }}{% endif %}x");
  const std::string train = dir.file("train.jsonl",
      R"({"messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}]})");
  EXPECT_EQ(errorOf([&] {
              instructionData("{train_file: " + train + ", tokenizer: " + tok + ", val_split: 0}")->setup(Stage::kFit);
            }),
            train + ":1: " + tok + ": chat_template:1:41: the chat template refuses the conversation: no system role");
}

}  // namespace
}  // namespace hpu::core::data
