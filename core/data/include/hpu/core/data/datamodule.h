// LightningDataModule: where the data of each stage comes from and how it is
// batched. setup() loads (and validates) the files; the Trainer then builds
// one DataLoader per split, adding the distributed sampler settings.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "hpu/core/data/dataloader.h"
#include "hpu/core/data/dataset.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/data/tokenizer.h"

namespace hpu::core::data {

enum class Split { kTrain, kVal, kTest, kPredict };
std::string_view splitName(Split s);  // "train", "val", "test", "predict"

enum class Stage { kFit, kValidate, kTest, kPredict };

// A data module that knows its samples' fields only by reading its files.
class FieldsUndeclared : public UsageError {
 public:
  using UsageError::UsageError;
};

class DataModule {
 public:
  virtual ~DataModule() = default;
  // Loads what `stage` needs. Throws DataError for missing/corrupt data.
  virtual void setup(Stage stage) = 0;
  // The data set of a split, or nullptr if this data module has none.
  virtual std::shared_ptr<const Dataset> dataset(Split split) const = 0;
  // Batching for a split: batch size, workers, shuffling (train only by
  // default), drop_last. The sampler's replica fields are the Trainer's.
  virtual LoaderOptions loaderOptions(Split split) const = 0;
  // Number of classes of labelled data sets (0: not a classification set).
  virtual std::int64_t numClasses() const { return 0; }
  // Text data: how token ids map to text (null for other data). Valid after
  // setup() or setupTokenizer().
  virtual std::shared_ptr<const Tokenizer> tokenizer() const { return nullptr; }
  // Makes tokenizer() valid without setup() (`hpu-train estimate`, which
  // reads no samples): a built-in tokenizer or a tokenizer file; one learnt
  // from the corpus (TextDataModule's char) reads the corpus for it.
  virtual void setupTokenizer() {}
  // The fields of one sample of `split`, declared without setup() and
  // without reading any data (`hpu-train estimate`). The default throws
  // FieldsUndeclared, saying the data module cannot.
  virtual std::vector<Field> batchFields(Split split) const;
  // Lightning's batch_arg_name: the init_arg named `arg_name` that holds
  // the batch size of every split, which a tuner (BatchSizeFinder) may
  // change; loaders made after the change batch its new value. Null when
  // this data module has no init_arg of that name.
  virtual std::int64_t* batchSizeArg(std::string_view /*arg_name*/) { return nullptr; }
  // The registered class name, for messages.
  virtual std::string name() const = 0;
};

// What a run without a `data` section gets: no data sets, batches of 1.
// Predict of a model that brings its own data (a language model's prompts)
// needs nothing more.
std::unique_ptr<DataModule> makeNoDataModule();

}  // namespace hpu::core::data
