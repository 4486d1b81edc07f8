// InstructionDataModule: supervised fine-tuning data from JSONL files, one
// example a line:
//   {"prompt": "...", "completion": "..."}
//   {"messages": [{"role": "system" | "user" | "assistant" | "tool", "content": "..."}, ...]}
// The loss is taken on the completion only: prompt tokens get the label -100
// (transformers' ignore index), as optimum-habana's run_lora_clm.py and TRL
// do. A sample is one example padded to block_size (packing: false), or a
// block_size cut of all examples laid end to end (packing: true, as
// run_clm's group_texts). Fields: "input_ids", "labels" (already shifted:
// labels[t] is the token after input_ids[t], or -100) and "attention_mask"
// (1 on tokens, 0 on padding), int64 [block_size]. The built-in models
// attend causally and read no attention_mask: padding is on the right, so
// no real token attends to a pad, and pads are never labels; the mask is
// not needed for a correct loss and is there for models that take one.
// Packed blocks attend across the examples they hold, as group_texts'.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>

#include "batching.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/base/random.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/data/chat_template.h"
#include "hpu/core/data/token_blocks.h"

namespace hpu::core::data {
namespace {

namespace fs = std::filesystem;
using config::Params;
using config::Type;
using json = nlohmann::ordered_json;

// Whether data.init_args.chat_template holds a template's text (a Jinja tag
// or expression) rather than the path of a file holding one.
bool isTemplateText(std::string_view value) {
  return value.find("{%") != std::string_view::npos || value.find("{{") != std::string_view::npos;
}

constexpr std::int64_t kIgnoreIndex = -100;  // transformers' label of tokens outside the loss
constexpr std::array kRoles = {"system", "user", "assistant", "tool"};

std::vector<Field> instructionFields(std::int64_t block_size) {
  std::vector<Field> fields = tokenBlockFields(block_size);
  fields.push_back({"attention_mask", device::DType::kInt64, {block_size}});
  return fields;
}

// Tokenized examples: their tokens end to end, whether each token is in the
// loss (a completion token), and where each example starts.
struct Examples {
  std::vector<std::int64_t> tokens;
  std::vector<std::uint8_t> trained;
  std::vector<std::size_t> starts;  // one per example, then tokens.size()

  std::size_t count() const { return starts.empty() ? 0 : starts.size() - 1; }
  std::size_t length(std::size_t i) const { return starts[i + 1] - starts[i]; }
  void add(const std::vector<std::int64_t>& ids, std::size_t prompt_tokens) {
    if (starts.empty()) starts.push_back(0);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    for (std::size_t k = 0; k < ids.size(); ++k) trained.push_back(k >= prompt_tokens ? 1 : 0);
    starts.push_back(tokens.size());
  }
  // The examples `which`, in that order.
  Examples select(const std::vector<std::int64_t>& which) const {
    Examples out;
    for (const std::int64_t i : which) {
      const auto u = static_cast<std::size_t>(i);
      if (out.starts.empty()) out.starts.push_back(0);
      out.tokens.insert(out.tokens.end(), tokens.begin() + static_cast<std::ptrdiff_t>(starts[u]),
                        tokens.begin() + static_cast<std::ptrdiff_t>(starts[u + 1]));
      out.trained.insert(out.trained.end(), trained.begin() + static_cast<std::ptrdiff_t>(starts[u]),
                         trained.begin() + static_cast<std::ptrdiff_t>(starts[u + 1]));
      out.starts.push_back(out.tokens.size());
    }
    return out;
  }
};

// Samples of block_size positions over a token stream: sample i is the
// tokens [begin, begin + length) (length <= block_size), padded after them.
class InstructionSamples final : public Dataset {
 public:
  struct Span {
    std::size_t begin, length;
  };
  InstructionSamples(Examples examples, std::vector<Span> spans, std::int64_t block_size, std::int64_t pad_id)
      : examples_(std::move(examples)),
        spans_(std::move(spans)),
        block_(block_size),
        pad_id_(pad_id),
        fields_(instructionFields(block_size)) {}

  std::int64_t size() const override { return static_cast<std::int64_t>(spans_.size()); }
  const std::vector<Field>& fields() const override { return fields_; }

