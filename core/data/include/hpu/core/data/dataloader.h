// Batches of a data set for one rank, optionally assembled ahead of time by
// background workers so the training step does not wait for data.
//
// Batch b of an epoch always holds the same samples whatever num_workers is
// (workers take batches round-robin; the consumer receives them in order).
// Not thread-safe: one consumer thread. Worker errors (e.g. a DataError) are
// rethrown by next().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "hpu/core/data/dataset.h"
#include "hpu/core/data/sampler.h"

namespace hpu::core::data {

// One field of a batch in host memory: [size, sample shape...] elements in
// `floats` (float32 fields) or `ints` (int64 fields).
struct HostTensor {
  Field field;                      // the data set's field (its sample shape)
  std::vector<std::int64_t> shape;  // {size, sample dims...}
  std::vector<float> floats;
  std::vector<std::int64_t> ints;
};

// A batch in host memory: every field of the data set, in its order.
struct HostBatch {
  std::vector<HostTensor> tensors;
  std::int64_t index = 0;  // position in the epoch
  std::int64_t size() const { return tensors.empty() ? 0 : tensors.front().shape[0]; }
  // REQUIRES: the data set has a field `name`.
  const HostTensor& operator[](std::string_view name) const;
};

struct LoaderOptions {
  std::int64_t batch_size = 32;
  bool drop_last = false;  // drop a last batch smaller than batch_size
  int num_workers = 0;     // background assembly threads (0: in the consumer thread)
  int prefetch_factor = 2; // batches each worker may have ready ahead
  SamplerOptions sampler;
  // How long next() waits for a worker before failing.
  std::chrono::milliseconds worker_timeout{60000};
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Batches per epoch for this rank.
  std::int64_t numBatches() const;
  const Dataset& dataset() const { return *dataset_; }
  const LoaderOptions& options() const { return options_; }

  // Starts epoch `epoch` (draws its order, starts workers); REQUIRES: the
  // previous epoch is finished or abandoned.
  void startEpoch(std::int64_t epoch);
  // The next batch of the epoch, or nullopt at its end.
  std::optional<HostBatch> next();

 private:
  HostBatch assemble(std::int64_t b) const;
  void workerLoop(int worker);
  void stopWorkers();

  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  std::vector<std::int64_t> order_;
  std::int64_t num_batches_ = 0;
  std::int64_t cursor_ = 0;

  std::mutex mu_;
  std::condition_variable ready_cv_, space_cv_;
  std::map<std::int64_t, HostBatch> ready_;
  std::exception_ptr error_;
  bool stopping_ = false;
  int active_workers_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace hpu::core::data
