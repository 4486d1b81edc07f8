// Data sets: random access to samples, fetched in batches straight into
// caller-provided host buffers (features already normalised). Immutable after
// construction, so fetch() is thread-safe (data-loader workers share them).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace hpu::core::data {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::int64_t size() const = 0;
  // Shape of one sample's features: {1, 28, 28} for an image, {32} for a vector.
  virtual const std::vector<std::int64_t>& sampleShape() const = 0;
  // Whether samples carry an integer class label.
  virtual bool hasLabels() const = 0;
  // Writes samples `indices` in order: features to `x` (indices.size() x
  // sampleNumel() floats) and, if hasLabels(), labels to `y`.
  virtual void fetch(std::span<const std::int64_t> indices, float* x, std::int64_t* y) const = 0;

  std::int64_t sampleNumel() const;
};

// 8-bit images (or any byte features) in memory, normalised on fetch to
// (v / 255 - mean) / std.
class ByteDataset : public Dataset {
 public:
  ByteDataset(std::vector<std::int64_t> sample_shape, std::vector<std::uint8_t> pixels,
              std::vector<std::int64_t> labels, float mean, float std);
  std::int64_t size() const override { return size_; }
  const std::vector<std::int64_t>& sampleShape() const override { return shape_; }
  bool hasLabels() const override { return !labels_.empty(); }
  void fetch(std::span<const std::int64_t> indices, float* x, std::int64_t* y) const override;

 private:
  std::vector<std::int64_t> shape_;
  std::int64_t size_;
  std::vector<std::uint8_t> pixels_;
  std::vector<std::int64_t> labels_;
  float scale_, shift_;  // x = v * scale_ + shift_
};

// Float features in memory, used as they are.
class FloatDataset : public Dataset {
 public:
  FloatDataset(std::vector<std::int64_t> sample_shape, std::vector<float> features,
               std::vector<std::int64_t> labels);
  std::int64_t size() const override { return size_; }
  const std::vector<std::int64_t>& sampleShape() const override { return shape_; }
  bool hasLabels() const override { return !labels_.empty(); }
  void fetch(std::span<const std::int64_t> indices, float* x, std::int64_t* y) const override;

 private:
  std::vector<std::int64_t> shape_;
  std::int64_t size_;
  std::vector<float> features_;
  std::vector<std::int64_t> labels_;
};

// The samples `indices` of another data set, in that order.
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> base, std::vector<std::int64_t> indices);
  std::int64_t size() const override { return static_cast<std::int64_t>(indices_.size()); }
  const std::vector<std::int64_t>& sampleShape() const override { return base_->sampleShape(); }
  bool hasLabels() const override { return base_->hasLabels(); }
  void fetch(std::span<const std::int64_t> indices, float* x, std::int64_t* y) const override;

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<std::int64_t> indices_;
};

// Splits `base` into (train, val) with a permutation drawn from `seed`:
// `val_count` samples go to validation.
std::pair<std::shared_ptr<const Dataset>, std::shared_ptr<const Dataset>> randomSplit(
    std::shared_ptr<const Dataset> base, std::int64_t val_count, std::uint64_t seed);

}  // namespace hpu::core::data
