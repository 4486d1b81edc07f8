// A tensor shape: up to kMaxDims dimensions stored inline (no allocation).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

namespace hpu::core {

class Shape {
 public:
  static constexpr int kMaxDims = 6;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) : Shape(std::span<const std::int64_t>(dims.begin(), dims.size())) {}
  explicit Shape(std::span<const std::int64_t> dims);

  int ndim() const { return n_; }
  std::int64_t operator[](int i) const { return d_[static_cast<std::size_t>(i < 0 ? i + n_ : i)]; }
  std::int64_t& operator[](int i) { return d_[static_cast<std::size_t>(i < 0 ? i + n_ : i)]; }
  std::int64_t numel() const;
  std::span<const std::int64_t> dims() const { return {d_.data(), static_cast<std::size_t>(n_)}; }
  // Product of dims [from, ndim).
  std::int64_t tail(int from) const;
  bool operator==(const Shape& o) const;
  // "[64, 784]"
  std::string str() const;

 private:
  std::array<std::int64_t, kMaxDims> d_{};
  int n_ = 0;
};

}  // namespace hpu::core