  // labels[t] = tokens[t + 1] when that token is in the span and trained;
  // -100 otherwise (prompt tokens, padding, and the span's last position,
  // whose next token it does not hold: transformers shifts labels inside
  // the model, so a block's last position predicts nothing there either).
  void fetch(std::span<const std::int64_t> indices, std::span<const FieldBuffer> out) const override {
    const auto block = static_cast<std::size_t>(block_);
    for (std::size_t i = 0; i < indices.size(); ++i) {
      const Span& s = spans_[static_cast<std::size_t>(indices[i])];
      std::int64_t* ids = out[0].ints + i * block;
      std::int64_t* labels = out[1].ints + i * block;
      std::int64_t* mask = out[2].ints + i * block;
      for (std::size_t t = 0; t < block; ++t) {
        const bool token = t < s.length;
        ids[t] = token ? examples_.tokens[s.begin + t] : pad_id_;
        mask[t] = token ? 1 : 0;
        labels[t] = t + 1 < s.length && examples_.trained[s.begin + t + 1] ? examples_.tokens[s.begin + t + 1]
                                                                           : kIgnoreIndex;
      }
    }
  }

 private:
  Examples examples_;
  std::vector<Span> spans_;
  std::int64_t block_, pad_id_;
  std::vector<Field> fields_;
};

class InstructionDataModule final : public DataModule {
 public:
  explicit InstructionDataModule(const Params& p)
      : train_file_(p.getString("train_file")),
        val_file_(p.has("val_file") ? std::optional(p.getString("val_file")) : std::nullopt),
        tokenizer_path_(p.has("tokenizer") ? std::optional(p.getString("tokenizer")) : std::nullopt),
        chat_template_arg_(p.has("chat_template") ? std::optional(p.getString("chat_template")) : std::nullopt),
        block_size_(p.getInt("block_size")),
        val_split_(p.getFloat("val_split")),
        packing_(p.getBool("packing")),
        batching_(p) {}

  void setup(Stage) override {
    if (train_) return;
    setupTokenizer();
    const TokenizerSettings& s = tokenizer_->settings();
    if (!s.eos_id)
      spdlog::warn("InstructionDataModule: the tokenizer {} has no eos token: prompt/completion examples end without "
                   "one, and generation will not learn where an answer ends",
                   *tokenizer_path_);
    // Right padding: pad, else eos (transformers' usual stand-in), else 0.
    // Padding is never a label, and with right padding and causal attention
    // no real token attends to it, so its id does not change the loss.
    pad_id_ = s.pad_id.value_or(s.eos_id.value_or(0));
    // What the post-processor puts around a text (Llama's <s> before it; with
    // add_eos_token, </s> after it), from a probe: the same around any text.
    const std::vector<std::int64_t> plain = tokenizer_->encode("a", "probe");
    const std::vector<std::int64_t> wrapped = tokenizer_->encodeWithSpecialTokens("a", "probe");
    const auto at = std::search(wrapped.begin(), wrapped.end(), plain.begin(), plain.end());
    special_prefix_.assign(wrapped.begin(), at == wrapped.end() ? wrapped.begin() : at);
    special_suffix_.assign(at == wrapped.end() ? wrapped.end() : at + static_cast<std::ptrdiff_t>(plain.size()),
                           wrapped.end());

    Examples train = readExamples(train_file_);
    Examples val;
    if (val_file_) {
      val = readExamples(*val_file_);
    } else {
      const auto n = static_cast<std::int64_t>(train.count());
      const auto n_val = static_cast<std::int64_t>(static_cast<double>(n) * val_split_);
      if (n_val > 0 && n_val == n)
        throw DataError(fmt::format("data.init_args.val_split={} leaves no training example of the {} in {}; lower it",
                                    val_split_, n, train_file_));
      if (n_val > 0) {
        // A seeded draw of whole examples, before packing: no example is in both splits.
        Generator g(batching_.seed, RandomStream::kSplit);
        const std::vector<std::int64_t> perm = randomPermutation(n, g);
        val = train.select(std::vector<std::int64_t>(perm.end() - n_val, perm.end()));
        train = train.select(std::vector<std::int64_t>(perm.begin(), perm.end() - n_val));
      }
    }
    train_ = samples(std::move(train), train_file_);
    if (val.count() > 0) val_ = samples(std::move(val), val_file_.value_or(train_file_ + " (val_split)"));
  }

