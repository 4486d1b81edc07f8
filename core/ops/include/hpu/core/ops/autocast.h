// Automatic mixed precision (torch.autocast's model). While autocast is
// enabled on a thread, each op runs in a dtype chosen by the policy:
//  - ops on the LOWER list run in the autocast dtype (bf16 or fp16),
//    accumulating in fp32;
//  - ops on the FP32 list run in fp32;
//  - every other op runs in the widest floating dtype of its inputs.
// The built-in lists are the ops' autocast classes in the op table
// (op_table.h: linear, matmul, conv2d lower; softmax, losses, norms,
// reductions fp32).
// Inputs are cast (rounded copies, differentiable) to the op's dtype and the
// output is rounded to it, so tensors hold exactly what the device would.
//
// The lists are process-wide and fixed at start-up; LOWER_LIST / FP32_LIST
// name files with one op name per line that replace them, as on the real
// stack. Scopes nest like torch.autocast: each one sets (enabled, dtype) for
// its extent and restores the outer state when it ends.
// Thread-safety: the policy is immutable once installed; the state is
// thread-local.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hpu/core/ops/op_table.h"
#include "hpu/device/dtype.h"
#include "hpu/env/environment.h"

namespace hpu::core::autocast {

using device::DType;

class Policy {
 public:
  // The built-in lists.
  static Policy defaults();
  // defaults() with LOWER_LIST / FP32_LIST files from `env` applied (a list
  // given replaces the built-in one). Throws ConfigError naming the file,
  // line and the valid op names for a name that is not an op.
  static Policy fromEnv(const Environment& env);

  ops::AutocastClass of(const ops::OpInfo& op) const;

 private:
  std::vector<std::string> lower_, fp32_;
};

// Installs the process-wide policy (call once at start-up, before training).
void installPolicy(Policy policy);
const Policy& policy();

struct State {
  bool enabled = false;
  DType dtype = DType::kBFloat16;
};
const State& current();

// torch.autocast(device_type="hpu", dtype=..., enabled=...) for its lifetime.
class Scope {
 public:
  explicit Scope(bool enabled, DType dtype = DType::kBFloat16);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  State previous_;
};

// The dtype `op` runs in for floating inputs of dtype `widest_input`.
DType computeDtype(const ops::OpInfo& op, DType widest_input);

}  // namespace hpu::core::autocast
