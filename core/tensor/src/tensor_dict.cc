#include "hpu/core/tensor/tensor_dict.h"

#include <algorithm>

#include "hpu/core/base/errors.h"

namespace hpu::core {

TensorDict::TensorDict(std::initializer_list<Item> items) {
  for (const Item& item : items) set(item.first, item.second);
}

void TensorDict::set(std::string name, Tensor tensor) {
  for (Item& item : items_)
    if (item.first == name) {
      item.second = std::move(tensor);
      return;
    }
  items_.emplace_back(std::move(name), std::move(tensor));
}

const Tensor* TensorDict::find(std::string_view name) const {
  const auto it = std::find_if(items_.begin(), items_.end(), [&](const Item& i) { return i.first == name; });
  return it == items_.end() ? nullptr : &it->second;
}

const Tensor& TensorDict::operator[](std::string_view name) const {
  if (const Tensor* t = find(name)) return *t;
  throw Error("no tensor '" + std::string(name) + "' among " + (items_.empty() ? std::string("none") : names()));
}

std::string TensorDict::names() const {
  std::string out;
  for (const Item& item : items_) out += (out.empty() ? "" : ", ") + item.first;
  return out;
}

}  // namespace hpu::core
