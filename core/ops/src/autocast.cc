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
    if (ops::findOp(name) == nullptr) {
      std::string list;
      for (const ops::OpInfo& op : ops::opTable()) list += (list.empty() ? "" : ", ") + std::string(op.str());
      problems.push_back(
          fmt::format("{}:{}: {} names '{}', which is not an op; ops are: {}", path, line_no, variable, name, list));
      continue;
    }
    ops.push_back(name);
  }
  if (!problems.empty()) throw ConfigError(problems);
  return ops;
}

}  // namespace

Policy Policy::defaults() {
  Policy p;
  for (const ops::OpInfo& op : ops::opTable()) {
    if (op.autocast == ops::AutocastClass::kLower) p.lower_.emplace_back(op.str());
    if (op.autocast == ops::AutocastClass::kFp32) p.fp32_.emplace_back(op.str());
  }
  return p;
}

Policy Policy::fromEnv(const Environment& env) {
  Policy p = defaults();
  if (const auto path = env.get("LOWER_LIST"); path && !path->empty()) p.lower_ = readOpList("LOWER_LIST", *path);
  if (const auto path = env.get("FP32_LIST"); path && !path->empty()) p.fp32_ = readOpList("FP32_LIST", *path);
  return p;
}

ops::AutocastClass Policy::of(const ops::OpInfo& op) const {
  if (std::find(fp32_.begin(), fp32_.end(), op.str()) != fp32_.end()) return ops::AutocastClass::kFp32;
  if (std::find(lower_.begin(), lower_.end(), op.str()) != lower_.end()) return ops::AutocastClass::kLower;
  return ops::AutocastClass::kPromote;
}

void installPolicy(Policy p) { g_policy = std::make_unique<Policy>(std::move(p)); }

const Policy& policy() {
  static const Policy fallback = Policy::defaults();
  return g_policy ? *g_policy : fallback;
}

const State& current() { return tls_state; }

Scope::Scope(bool enabled, DType dtype) : previous_(tls_state) { tls_state = State{enabled, dtype}; }
Scope::~Scope() { tls_state = previous_; }

DType computeDtype(const ops::OpInfo& op, DType widest_input) {
  if (!tls_state.enabled) return widest_input;
  switch (policy().of(op)) {
    case ops::AutocastClass::kLower:
      return tls_state.dtype;
    case ops::AutocastClass::kFp32:
      return DType::kFloat32;
    case ops::AutocastClass::kPromote:
      return widest_input;
  }
  return widest_input;
}

}  // namespace hpu::core::autocast
