// ModuleList: numbered children ("0", "1", ...) that the owner calls itself,
// as torch.nn.ModuleList (a transformer's decoder layers). A pipeline stage
// holds a run of another list's children under their numbers there.
#pragma once

#include <cstdint>
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
  // Appends `m` as child `number` (a stage's run of layers: their numbers in the whole model).
  template <class M>
  std::shared_ptr<M> append(std::shared_ptr<M> m, std::int64_t number) {
    return registerModule(std::to_string(number), std::move(m));
  }
  std::size_t size() const { return children().size(); }
  Module& operator[](std::size_t i) const { return *children()[i].second; }
};

}  // namespace hpu::core::nn
