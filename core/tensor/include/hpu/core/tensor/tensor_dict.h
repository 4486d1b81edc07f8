// Named tensors in insertion order: a batch ("x" and "y", or "input_ids",
// "labels" and "attention_mask"), or the inputs of a forward call. Small and
// copied cheaply (tensors are handles). Not thread-safe.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpu/core/tensor/tensor.h"

namespace hpu::core {

class TensorDict {
 public:
  using Item = std::pair<std::string, Tensor>;

  TensorDict() = default;
  TensorDict(std::initializer_list<Item> items);

  // Adds `name`, or replaces the tensor of that name in place.
  void set(std::string name, Tensor tensor);
  // nullptr when absent.
  const Tensor* find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  // Throws Error "no tensor 'labels' among input_ids, attention_mask".
  const Tensor& operator[](std::string_view name) const;

  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const Item& front() const { return items_.front(); }
  std::vector<Item>::const_iterator begin() const { return items_.begin(); }
  std::vector<Item>::const_iterator end() const { return items_.end(); }
  std::vector<Item>::iterator begin() { return items_.begin(); }
  std::vector<Item>::iterator end() { return items_.end(); }
  // "input_ids, attention_mask", for messages.
  std::string names() const;

 private:
  std::vector<Item> items_;
};

}  // namespace hpu::core
