#include "hpu/core/data/dataset.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <stdexcept>

#include "hpu/core/base/random.h"
#include "hpu/device/threading.h"
#include "hpu/device/vector_clones.h"

namespace hpu::core::data {

std::int64_t Field::numel() const {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

const Field* Dataset::field(std::string_view name) const {
  for (const Field& f : fields())
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<Field> classificationFields(std::vector<std::int64_t> sample_shape, bool labelled) {
  std::vector<Field> fields{{"x", device::DType::kFloat32, std::move(sample_shape)}};
  if (labelled) fields.push_back({"y", device::DType::kInt64, {}});
  return fields;
}

ByteDataset::ByteDataset(std::vector<std::int64_t> sample_shape, std::vector<std::uint8_t> pixels,
                         std::vector<std::int64_t> labels, float mean, float std)
    : fields_(classificationFields(std::move(sample_shape), !labels.empty())),
      pixels_(std::move(pixels)),
      labels_(std::move(labels)),
      scale_(1.0f / (255.0f * std)),
      shift_(-mean / std) {
  const std::int64_t numel = fields_[0].numel();
  size_ = numel == 0 ? 0 : static_cast<std::int64_t>(pixels_.size()) / numel;
  if (!labels_.empty() && static_cast<std::int64_t>(labels_.size()) != size_)
    throw std::logic_error("ByteDataset: label count differs from sample count");
}

namespace {

// dst = src * scale + shift, vectorised (the scalars are locals: through
// `this` the compiler reloaded them after every store to dst).
void scaleBytes(const std::uint8_t* __restrict src, float* __restrict dst, std::int64_t n, float scale, float shift) {
  device::onVectorLevel([&]() HPU_LOOP_BODY {
    for (std::int64_t j = 0; j < n; ++j) dst[j] = static_cast<float>(src[j]) * scale + shift;
  });
}

}  // namespace

void ByteDataset::fetch(std::span<const std::int64_t> indices, std::span<const FieldBuffer> out) const {
  const std::int64_t n = fields_[0].numel();
  // Shuffled samples are scattered over the data set, out of cache: the
  // lines of the sample kAhead places on are requested while this one
  // converts (the loads waited on memory for most of the time). On the
  // intra-op team in runs of samples: the batch's halves are then in the
  // caches of the cores whose threads copy them to the device next, and the
  // team's workers stay awake for the step's first kernels.
  constexpr std::int64_t kAhead = 4, kGrain = 8;
  static device::ParallelSite site("dataset fetch");
  const auto count = static_cast<std::int64_t>(indices.size());
  device::parallelFor(site, count, kGrain, static_cast<double>(count * n), [&](std::int64_t begin, std::int64_t end) {
    const auto prefetch = [&](std::int64_t i) {
      const std::uint8_t* p = pixels_.data() + indices[static_cast<std::size_t>(i)] * n;
      for (std::int64_t b = 0; b < n; b += 64) __builtin_prefetch(p + b);
    };
    for (std::int64_t i = begin; i < std::min(begin + kAhead, end); ++i) prefetch(i);
    for (std::int64_t i = begin; i < end; ++i) {
      if (i + kAhead < end) prefetch(i + kAhead);
      const std::int64_t sample = indices[static_cast<std::size_t>(i)];
      scaleBytes(pixels_.data() + sample * n, out[0].floats + i * n, n, scale_, shift_);
      if (!labels_.empty()) out[1].ints[i] = labels_[static_cast<std::size_t>(sample)];
    }
  });
}

FloatDataset::FloatDataset(std::vector<std::int64_t> sample_shape, std::vector<float> features,
                           std::vector<std::int64_t> labels)
    : fields_(classificationFields(std::move(sample_shape), !labels.empty())),
      features_(std::move(features)),
      labels_(std::move(labels)) {
  const std::int64_t numel = fields_[0].numel();
  size_ = numel == 0 ? 0 : static_cast<std::int64_t>(features_.size()) / numel;
  if (!labels_.empty() && static_cast<std::int64_t>(labels_.size()) != size_)
    throw std::logic_error("FloatDataset: label count differs from sample count");
}

void FloatDataset::fetch(std::span<const std::int64_t> indices, std::span<const FieldBuffer> out) const {
  const std::int64_t n = fields_[0].numel();
  for (std::size_t i = 0; i < indices.size(); ++i) {
    std::memcpy(out[0].floats + static_cast<std::int64_t>(i) * n, features_.data() + indices[i] * n,
                static_cast<std::size_t>(n) * sizeof(float));
    if (!labels_.empty()) out[1].ints[i] = labels_[indices[i]];
  }
}

Subset::Subset(std::shared_ptr<const Dataset> base, std::vector<std::int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {}

void Subset::fetch(std::span<const std::int64_t> indices, std::span<const FieldBuffer> out) const {
  std::vector<std::int64_t> mapped(indices.size());
  for (std::size_t i = 0; i < indices.size(); ++i) mapped[i] = indices_[indices[i]];
  base_->fetch(mapped, out);
}

std::pair<std::shared_ptr<const Dataset>, std::shared_ptr<const Dataset>> randomSplit(
    std::shared_ptr<const Dataset> base, std::int64_t val_count, std::uint64_t seed) {
  Generator g(seed, RandomStream::kSplit);
  std::vector<std::int64_t> perm = randomPermutation(base->size(), g);
  const std::int64_t train_count = base->size() - val_count;
  std::vector<std::int64_t> train(perm.begin(), perm.begin() + train_count);
  std::vector<std::int64_t> val(perm.begin() + train_count, perm.end());
  return {std::make_shared<Subset>(base, std::move(train)), std::make_shared<Subset>(base, std::move(val))};
}

}  // namespace hpu::core::data