  std::shared_ptr<const Dataset> dataset(Split split) const override {
    switch (split) {
      case Split::kTrain: return train_;
      case Split::kVal:
      case Split::kTest: return val_;
      case Split::kPredict: return nullptr;  // a language model predicts from its prompts
    }
    return nullptr;
  }
  LoaderOptions loaderOptions(Split split) const override { return batching_.options(split); }
  std::int64_t* batchSizeArg(std::string_view arg_name) override { return batching_.batchSizeArg(arg_name); }
  std::shared_ptr<const Tokenizer> tokenizer() const override { return tokenizer_; }
  void setupTokenizer() override {
    if (tokenizer_) return;
    if (!tokenizer_path_)
      throw UsageError(
          "data.init_args.tokenizer is not set: InstructionDataModule tokenizes with the model's tokenizer; set it to "
          "a Hugging Face model directory or tokenizer.json (or set model.init_args.pretrained)");
    tokenizer_ = loadTokenizer(*tokenizer_path_);
  }
  std::string name() const override { return "InstructionDataModule"; }
  std::vector<Field> batchFields(Split) const override { return instructionFields(block_size_); }

 private:
  // The chat template of "messages" examples: data.init_args.chat_template
  // (its text, or a file holding it), else the tokenizer's. Parsed once.
  const ChatTemplate& chatTemplate(const std::string& file, std::size_t line) {
    if (template_) return *template_;
    if (chat_template_arg_) {
      const bool is_file = !isTemplateText(*chat_template_arg_);
      std::string source = *chat_template_arg_;
      if (is_file) {
        try {
          source = readFile(*chat_template_arg_);
        } catch (const Error& e) {
          throw DataError(fmt::format("data.init_args.chat_template: {} is neither a template (no {{% or {{{{) nor a "
                                      "file it can read: {}",
                                      *chat_template_arg_, e.what()));
        }
      }
      template_.emplace(source, is_file ? *chat_template_arg_ : "data.init_args.chat_template");
    } else {
      const std::string& source = tokenizer_->settings().chat_template;
      if (source.empty())
        throw DataError(fmt::format(
            "{}:{}: a \"messages\" example needs a chat template, and the tokenizer {} has none (tokenizer_config.json "
            "chat_template); set data.init_args.chat_template, or write prompt/completion examples",
            file, line, *tokenizer_path_));
      template_.emplace(source, *tokenizer_path_ + ": chat_template");
    }
    return *template_;
  }

