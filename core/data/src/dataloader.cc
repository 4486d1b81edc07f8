#include "hpu/core/data/dataloader.h"

#include <spdlog/fmt/fmt.h>

#include "hpu/core/base/errors.h"
#include "hpu/device/check.h"
#include "hpu/device/threading.h"

namespace hpu::core::data {

const HostTensor& HostBatch::operator[](std::string_view name) const {
  for (const HostTensor& t : tensors)
    if (t.field.name == name) return t;
  HPU_CHECK(false, "batch has no field {}", name);
  return tensors.front();
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {}

DataLoader::~DataLoader() { stopWorkers(); }

std::int64_t DataLoader::numBatches() const {
  const std::int64_t n = samplesPerReplica(dataset_->size(), options_.sampler);
  const std::int64_t b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::startEpoch(std::int64_t epoch) {
  stopWorkers();
  order_ = epochIndices(dataset_->size(), options_.sampler, epoch);
  num_batches_ = numBatches();
  cursor_ = 0;
  ready_.clear();
  error_ = nullptr;
  stopping_ = false;
  active_workers_ = static_cast<int>(std::min<std::int64_t>(options_.num_workers, num_batches_));
  for (int w = 0; w < active_workers_; ++w) workers_.emplace_back([this, w] { workerLoop(w); });
}

HostBatch DataLoader::assemble(std::int64_t b) const {
  const std::int64_t begin = b * options_.batch_size;
  const std::int64_t end = std::min<std::int64_t>(begin + options_.batch_size, order_.size());
  const std::int64_t size = end - begin;
  HostBatch batch;
  batch.index = b;
  std::vector<FieldBuffer> out;
  for (const Field& f : dataset_->fields()) {
    HostTensor& t = batch.tensors.emplace_back();
    t.field = f;
    t.shape = {size};
    t.shape.insert(t.shape.end(), f.shape.begin(), f.shape.end());
    const auto n = static_cast<std::size_t>(size * f.numel());
    if (f.dtype == device::DType::kInt64)
      t.ints.resize(n);
    else
      t.floats.resize(n);
  }
  for (HostTensor& t : batch.tensors) out.push_back({t.floats.data(), t.ints.data()});
  dataset_->fetch({order_.data() + begin, static_cast<std::size_t>(size)}, out);
  return batch;
}

void DataLoader::workerLoop(int worker) {
  device::keepThreadOffTeam();  // the team is the training thread's
  const std::int64_t stride = active_workers_;
  const std::int64_t ahead = stride * std::max(1, options_.prefetch_factor);
  for (std::int64_t b = worker; b < num_batches_; b += stride) {
    {
      std::unique_lock lock(mu_);
      space_cv_.wait(lock, [&] { return stopping_ || b < cursor_ + ahead; });
      if (stopping_) return;
    }
    try {
      HostBatch batch = assemble(b);
      std::lock_guard lock(mu_);
      ready_.emplace(b, std::move(batch));
    } catch (...) {
      std::lock_guard lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
    ready_cv_.notify_all();
  }
}

std::optional<HostBatch> DataLoader::next() {
  if (cursor_ >= num_batches_) return std::nullopt;
  if (workers_.empty()) {
    HostBatch batch = assemble(cursor_);  // a failed batch stays current, as with workers
    ++cursor_;
    return batch;
  }
  std::unique_lock lock(mu_);
  const bool arrived = ready_cv_.wait_for(lock, options_.worker_timeout,
                                          [&] { return error_ != nullptr || ready_.count(cursor_) != 0; });
  if (error_) std::rethrow_exception(error_);
  if (!arrived)
    throw Error(
        fmt::format("data loader worker did not deliver batch {} within {:g} s; lower "
                    "data.init_args.num_workers or check the data set",
                    cursor_, std::chrono::duration<double>(options_.worker_timeout).count()));
  auto node = ready_.extract(cursor_);
  ++cursor_;
  lock.unlock();
  space_cv_.notify_all();
  return std::move(node.mapped());
}

void DataLoader::stopWorkers() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  space_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

}  // namespace hpu::core::data
