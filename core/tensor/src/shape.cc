#include "hpu/core/tensor/shape.h"

#include <stdexcept>

namespace hpu::core {

Shape::Shape(std::span<const std::int64_t> dims) : n_(static_cast<int>(dims.size())) {
  if (dims.size() > kMaxDims) throw std::logic_error("tensor of more than 6 dimensions");
  for (std::size_t i = 0; i < dims.size(); ++i) d_[i] = dims[i];
}

std::int64_t Shape::numel() const { return tail(0); }

std::int64_t Shape::tail(int from) const {
  std::int64_t n = 1;
  for (int i = from; i < n_; ++i) n *= d_[static_cast<std::size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (n_ != o.n_) return false;
  for (int i = 0; i < n_; ++i)
    if (d_[static_cast<std::size_t>(i)] != o.d_[static_cast<std::size_t>(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < n_; ++i) {
    if (i) s += ", ";
    s += std::to_string(d_[static_cast<std::size_t>(i)]);
  }
  return s + "]";
}

}  // namespace hpu::core