  // The examples of a JSONL file, tokenized; DataError "file:line: ..." for
  // what is malformed.
  Examples readExamples(const std::string& file) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec))
      throw DataError(fmt::format("{}: no such file (data.init_args.{})", file,
                                  file == train_file_ ? "train_file" : "val_file"));
    const std::string text = readFile(file);
    Examples out;
    std::size_t line_no = 0, start = 0;
    while (start < text.size()) {
      std::size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string_view line(text.data() + start, end - start);
      start = end + 1;
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      readExample(file, line_no, line, out);
    }
    if (out.count() == 0)
      throw DataError(fmt::format("{}: no examples (the file is empty); each line is a JSON object "
                                  "{{\"prompt\": ..., \"completion\": ...}} or {{\"messages\": [...]}}",
                                  file));
    return out;
  }

  void readExample(const std::string& file, std::size_t line_no, std::string_view line, Examples& out) {
    const auto fail = [&](const std::string& message) {
      return DataError(fmt::format("{}:{}: {}", file, line_no, message));
    };
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      // nlohmann's message after its "[json.exception...] parse error at line 1, column N: ".
      std::string reason = e.what();
      const std::size_t at = reason.find(": ", reason.find("column"));
      if (at != std::string::npos) reason = reason.substr(at + 2);
      throw DataError(fmt::format("{}:{}:{}: not valid JSON: {}", file, line_no, e.byte, reason));
    }
    if (!j.is_object())
      throw fail(fmt::format("expected a JSON object with \"prompt\" and \"completion\", or \"messages\"; got {}",
                             j.type_name()));
    const bool chat = j.contains("messages");
    if (chat && (j.contains("prompt") || j.contains("completion")))
      throw fail("an example has \"messages\" or \"prompt\" and \"completion\", not both");
    std::vector<std::int64_t> ids;
    std::size_t prompt_tokens = 0;
    if (chat) {
      const auto [prompt, completion] = renderConversation(file, line_no, j["messages"], fail);
      // The whole conversation tokenized at once, as apply_chat_template
      // tokenizes it; the prompt is the tokens it shares with the prompt's
      // own tokens (all of them, unless a token spans the boundary).
      ids = tokenizer_->encode(prompt + completion, file + ":" + std::to_string(line_no));
      const std::vector<std::int64_t> prompt_ids = tokenizer_->encode(prompt, file + ":" + std::to_string(line_no));
      while (prompt_tokens < std::min(ids.size(), prompt_ids.size()) && ids[prompt_tokens] == prompt_ids[prompt_tokens])
        ++prompt_tokens;
    } else {
      for (const char* key : {"prompt", "completion"}) {
        if (!j.contains(key))
          throw fail(fmt::format("missing \"{}\"; each line is {{\"prompt\": ..., \"completion\": ...}} or "
                                 "{{\"messages\": [...]}}",
                                 key));
        if (!j[key].is_string()) throw fail(fmt::format("\"{}\" must be a string, not {}", key, j[key].type_name()));
      }
      // The tokenizer's special tokens around the example (what
      // encodeWithSpecialTokens adds: Llama's <s> before; </s> after when
      // the tokenizer adds eos), the prompt and the completion each
      // encoded alone, then eos unless the example already ends with it
      // (run_lora_clm.py's rule). run_lora_clm.py and TRL tokenize prompt +
      // completion in one piece and mask as many tokens as the prompt alone
      // has; tokenizing the parts apart gives the same ids unless a token
      // would span the boundary, and then gives the prompt exactly as the
      // model sees it when it generates from it.
      const std::string origin = file + ":" + std::to_string(line_no);
      ids = special_prefix_;
      const std::vector<std::int64_t> prompt = tokenizer_->encode(j["prompt"].get<std::string>(), origin);
      ids.insert(ids.end(), prompt.begin(), prompt.end());
      prompt_tokens = ids.size();
      const std::vector<std::int64_t> completion = tokenizer_->encode(j["completion"].get<std::string>(), origin);
      ids.insert(ids.end(), completion.begin(), completion.end());
      ids.insert(ids.end(), special_suffix_.begin(), special_suffix_.end());
      if (const auto eos = tokenizer_->settings().eos_id; eos && (ids.empty() || ids.back() != *eos))
        ids.push_back(*eos);
    }
    out.add(ids, prompt_tokens);
  }

  // A conversation's text up to its last assistant message with the
  // generation prompt (the prompt), and the rest of its whole text (the
  // completion).
  template <class Fail>
  std::pair<std::string, std::string> renderConversation(const std::string& file, std::size_t line_no,
                                                         const json& messages, const Fail& fail) {
    if (!messages.is_array() || messages.empty())
      throw fail("\"messages\" must be a non-empty list of {\"role\": ..., \"content\": ...}");
    std::optional<std::size_t> last_answer;
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const json& m = messages[i];
      if (!m.is_object()) throw fail(fmt::format("messages[{}] must be an object, not {}", i, m.type_name()));
      if (!m.contains("role") || !m["role"].is_string())
        throw fail(fmt::format("messages[{}] has no \"role\" string", i));
      const std::string role = m["role"];
      if (std::find(kRoles.begin(), kRoles.end(), role) == kRoles.end())
        throw fail(fmt::format("messages[{}].role '{}' is not a role; use system, user, assistant or tool", i, role));
      if (!m.contains("content")) throw fail(fmt::format("messages[{}] has no \"content\"", i));
      if (role == "assistant") last_answer = i;
    }
    if (!last_answer) throw fail("the conversation has no assistant message to learn");
    if (*last_answer + 1 != messages.size())
      throw fail(fmt::format("the conversation ends with a {} message after the last assistant message; a training "
                             "conversation ends with the answer",
                             messages.back()["role"].get<std::string>()));
    const ChatTemplate& t = chatTemplate(file, line_no);
    ChatTemplateInputs in = chatTemplateInputs(tokenizer_->settings(), false);
    std::string whole, prompt;
    try {
      whole = t.render(messages, in);
      in.add_generation_prompt = true;
      prompt = t.render(json(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(*last_answer)), in);
    } catch (const DataError& e) {
      throw fail(e.what());
    }
    if (whole.compare(0, prompt.size(), prompt) != 0)
      throw fail(fmt::format("{} renders the conversation up to its last answer (with the generation prompt) as "
                             "text that does not begin the whole conversation's, so the answer cannot be told apart",
                             t.origin()));
    return {prompt, whole.substr(prompt.size())};
  }

  // The samples of tokenized examples: padded one by one, or packed.
  std::shared_ptr<const Dataset> samples(Examples examples, const std::string& origin) const {
    const auto block = static_cast<std::size_t>(block_size_);
    std::vector<InstructionSamples::Span> spans;
    if (packing_) {
      const std::size_t blocks = examples.tokens.size() / block;
      if (blocks == 0)
        throw DataError(fmt::format("{}: {} examples have {} tokens, less than one block of "
                                    "data.init_args.block_size={}; lower block_size, add examples, or set packing: "
                                    "false",
                                    origin, examples.count(), examples.tokens.size(), block_size_));
      for (std::size_t b = 0; b < blocks; ++b) spans.push_back({b * block, block});
      spdlog::info("InstructionDataModule: {}: {} examples, {} tokens packed into {} blocks of {} ({} tokens left "
                   "over)",
                   origin, examples.count(), examples.tokens.size(), blocks, block_size_,
                   examples.tokens.size() - blocks * block);
    } else {
      std::size_t truncated = 0, unlearned = 0, longest = 0;
      for (std::size_t i = 0; i < examples.count(); ++i) {
        const std::size_t n = examples.length(i), kept = std::min(n, block);
        truncated += n > block ? 1 : 0;
        longest = std::max(longest, n);
        // Labels are the trained tokens at positions 1 .. kept - 1.
        bool learns = false;
        for (std::size_t t = 1; t < kept; ++t) learns = learns || examples.trained[examples.starts[i] + t];
        unlearned += learns ? 0 : 1;
        spans.push_back({examples.starts[i], kept});
      }
      if (truncated > 0)
        spdlog::warn("InstructionDataModule: {}: {} of {} examples are longer than data.init_args.block_size={} and "
                     "were truncated (the longest has {} tokens)",
                     origin, truncated, examples.count(), block_size_, longest);
      if (unlearned > 0)
        spdlog::warn("InstructionDataModule: {}: {} of {} examples have no completion token within block_size={} "
                     "(the prompt fills it): they add nothing to the loss",
                     origin, unlearned, examples.count(), block_size_);
    }
    return std::make_shared<InstructionSamples>(std::move(examples), std::move(spans), block_size_, pad_id_);
  }

  std::string train_file_;
  std::optional<std::string> val_file_, tokenizer_path_, chat_template_arg_;
  std::int64_t block_size_;
  double val_split_;
  bool packing_;
  Batching batching_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::optional<ChatTemplate> template_;
  std::int64_t pad_id_ = 0;
  std::vector<std::int64_t> special_prefix_, special_suffix_;  // what the post-processor adds around a text
  std::shared_ptr<const Dataset> train_, val_;
};

