// ModuleList: numbered children ("0", "1", ...) that the owner calls itself,
// as torch.nn.ModuleList (a transformer's decoder layers).
#pragma once

#include <memory>

#include "hpu/core/nn/module.h"

namespace hpu::core::nn {

class ModuleList : public Module {
 public:
  std::string typeName() const override { return "ModuleList"; }
  template <class M>
  std::shared_ptr<M> append(std::shared_ptr<M> m) {
    return registerModule(std::to_string(children().size()), std::move(m));
  }
  std::size_t size() const { return children().size(); }
  Module& operator[](std::size_t i) const { return *children()[i].second; }
};

}  // namespace hpu::core::nn
