// TextDataModule: a language model's data from text files. The corpus (a
// file, or the regular files of a folder in name order) is tokenized whole
// (byte, char, or a Hugging Face tokenizer, without special tokens added);
// its last val_split of tokens is the validation (and test) text, the rest
// the training text. Each is cut into blocks of block_size + 1 tokens:
// "input_ids" are a block's first block_size tokens, "labels" the same
// shifted by one. Training blocks are shuffled per epoch from the seed.
#include <fnmatch.h>
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <filesystem>

#include "batching.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/data/token_blocks.h"

namespace hpu::core::data {
namespace {

namespace fs = std::filesystem;
using config::Params;
using config::Type;

// The tokenizers named by a word rather than a path.
bool builtInTokenizer(std::string_view name) { return name == "byte" || name == "char"; }

class TextDataModule final : public DataModule {
 public:
  explicit TextDataModule(const Params& p)
      : path_(p.getString("path")),
        exclude_(p.getStringList("exclude")),
        tokenizer_name_(p.getString("tokenizer")),
        block_size_(p.getInt("block_size")),
        val_split_(p.getFloat("val_split")),
        batching_(p) {}

  void setup(Stage) override {
    if (train_) return;
    const std::string text = readCorpus();
    if (!tokenizer_) tokenizer_ = makeTokenizer(text);
    std::vector<std::int64_t> tokens = tokenizer_->encode(text, path_);
    const auto n = static_cast<std::int64_t>(tokens.size());
    const auto n_val = static_cast<std::int64_t>(static_cast<double>(n) * val_split_);
    const std::int64_t n_train = n - n_val;
    const auto tooShort = [&](const char* part, std::int64_t have) {
      return DataError(fmt::format(
          "data.init_args.block_size={} needs at least {} tokens of {} text, and {} has {} ({} tokens of {} in all, "
          "val_split {}); lower block_size{}",
          block_size_, block_size_ + 1, part, path_, have, n, tokenizer_->name(), val_split_,
          std::string(part) == "validation" ? " or raise val_split" : ""));
    };
    if (n_train < block_size_ + 1) throw tooShort("training", n_train);
    if (n_val > 0 && n_val < block_size_ + 1) throw tooShort("validation", n_val);
    train_ =
        std::make_shared<TokenBlocks>(std::vector<std::int64_t>(tokens.begin(), tokens.begin() + n_train), block_size_);
    if (n_val > 0)
      val_ =
          std::make_shared<TokenBlocks>(std::vector<std::int64_t>(tokens.begin() + n_train, tokens.end()), block_size_);
  }

  std::shared_ptr<const Dataset> dataset(Split split) const override {
    switch (split) {
      case Split::kTrain:
        return train_;
      case Split::kVal:
      case Split::kTest:
        return val_;
      case Split::kPredict:
        return nullptr;  // a language model predicts from its prompts
    }
    return nullptr;
  }
  LoaderOptions loaderOptions(Split split) const override { return batching_.options(split); }
  std::int64_t* batchSizeArg(std::string_view arg_name) override { return batching_.batchSizeArg(arg_name); }
  std::shared_ptr<const Tokenizer> tokenizer() const override { return tokenizer_; }
  void setupTokenizer() override {
    if (!tokenizer_) tokenizer_ = makeTokenizer(tokenizer_name_ == "char" ? readCorpus() : std::string());
  }
  std::string name() const override { return "TextDataModule"; }
  // Blocks of block_size tokens (predict: prompts of block_size tokens).
  std::vector<Field> batchFields(Split) const override { return tokenBlockFields(block_size_); }

 private:
  // byte, char (the corpus's characters), or a Hugging Face tokenizer's path.
  std::unique_ptr<Tokenizer> makeTokenizer(const std::string& corpus) const {
    if (tokenizer_name_ == "byte") return makeByteTokenizer();
    if (tokenizer_name_ == "char") return makeCharTokenizer(corpus, path_);
    try {
      return loadTokenizer(tokenizer_name_);
    } catch (const DataError& e) {
      throw DataError(fmt::format("data.init_args.tokenizer: {} (the value is byte, char, or a Hugging Face model "
                                  "directory or tokenizer.json)",
                                  e.what()));
    }
  }

  bool excluded(const fs::path& file) const {
    const std::string name = file.filename().string();
    return std::any_of(exclude_.begin(), exclude_.end(),
                       [&](const std::string& pattern) { return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0; });
  }

  // The file, or the folder's regular files (not links) in name order.
  std::string readCorpus() const {
    std::error_code ec;
    const fs::file_status status = fs::status(path_, ec);
    if (ec || !fs::exists(status))
      throw DataError(fmt::format("data.init_args.path: {} does not exist{}", path_,
                                  path_.find("fortunes") != std::string::npos
                                      ? " (Debian's fortunes package installs /usr/share/games/fortunes)"
                                      : ""));
    std::vector<fs::path> files;
    if (fs::is_directory(status)) {
      for (const auto& entry : fs::directory_iterator(path_))
        if (!entry.is_symlink() && entry.is_regular_file() && !excluded(entry.path())) files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      if (files.empty()) throw DataError(fmt::format("data.init_args.path: {} has no text files", path_));
    } else {
      files.push_back(path_);
    }
    std::string text;
    for (const fs::path& f : files) text += readFile(f.string());
    if (text.empty())
      throw DataError(fmt::format("data.init_args.path: {} is empty: there is no text to learn from", path_));
    return text;
  }

  std::string path_;
  std::vector<std::string> exclude_;
  std::string tokenizer_name_;
  std::int64_t block_size_;
  double val_split_;
  Batching batching_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const Dataset> train_, val_;
};

HPU_REGISTER_COMPONENT(
    DataModule,
    dataModuleSchema(
        "TextDataModule", "",
        {{"path", Type::path(config::PathKind::kFileOrDirectory), "null",
          "A text file, or a folder whose regular files are read in name order."},
         {"exclude", Type::list(Type::string()), "[]", "File name patterns of a folder's files to skip (e.g. *.dat)."},
         {"tokenizer", Type::path(config::PathKind::kFileOrDirectory, builtInTokenizer), "byte",
          "byte: every UTF-8 byte a token (vocabulary 256); char: every character of the corpus (UTF-8 only); "
          "or a Hugging Face tokenizer: a model directory (tokenizer.json, or GPT-2's vocab.json + merges.txt) or a "
          "tokenizer.json file."},
         {"block_size", Type::integer().min(1), "256", "Tokens per sample (the context length)."},
         {"val_split", Type::real().min(0.0).max(1.0, true), "0.1",
          "Fraction of the tokens, from the end of the text, held out for validation and test."}},
        "8", "Text for language models: blocks of token ids and the next tokens as labels."),
    [](const Params& p) { return std::make_unique<TextDataModule>(p); });

}  // namespace
}  // namespace hpu::core::data
