#include "hpu/core/data/datamodule.h"

#include "hpu/core/base/errors.h"

namespace hpu::core::data {

std::string_view splitName(Split s) {
  switch (s) {
    case Split::kTrain:
      return "train";
    case Split::kVal:
      return "val";
    case Split::kTest:
      return "test";
    case Split::kPredict:
      return "predict";
  }
  return "?";
}

std::vector<Field> DataModule::batchFields(Split) const {
  throw FieldsUndeclared(name() +
                   " cannot declare its samples without reading its files, which estimate does not do; estimate with "
                   "a data module of the same shapes (RandomDataModule, RandomTokensDataModule)");
}

namespace {

class NoDataModule final : public DataModule {
 public:
  void setup(Stage) override {}
  std::shared_ptr<const Dataset> dataset(Split) const override { return nullptr; }
  LoaderOptions loaderOptions(Split) const override { return LoaderOptions{.batch_size = 1}; }
  std::vector<Field> batchFields(Split) const override { return {}; }
  std::string name() const override { return "no data module"; }
};

}  // namespace

std::unique_ptr<DataModule> makeNoDataModule() { return std::make_unique<NoDataModule>(); }

}  // namespace hpu::core::data
