#include "hpu/core/data/token_blocks.h"

#include <algorithm>

namespace hpu::core::data {

std::vector<Field> tokenBlockFields(std::int64_t block_size) {
  return {{"input_ids", device::DType::kInt64, {block_size}}, {"labels", device::DType::kInt64, {block_size}}};
}

TokenBlocks::TokenBlocks(std::vector<std::int64_t> tokens, std::int64_t block_size)
    : tokens_(std::move(tokens)), block_(block_size), fields_(tokenBlockFields(block_size)) {}

void TokenBlocks::fetch(std::span<const std::int64_t> indices, std::span<const FieldBuffer> out) const {
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::int64_t* block = tokens_.data() + indices[i] * block_;
    std::copy_n(block, block_, out[0].ints + static_cast<std::int64_t>(i) * block_);
    std::copy_n(block + 1, block_, out[1].ints + static_cast<std::int64_t>(i) * block_);
  }
}

}  // namespace hpu::core::data
