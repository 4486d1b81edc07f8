// FashionMNISTDataModule and MNISTDataModule: IDX files (gzipped or not).
#include <spdlog/fmt/fmt.h>

#include <cmath>
#include <filesystem>

#include "batching.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/data/idx.h"

namespace hpu::core::data {
namespace {

using config::Params;
using config::ParamSpec;
using config::Type;

// MNIST-format data sets in IDX files.
class IdxDataModule : public DataModule {
 public:
  IdxDataModule(std::string name, const Params& p, float mean, float std)
      : name_(std::move(name)),
        data_dir_(p.getString("data_dir")),
        val_split_(p.node("val_split")),
        batching_(p),
        mean_(mean),
        std_(std) {}

  void setup(Stage stage) override {
    if (stage == Stage::kFit || stage == Stage::kValidate) {
      if (!train_) {
        auto full = load("train");
        const std::int64_t n_val = valSplitCount(full->size());
        std::tie(train_, val_) = randomSplit(full, n_val, batching_.seed);
      }
    }
    if ((stage == Stage::kTest || stage == Stage::kPredict) && !test_) test_ = load("t10k");
  }

  std::shared_ptr<const Dataset> dataset(Split split) const override {
    switch (split) {
      case Split::kTrain:
        return train_;
      case Split::kVal:
        return val_;
      case Split::kTest:
      case Split::kPredict:
        return test_;
    }
    return nullptr;
  }
  LoaderOptions loaderOptions(Split split) const override { return batching_.options(split); }
  std::int64_t* batchSizeArg(std::string_view arg_name) override { return batching_.batchSizeArg(arg_name); }
  std::int64_t numClasses() const override { return 10; }
  std::string name() const override { return name_ == "MNIST" ? "MNISTDataModule" : "FashionMNISTDataModule"; }
  // The IDX headers' 28x28 images and class labels, as the files declare them.
  std::vector<Field> batchFields(Split) const override { return classificationFields({1, 28, 28}, true); }

 private:
  std::int64_t valSplitCount(std::int64_t total) const {
    if (val_split_.str().find_first_of(".eE") != std::string::npos)
      return static_cast<std::int64_t>(std::floor(config::asFloat(val_split_) * static_cast<double>(total)));
    const std::int64_t n = config::asInt(val_split_);
    if (n >= total)
      throw DataError(
          fmt::format("data.init_args.val_split: {} validation samples leave none of the {} {} "
                      "training samples",
                      n, total, name_));
    return n;
  }

  std::string find(const std::string& base) const {
    namespace fs = std::filesystem;
    for (const std::string& candidate : {data_dir_ + "/" + base + ".gz", data_dir_ + "/" + base})
      if (fs::exists(candidate)) return candidate;
    throw DataError(fmt::format(
        "missing {} file: neither {}/{}.gz nor {}/{} exists (set data.init_args.data_dir{})", name_, data_dir_, base,
        data_dir_, base, name_ == "Fashion-MNIST" ? "; Debian ships it in the dataset-fashion-mnist package" : ""));
  }

  std::shared_ptr<const Dataset> load(const std::string& prefix) const {
    const std::string images_path = find(prefix + "-images-idx3-ubyte");
    const std::string labels_path = find(prefix + "-labels-idx1-ubyte");
    IdxArray images = readIdx(images_path, 3);
    IdxArray labels = readIdx(labels_path, 1);
    if (images.dims[0] != labels.dims[0])
      throw DataError(fmt::format("{} has {} images but {} has {} labels", images_path, images.dims[0], labels_path,
                                  labels.dims[0]));
    std::vector<std::int64_t> y(labels.data.begin(), labels.data.end());
    for (std::size_t i = 0; i < y.size(); ++i)
      if (y[i] >= 10)
        throw DataError(fmt::format("{}: label {} of sample {} is not a class in 0..9", labels_path, y[i], i));
    return std::make_shared<ByteDataset>(std::vector<std::int64_t>{1, images.dims[1], images.dims[2]},
                                         std::move(images.data), std::move(y), mean_, std_);
  }

  std::string name_;
  std::string data_dir_;
  config::Node val_split_;
  Batching batching_;
  float mean_, std_;
  std::shared_ptr<const Dataset> train_, val_, test_;
};

std::vector<ParamSpec> idxParams(const char* data_dir) {
  return {{"data_dir", Type::path(config::PathKind::kDirectory), data_dir, "Directory holding the IDX files (gzipped or not)."},
          {"val_split", Type::anyOf({Type::integer().min(0), Type::real().min(0.0).max(1.0, true)}), "5000",
           "Training samples held out for validation: a count (int) or a fraction (float)."}};
}

HPU_REGISTER_COMPONENT(
    DataModule,
    dataModuleSchema("FashionMNISTDataModule", "pl_bolts.datamodules",
                     idxParams("/usr/share/datasets/fashion-mnist"), "64",
                     "Fashion-MNIST: 28x28 grey images of 10 clothing classes, 60k train / 10k test."),
    [](const Params& p) {
      // Per-pixel mean and std of the Fashion-MNIST training set.
      return std::make_unique<IdxDataModule>("Fashion-MNIST", p, 0.2860f, 0.3530f);
    });

HPU_REGISTER_COMPONENT(DataModule,
                       dataModuleSchema("MNISTDataModule", "pl_bolts.datamodules",
                                        idxParams("/usr/share/datasets/mnist"), "64",
                                        "MNIST: 28x28 grey images of handwritten digits, 60k train / 10k test."),
                       [](const Params& p) { return std::make_unique<IdxDataModule>("MNIST", p, 0.1307f, 0.3081f); });

}  // namespace
}  // namespace hpu::core::data
