#include "hpu/device/graph.h"

#include <fmt/core.h>

#include <limits>

#include "hpu/device/check.h"
#include "hpu/device/recipe_disk_cache.h"
#include "hpu/device/threading.h"

namespace hpu::device {
namespace {

constexpr std::uint64_t kSeed = 0x243F6A8885A308D3ull;
constexpr std::size_t kListedOps = 3;  // changed ops spelled out per recompile cause

// One multiply-fold round (as in wyhash): fast and mixes every input bit.
inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  const unsigned __int128 m =
      static_cast<unsigned __int128>(h ^ 0xa0761d6478bd642full) * (v ^ 0xe7037ed1a0b428dbull);
  return static_cast<std::uint64_t>(m) ^ static_cast<std::uint64_t>(m >> 64);
}

using detail::GraphRecord;

std::span<const std::int64_t> dimsOf(const GraphRecord& g, const GraphRecord::Operand& o) {
  return {g.dims.data() + o.firstDim, o.rank};
}

bool sameOperand(const GraphRecord& a, const GraphRecord::Operand& x, const GraphRecord& b,
                 const GraphRecord::Operand& y) {
  if (x.dtype != y.dtype || x.rank != y.rank) return false;
  auto dx = dimsOf(a, x), dy = dimsOf(b, y);
  return std::equal(dx.begin(), dx.end(), dy.begin());
}

bool sameStructure(const GraphRecord& a, const GraphRecord& b) {
  if (a.ops.size() != b.ops.size()) return false;
  for (std::size_t i = 0; i < a.ops.size(); ++i)
    if (a.ops[i].nameHash != b.ops[i].nameHash || a.ops[i].numOperands != b.ops[i].numOperands ||
        a.ops[i].name != b.ops[i].name)
      return false;
  return true;
}

// Operands of `g` that differ from those of `base` (same structure): the
// distance that picks the most similar compiled graph.
std::size_t countChangedOperands(const GraphRecord& base, const GraphRecord& g) {
  std::size_t changed = 0;
  for (std::size_t i = 0; i < g.operands.size(); ++i)
    changed += !sameOperand(base, base.operands[i], g, g.operands[i]);
  return changed;
}

std::string formatOperand(const GraphRecord& g, const GraphRecord::Operand& o, bool withDType) {
  std::string s;
  if (withDType) s += dtypeName(o.dtype);
  s += '[';
  auto dims = dimsOf(g, o);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(dims[i]);
  }
  s += ']';
  return s;
}

bool onlyLeadingDimDiffers(const GraphRecord& a, const GraphRecord::Operand& x, const GraphRecord& b,
                           const GraphRecord::Operand& y) {
  if (x.dtype != y.dtype || x.rank != y.rank || x.rank == 0) return false;
  auto dx = dimsOf(a, x), dy = dimsOf(b, y);
  return std::equal(dx.begin() + 1, dx.end(), dy.begin() + 1);
}

RecompileCause describeChange(const GraphRecord& base, const GraphRecord& g, std::uint64_t step) {
  RecompileCause cause{step, {}, true, false};
  std::size_t changed = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    bool opChanged = false;
    for (std::uint32_t j = 0; j < g.ops[i].numOperands; ++j) {
      const auto& before = base.operands[base.ops[i].firstOperand + j];
      const auto& after = g.operands[g.ops[i].firstOperand + j];
      if (sameOperand(base, before, g, after)) continue;
      cause.leadingDimOnly = cause.leadingDimOnly && onlyLeadingDimDiffers(base, before, g, after);
      if (!opChanged && changed < kListedOps) {
        const bool withDType = before.dtype != after.dtype;
        if (changed > 0) cause.change += "; ";
        cause.change += fmt::format("{} (op {} of {}) operand {}: {} -> {}", g.ops[i].name, i + 1,
                                    g.ops.size(), j, formatOperand(base, before, withDType),
                                    formatOperand(g, after, withDType));
      }
      opChanged = true;
    }
    if (opChanged) ++changed;
    if (opChanged && i == 0) cause.firstOpChanged = true;
  }
  if (changed > kListedOps) cause.change += fmt::format("; and {} more ops", changed - kListedOps);
  return cause;
}

std::string counted(std::uint64_t n, std::string_view noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

}  // namespace

std::string_view executionModeName(ExecutionMode mode) {
  return mode == ExecutionMode::kLazy ? "lazy" : "eager";
}

