// RandomTokensDataModule: uniformly random token ids, for smoke runs and
// speed measurements of language models (nothing to learn).
#include "batching.h"
#include "hpu/core/base/random.h"
#include "hpu/core/data/token_blocks.h"

namespace hpu::core::data {
namespace {

using config::Params;
using config::Type;

class RandomTokensDataModule final : public DataModule {
 public:
  explicit RandomTokensDataModule(const Params& p)
      : vocab_(p.getInt("vocab_size")),
        block_(p.getInt("block_size")),
        samples_(p.getInt("num_samples")),
        batching_(p) {}

  void setup(Stage) override {
    if (train_) return;
    Generator g(batching_.seed, RandomStream::kData);
    const auto draw = [&](std::int64_t samples) {
      // One stream of samples * block + 1 tokens: TokenBlocks' samples.
      std::vector<std::int64_t> tokens(static_cast<std::size_t>(samples * block_ + 1));
      for (std::int64_t& t : tokens) t = static_cast<std::int64_t>(g.below(static_cast<std::uint64_t>(vocab_)));
      return std::make_shared<TokenBlocks>(std::move(tokens), block_);
    };
    train_ = draw(samples_);
    val_ = draw(std::max<std::int64_t>(1, samples_ / 10));
  }
  std::shared_ptr<const Dataset> dataset(Split split) const override {
    return split == Split::kTrain ? train_ : split == Split::kPredict ? nullptr : val_;
  }
  LoaderOptions loaderOptions(Split split) const override { return batching_.options(split); }
  std::int64_t* batchSizeArg(std::string_view arg_name) override { return batching_.batchSizeArg(arg_name); }
  std::string name() const override { return "RandomTokensDataModule"; }
  std::vector<Field> batchFields(Split) const override { return tokenBlockFields(block_); }

 private:
  std::int64_t vocab_, block_, samples_;
  Batching batching_;
  std::shared_ptr<const Dataset> train_, val_;
};

HPU_REGISTER_COMPONENT(
    DataModule,
    dataModuleSchema("RandomTokensDataModule", "",
                     {{"vocab_size", Type::integer().min(1), "256", "Token ids are drawn from [0, vocab_size)."},
                      {"block_size", Type::integer().min(1), "256", "Tokens per sample."},
                      {"num_samples", Type::integer().min(1), "256", "Training samples (validation: a tenth)."}},
                     "8", "Random token ids for language-model smoke runs and speed."),
    [](const Params& p) { return std::make_unique<RandomTokensDataModule>(p); });

}  // namespace
}  // namespace hpu::core::data
