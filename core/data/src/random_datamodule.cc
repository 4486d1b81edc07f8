// RandomDataModule: seeded Gaussian noise (Lightning's RandomDataset), and
// Lightning's BoringDataModule, the same data with its fixed settings.
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
  RandomDataModule(std::string name, std::int64_t size, std::int64_t length, Batching batching)
      : name_(std::move(name)), size_(size), length_(length), batching_(batching) {}

  void setup(Stage) override {
    if (data_) return;
    Generator g(batching_.seed, RandomStream::kData);
    std::vector<float> x(static_cast<std::size_t>(size_ * length_));
    for (float& v : x) v = g.normal();
    data_ = std::make_shared<FloatDataset>(std::vector<std::int64_t>{size_}, std::move(x), std::vector<std::int64_t>{});
  }
  std::shared_ptr<const Dataset> dataset(Split) const override { return data_; }
  LoaderOptions loaderOptions(Split split) const override { return batching_.options(split); }
  std::int64_t* batchSizeArg(std::string_view arg_name) override { return batching_.batchSizeArg(arg_name); }
  std::string name() const override { return name_; }
  std::vector<Field> batchFields(Split) const override { return classificationFields({size_}, false); }

 private:
  std::string name_;
  std::int64_t size_, length_;
  Batching batching_;
  std::shared_ptr<const Dataset> data_;
};

HPU_REGISTER_COMPONENT(DataModule,
                       dataModuleSchema("RandomDataModule", "",
                                        {{"size", Type::integer().min(1), "32", "Features per sample."},
                                         {"length", Type::integer().min(1), "64", "Samples in every split."}},
                                        "2",
                                        "Seeded Gaussian noise (Lightning's RandomDataset), the data of BoringModel."),
                       [](const Params& p) {
                         return std::make_unique<RandomDataModule>("RandomDataModule", p.getInt("size"),
                                                                   p.getInt("length"), Batching(p));
                       });

// Lightning's BoringDataModule has no init_args: 32 features, 64 samples per
// split, DataLoader's defaults (batch size 1, in order).
HPU_REGISTER_COMPONENT(DataModule,
                       config::ComponentSchema{config::ComponentKind::kDataModule,
                                               "BoringDataModule",
                                               "lightning.pytorch.demos.boring_classes",
                                               {"BoringDataModule", "", {}},
                                               "Lightning's BoringDataModule: RandomDataModule(size=32, length=64) "
                                               "in batches of 1, unshuffled."},
                       [](const Params&) {
                         return std::make_unique<RandomDataModule>("BoringDataModule", 32, 64,
                                                                   Batching(1, 0, false, false, 42));
                       });

}  // namespace
}  // namespace hpu::core::data
