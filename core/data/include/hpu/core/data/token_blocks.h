// A token stream cut into samples for next-token prediction: sample i holds
// "input_ids" = tokens[i * B, i * B + B) and "labels" = the same shifted by
// one, for block size B; (tokens - 1) / B samples.
#pragma once

#include <cstdint>
#include <vector>

#include "hpu/core/data/dataset.h"

namespace hpu::core::data {

// The fields of a block of `block_size`: "input_ids" and "labels", int64 [block_size].
std::vector<Field> tokenBlockFields(std::int64_t block_size);

class TokenBlocks final : public Dataset {
 public:
  // REQUIRES: tokens.size() > block_size.
  TokenBlocks(std::vector<std::int64_t> tokens, std::int64_t block_size);
  std::int64_t size() const override { return (static_cast<std::int64_t>(tokens_.size()) - 1) / block_; }
  const std::vector<Field>& fields() const override { return fields_; }
  void fetch(std::span<const std::int64_t> indices, std::span<const FieldBuffer> out) const override;

 private:
  std::vector<std::int64_t> tokens_;
  std::int64_t block_;
  std::vector<Field> fields_;
};

}  // namespace hpu::core::data
