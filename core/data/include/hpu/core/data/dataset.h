// Data sets: random access to samples, each a set of named fields of fixed
// shape and dtype (an image's "x" and its label "y"; a text block's
// "input_ids" and "labels"), fetched in batches straight into caller-provided
// host buffers (features already normalised). Immutable after construction,
// so fetch() is thread-safe (data-loader workers share them).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hpu/device/dtype.h"

namespace hpu::core::data {

// One field of every sample: "x", float32, {1, 28, 28}; "y", int64, {}.
struct Field {
  std::string name;
  device::DType dtype = device::DType::kFloat32;  // float32 or int64
  std::vector<std::int64_t> shape;                 // of one sample
  std::int64_t numel() const;
  bool operator==(const Field&) const = default;
};

// Where fetch() writes one field: `floats` for float32 fields, `ints` for
// int64 ones, sample after sample.
struct FieldBuffer {
  float* floats = nullptr;
  std::int64_t* ints = nullptr;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::int64_t size() const = 0;
  virtual const std::vector<Field>& fields() const = 0;
  // Writes samples `indices` in order, field f into out[f]
  // (indices.size() x fields()[f].numel() elements).
  // REQUIRES: out.size() == fields().size().
  virtual void fetch(std::span<const std::int64_t> indices, std::span<const FieldBuffer> out) const = 0;

  // The field named `name`, or nullptr.
  const Field* field(std::string_view name) const;
};

// The fields of a classification data set: float features "x" of one
// sample's shape, and int64 class labels "y" when `labelled`.
std::vector<Field> classificationFields(std::vector<std::int64_t> sample_shape, bool labelled);

// 8-bit images (or any byte features) in memory, normalised on fetch to
// (v / 255 - mean) / std: classificationFields.
class ByteDataset : public Dataset {
 public:
  ByteDataset(std::vector<std::int64_t> sample_shape, std::vector<std::uint8_t> pixels,
              std::vector<std::int64_t> labels, float mean, float std);
  std::int64_t size() const override { return size_; }
  const std::vector<Field>& fields() const override { return fields_; }
  void fetch(std::span<const std::int64_t> indices, std::span<const FieldBuffer> out) const override;

 private:
  std::vector<Field> fields_;
  std::int64_t size_;
  std::vector<std::uint8_t> pixels_;
  std::vector<std::int64_t> labels_;
  float scale_, shift_;  // x = v * scale_ + shift_
};

// Float features in memory, used as they are: classificationFields.
class FloatDataset : public Dataset {
 public:
  FloatDataset(std::vector<std::int64_t> sample_shape, std::vector<float> features,
               std::vector<std::int64_t> labels);
  std::int64_t size() const override { return size_; }
  const std::vector<Field>& fields() const override { return fields_; }
  void fetch(std::span<const std::int64_t> indices, std::span<const FieldBuffer> out) const override;

 private:
  std::vector<Field> fields_;
  std::int64_t size_;
  std::vector<float> features_;
  std::vector<std::int64_t> labels_;
};

// The samples `indices` of another data set, in that order.
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> base, std::vector<std::int64_t> indices);
  std::int64_t size() const override { return static_cast<std::int64_t>(indices_.size()); }
  const std::vector<Field>& fields() const override { return base_->fields(); }
  void fetch(std::span<const std::int64_t> indices, std::span<const FieldBuffer> out) const override;

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<std::int64_t> indices_;
};

// Splits `base` into (train, val) with a permutation drawn from `seed`:
// `val_count` samples go to validation.
std::pair<std::shared_ptr<const Dataset>, std::shared_ptr<const Dataset>> randomSplit(
    std::shared_ptr<const Dataset> base, std::int64_t val_count, std::uint64_t seed);

}  // namespace hpu::core::data
