// The batching options every built-in data module takes (batch_size,
// num_workers, shuffle, drop_last, seed) and the loader options they give.
#pragma once

#include <string_view>
#include <vector>

#include "hpu/core/config/params.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/schema.h"
#include "hpu/core/data/dataloader.h"
#include "hpu/core/data/datamodule.h"

namespace hpu::core::data {

// The batching options of every built-in data module.
inline std::vector<config::ParamSpec> loaderParams(const char* batch_default) {
  using config::Type;
  return {
      {"batch_size", Type::integer().min(1), batch_default, "Samples per batch (per device in distributed runs)."},
      {"num_workers", Type::integer().min(0), "0", "Background threads assembling batches ahead of the step."},
      {"shuffle", Type::boolean(), "true", "Shuffle the training set every epoch (seeded)."},
      {"drop_last", Type::boolean(), "false", "Drop the last incomplete training batch (keeps shapes static)."},
      {"seed", Type::integer().min(0), "42", "Seed of the validation split and of the shuffling order."},
  };
}

struct Batching {
  std::int64_t batch_size;
  int num_workers;
  bool shuffle;
  bool drop_last;
  std::uint64_t seed;
  bool from_init_args;  // the options are the data module's init_args (else fixed settings)

  // Fixed settings, not init_args of the data module.
  Batching(std::int64_t batch_size, int num_workers, bool shuffle, bool drop_last, std::uint64_t seed)
      : batch_size(batch_size),
        num_workers(num_workers),
        shuffle(shuffle),
        drop_last(drop_last),
        seed(seed),
        from_init_args(false) {}
  explicit Batching(const config::Params& p)
      : batch_size(p.getInt("batch_size")),
        num_workers(static_cast<int>(p.getInt("num_workers"))),
        shuffle(p.getBool("shuffle")),
        drop_last(p.getBool("drop_last")),
        seed(static_cast<std::uint64_t>(p.getInt("seed"))),
        from_init_args(true) {}

  // DataModule::batchSizeArg of a data module batching with these options.
  std::int64_t* batchSizeArg(std::string_view arg_name) {
    return from_init_args && arg_name == "batch_size" ? &batch_size : nullptr;
  }

  LoaderOptions options(Split split) const {
    LoaderOptions o;
    o.batch_size = batch_size;
    o.num_workers = num_workers;
    o.drop_last = split == Split::kTrain && drop_last;
    o.sampler.shuffle = split == Split::kTrain && shuffle;
    o.sampler.seed = seed;
    return o;
  }
};

// The schema of a data module: its own `params`, then the batching options
// (batch_size defaulting to `batch_default`).
inline config::ComponentSchema dataModuleSchema(const char* name, std::string module,
                                                std::vector<config::ParamSpec> params, const char* batch_default,
                                                const char* doc) {
  for (config::ParamSpec& spec : loaderParams(batch_default)) params.push_back(std::move(spec));
  return config::ComponentSchema{
      config::ComponentKind::kDataModule, name, std::move(module), {name, "", std::move(params)}, doc};
}

}  // namespace hpu::core::data
