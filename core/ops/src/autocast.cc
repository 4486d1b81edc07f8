#include "hpu/core/ops/autocast.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <fstream>

#include "hpu/core/base/errors.h"

namespace hpu::core::autocast {
namespace {

thread_local State tls_state;
std::unique_ptr<Policy> g_policy;

std::vector<std::string> readOpList(const std::string& variable, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("{}={}: cannot read the op list file", variable, path));
  std::vector<std::string> ops;
  std::vector<std::string> problems;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto last = line.find_last_not_of(" \t\r");
    const std::string name = line.substr(first, last - first + 1);
    const auto& known = Policy::opNames();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (auto n : known) list += (list.empty() ? "" : ", ") + std::string(n);
      problems.push_back(fmt::format("{}:{}: {} names '{}', which is not an op; ops are: {}", path, line_no, variable,
                                     name, list));
      continue;
    }
    ops.push_back(name);
  }
  if (!problems.empty()) throw ConfigError(problems);
  return ops;
}

}  // namespace

const std::vector<std::string_view>& Policy::opNames() {
  static const std::vector<std::string_view> names{
      "linear", "matmul",  "conv2d",     "max_pool2d", "avg_pool2d",    "relu",   "gelu",    "gelu_tanh",
      "tanh",   "sigmoid", "dropout",    "layer_norm", "batch_norm",    "embedding", "cross_entropy",
      "mse_loss", "add",   "sub",        "mul",        "scale",         "sum",    "softmax"};
  return names;
}

Policy Policy::defaults() {
  Policy p;
  p.lower_ = {"linear", "matmul", "conv2d"};
  p.fp32_ = {"softmax", "cross_entropy", "mse_loss", "layer_norm", "batch_norm", "sum"};
  return p;
}

Policy Policy::fromEnv(const std::map<std::string, std::string>& env) {
  Policy p = defaults();
  if (auto it = env.find("LOWER_LIST"); it != env.end() && !it->second.empty()) p.lower_ = readOpList("LOWER_LIST", it->second);
  if (auto it = env.find("FP32_LIST"); it != env.end() && !it->second.empty()) p.fp32_ = readOpList("FP32_LIST", it->second);
  return p;
}

OpPolicy Policy::of(std::string_view op) const {
  if (std::find(fp32_.begin(), fp32_.end(), op) != fp32_.end()) return OpPolicy::kFp32;
  if (std::find(lower_.begin(), lower_.end(), op) != lower_.end()) return OpPolicy::kLower;
  return OpPolicy::kPromote;
}

void installPolicy(Policy p) { g_policy = std::make_unique<Policy>(std::move(p)); }

const Policy& policy() {
  static const Policy fallback = Policy::defaults();
  return g_policy ? *g_policy : fallback;
}

const State& current() { return tls_state; }

Scope::Scope(bool enabled, DType dtype) : previous_(tls_state) { tls_state = State{enabled, dtype}; }
Scope::~Scope() { tls_state = previous_; }

DType computeDtype(std::string_view op, DType widest_input) {
  if (!tls_state.enabled) return widest_input;
  switch (policy().of(op)) {
    case OpPolicy::kLower: return tls_state.dtype;
    case OpPolicy::kFp32: return DType::kFloat32;
    case OpPolicy::kPromote: return widest_input;
  }
  return widest_input;
}

}  // namespace hpu::core::autocast
