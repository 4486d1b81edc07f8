// RandomDataModule: seeded Gaussian noise (Lightning's RandomDataset).
#include "batching.h"
#include "hpu/core/base/random.h"

namespace hpu::core::data {
namespace {

using config::Params;
using config::Type;

// Gaussian noise samples without labels: Lightning's RandomDataset, the data
// of BoringModel.
class RandomDataModule : public DataModule {
 public:
  explicit RandomDataModule(const Params& p) : size_(p.getInt("size")), length_(p.getInt("length")), batching_(p) {}

  void setup(Stage) override {
    if (data_) return;
    Generator g(batching_.seed, RandomStream::kData);
    std::vector<float> x(static_cast<std::size_t>(size_ * length_));
    for (float& v : x) v = g.normal();
    data_ = std::make_shared<FloatDataset>(std::vector<std::int64_t>{size_}, std::move(x), std::vector<std::int64_t>{});
  }
  std::shared_ptr<const Dataset> dataset(Split) const override { return data_; }
  LoaderOptions loaderOptions(Split split) const override { return batching_.options(split); }
  std::string name() const override { return "RandomDataModule"; }
  std::vector<Field> batchFields(Split) const override { return classificationFields({size_}, false); }

 private:
  std::int64_t size_, length_;
  Batching batching_;
  std::shared_ptr<const Dataset> data_;
};

HPU_REGISTER_COMPONENT(DataModule,
                       dataModuleSchema("RandomDataModule", {"lightning.pytorch.demos.boring_classes.RandomDataModule"},
                                        {{"size", Type::integer().min(1), "32", "Features per sample."},
                                         {"length", Type::integer().min(1), "64", "Samples in every split."}},
                                        "2",
                                        "Seeded Gaussian noise (Lightning's RandomDataset), the data of BoringModel."),
                       [](const Params& p) { return std::make_unique<RandomDataModule>(p); });

}  // namespace
}  // namespace hpu::core::data