HPU_REGISTER_COMPONENT(
    DataModule,
    dataModuleSchema(
        "InstructionDataModule", "",
        {{"train_file", Type::path(config::PathKind::kFile), "null",
          "JSONL of training examples: {\"prompt\", \"completion\"} or {\"messages\": [{\"role\", \"content\"}]}."},
         {"val_file", Type::optional(Type::path(config::PathKind::kFile)), "null",
          "JSONL of validation (and test) examples."},
         {"val_split", Type::real().min(0.0).max(1.0, true), "0.1",
          "Without val_file: the fraction of training examples held out for validation (a seeded draw)."},
         {"tokenizer", Type::optional(Type::path(config::PathKind::kFileOrDirectory)), "null",
          "The model's tokenizer: a Hugging Face model directory or tokenizer.json."},
         {"chat_template", Type::optional(Type::path(config::PathKind::kFile, isTemplateText)), "null",
          "A Jinja chat template (its text or a file) for messages, instead of the tokenizer's."},
         {"block_size", Type::integer().min(2), "512", "Tokens per sample (the context length)."},
         {"packing", Type::boolean(), "false",
          "false: one example a sample, padded or truncated to block_size; true: examples end to end, cut into "
          "blocks."}},
        "8", "Instruction data for fine-tuning: prompts and completions, or chats; the loss is on the completions."),
    [](const Params& p) { return std::make_unique<InstructionDataModule>(p); });

}  // namespace
}  // namespace hpu::core::data