namespace detail {

void GraphRecord::clear() {
  ops.clear();
  operands.clear();
  dims.clear();
  key = kSeed;
  structure = kSeed;
}

void GraphRecord::append(OpName op, std::span<const OperandInfo> operandInfos) {
  HPU_CHECK(operandInfos.size() <= std::numeric_limits<std::uint32_t>::max());
  const auto firstOperand = static_cast<std::uint32_t>(operands.size());
  const std::uint64_t opStructure = mix(op.hash(), operandInfos.size());
  std::uint64_t h = opStructure;
  for (const OperandInfo& o : operandInfos) {
    operands.push_back({static_cast<std::uint32_t>(dims.size()), static_cast<std::uint32_t>(o.shape.size()),
                        o.dtype});
    dims.insert(dims.end(), o.shape.begin(), o.shape.end());
    h = mix(h, static_cast<std::uint64_t>(o.dtype) | (static_cast<std::uint64_t>(o.shape.size()) << 8));
    for (std::int64_t d : o.shape) h = mix(h, static_cast<std::uint64_t>(d));
  }
  ops.push_back({op.name(), op.hash(), firstOperand, static_cast<std::uint32_t>(operandInfos.size())});
  key = mix(key, h);
  structure = mix(structure, opStructure);
}

std::string GraphRecord::serialize() const {
  std::string text;
  for (const Op& op : ops) {
    text += op.name;
    for (std::uint32_t j = 0; j < op.numOperands; ++j) {
      text += ' ';
      text += formatOperand(*this, operands[op.firstOperand + j], true);
    }
    text += '\n';
  }
  return text;
}

std::optional<RecompileCause> RecipeCache::insert(const GraphRecord& graph, std::uint64_t step) {
  std::optional<RecompileCause> cause;
  auto similar = byStructure_.find(graph.structure);
  if (similar != byStructure_.end()) {
    const GraphRecord* best = nullptr;
    std::size_t bestChanged = std::numeric_limits<std::size_t>::max();
    for (std::size_t index : similar->second) {
      const GraphRecord& candidate = graphs_[index];
      if (!sameStructure(candidate, graph)) continue;  // a structure-hash collision
      const std::size_t changed = countChangedOperands(candidate, graph);
      if (changed < bestChanged) {
        best = &candidate;
        bestChanged = changed;
      }
    }
    if (best != nullptr && bestChanged > 0) cause = describeChange(*best, graph, step);
  }
  const std::size_t index = graphs_.size();
  graphs_.push_back(graph);
  byKey_.emplace(graph.key, index);
  byStructure_[graph.structure].push_back(index);
  return cause;
}

}  // namespace detail

GraphRuntime::GraphRuntime(std::string deviceName, GraphOptions options)
    : deviceName_(std::move(deviceName)), options_(std::move(options)) {
  current_.clear();
}

GraphRuntime::~GraphRuntime() = default;

void GraphRuntime::recordOp(OpName op, std::span<const OperandInfo> operands) {
  ++stats_.ops;
  if (options_.mode == ExecutionMode::kEager) {
    current_.clear();
    current_.append(op, operands);
    lookUp(current_);
  } else {
    current_.append(op, operands);
  }
}

void GraphRuntime::markStep() {
  if (options_.mode == ExecutionMode::kLazy && !current_.empty()) lookUp(current_);
  current_.clear();
  ++stats_.steps;
  stepEnded(stats_.ops - ops_at_step_start_);  // the intra-op threads' step-level choice
  ops_at_step_start_ = stats_.ops;
}

void GraphRuntime::lookUp(const detail::GraphRecord& graph) {
  if (cache_.contains(graph.key)) {
    ++stats_.cacheHits;
    return;
  }
  const std::uint64_t step = stats_.steps + 1;
  if (options_.diskCache) {
    const std::string recipe =
        fmt::format("{} {}\n{}", options_.target, executionModeName(options_.mode), graph.serialize());
    if (options_.diskCache->contains(recipe)) {
      ++stats_.cacheHits;
      ++stats_.diskCacheHits;
      cache_.insert(graph, step);
      return;
    }
    options_.diskCache->store(recipe);
  }
  ++stats_.compilations;
  std::optional<RecompileCause> cause = cache_.insert(graph, step);
  // In eager mode the first step compiles the model's recipes: an op seen
  // with other shapes there is another layer, not a dynamic shape.
  const bool warmingUp = options_.mode == ExecutionMode::kEager && stats_.steps == 0;
  if (!cause || warmingUp) return;
  ++stats_.recompilations;
  leadingDimRecompiled_ = leadingDimRecompiled_ || (cause->leadingDimOnly && cause->firstOpChanged);
  innerShapeRecompiled_ = innerShapeRecompiled_ || !cause->firstOpChanged;
  if (causes_.size() < kMaxRecordedCauses) causes_.push_back(std::move(*cause));
}

std::string GraphRuntime::summary() const {
  const bool lazy = options_.mode == ExecutionMode::kLazy;
  std::string s = fmt::format("{} {} mode: {}, {}; {}, {}", deviceName_, executionModeName(options_.mode),
                              counted(stats_.steps, "step"), counted(stats_.ops, "op"),
                              counted(stats_.compilations, lazy ? "graph compilation" : "recipe compilation"),
                              counted(stats_.cacheHits, "cache hit"));
  if (stats_.diskCacheHits > 0) s += fmt::format(" ({} from the recipe disk cache)", stats_.diskCacheHits);
  if (stats_.recompilations == 0) return s;
  s += fmt::format("\n{} from changed shapes or dtypes:", counted(stats_.recompilations, "recompilation"));
  for (const RecompileCause& c : causes_) s += fmt::format("\n  step {}: {}", c.step, c.change);
  if (stats_.recompilations > causes_.size())
    s += fmt::format("\n  ... and {} more", stats_.recompilations - causes_.size());
  if (leadingDimRecompiled_)
    s += "\nhint: the leading (batch) dimension changed, as a smaller last batch of an epoch does; set "
         "data.init_args.drop_last=true (DataLoader drop_last=True) or pad batches to a fixed size so "
         "every step reuses one compiled graph";
  if (innerShapeRecompiled_)
    s += "\nhint: shapes changed inside a step whose first op kept its shapes: an op whose output size depends on "
         "the values it reads (a dropless mixture of experts' rows per expert) makes a graph of every size it "
         "meets, on Gaudi as here";
  return s;
}

}  // namespace hpu::device
