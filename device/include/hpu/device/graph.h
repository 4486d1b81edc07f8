// Lazy / eager execution bookkeeping of one device: which graphs (lazy) or
// op recipes (eager) the emulated graph compiler would compile, and why.
//
// Lazy mode (PT_HPU_LAZY_MODE=1, the default): every op of a step is recorded
// with its operand shapes and dtypes; markStep() closes the step's graph and
// looks it up in the recipe cache. A miss is a graph compilation; a hit reuses
// the compiled recipe. Eager mode (PT_HPU_LAZY_MODE=0): every distinct
// (op, shapes, dtypes) is a recipe compiled on first use and hit after.
//
// A compilation of a graph that has the same ops as one compiled before but
// different operand shapes or dtypes is a recompilation (dynamic shapes; in
// eager mode only after the first step, which compiles every layer's recipes,
// so an op that recurs with other shapes there is another layer); its
// cause names the ops whose operands changed against the most similar
// previously compiled graph, e.g. "linear (op 1 of 12) operand 0: [64,784] ->
// [32,784]". summary() reports the counts and causes at the end of a run and,
// when only leading (batch) dimensions changed, suggests drop_last or padding.
//
// recordOp() costs an incremental hash and a few appends to reused vectors:
// no allocation in steady state, no string building. In lazy mode the step's
// record grows until markStep(): the loop calls it once per training step and
// per evaluation batch, as Lightning calls htcore.mark_step().
//
// Thread-safety: none. One thread (the one running the training loop on this
// device) records ops, marks steps and reads the results.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hpu/device/dtype.h"
#include "hpu/device/hash.h"

namespace hpu::device {

class RecipeDiskCache;

enum class ExecutionMode { kLazy, kEager };
std::string_view executionModeName(ExecutionMode mode);  // "lazy", "eager"

// An op kind. Constructible only from a compile-time string (a literal), so a
// record keeps a pointer, never a copy, and the name's hash is a constant.
class OpName {
 public:
  consteval OpName(const char* name) : name_(name), hash_(detail::fnv1a(name_)) {}
  constexpr std::string_view name() const { return name_; }
  constexpr std::uint64_t hash() const { return hash_; }

 private:
  std::string_view name_;
  std::uint64_t hash_;
};

// One operand of a recorded op: its shape and dtype (data is not recorded).
struct OperandInfo {
  std::span<const std::int64_t> shape;
  DType dtype;
  // The tape will compute this operand's gradient (estimate prices only the
  // gradients backward computes: none for a LoRA model's frozen weights).
  // Not part of a graph's key.
  bool requires_grad = false;
};

struct GraphStats {
  std::uint64_t steps = 0;           // markStep() calls
  std::uint64_t ops = 0;             // recordOp() calls
  std::uint64_t compilations = 0;    // cache misses: graphs (lazy) or recipes (eager) compiled
  std::uint64_t cacheHits = 0;       // lookups served without compiling (disk hits included)
  std::uint64_t diskCacheHits = 0;   // of cacheHits, served by PT_HPU_RECIPE_CACHE_CONFIG's directory
  std::uint64_t recompilations = 0;  // of compilations, caused by changed shapes or dtypes
};

struct RecompileCause {
  std::uint64_t step;       // 1-based step in which the compilation happened
  std::string change;       // "linear (op 1 of 12) operand 0: [64,784] -> [32,784]; ..."
  bool leadingDimOnly;      // every changed operand differs only in dimension 0
  bool firstOpChanged;      // the step's first op changed (its inputs), not only ops after it
};

namespace detail {

// The compact record of a graph: ops in order, their operands, their dims.
struct GraphRecord {
  struct Op {
    std::string_view name;
    std::uint64_t nameHash;
    std::uint32_t firstOperand;
    std::uint32_t numOperands;
  };
  struct Operand {
    std::uint32_t firstDim;
    std::uint32_t rank;
    DType dtype;
  };
  std::vector<Op> ops;
  std::vector<Operand> operands;
  std::vector<std::int64_t> dims;
  std::uint64_t key = 0;        // hash of everything: the recipe cache key
  std::uint64_t structure = 0;  // hash of op names and operand counts only

  void clear();
  bool empty() const { return ops.empty(); }
  void append(OpName op, std::span<const OperandInfo> operandInfos);
  // A text form, one op per line ("linear float32[64,784] float32[10,784]"),
  // stable across processes: the disk cache stores and compares it.
  std::string serialize() const;
};

// Compiled graphs of one device and the explanation of misses.
class RecipeCache {
 public:
  bool contains(std::uint64_t key) const { return byKey_.count(key) != 0; }
  // Records a compiled graph; returns the cause if a graph with the same
  // structure was compiled before (a recompilation).
  std::optional<RecompileCause> insert(const GraphRecord& graph, std::uint64_t step);

 private:
  std::vector<GraphRecord> graphs_;
  std::unordered_map<std::uint64_t, std::size_t> byKey_;
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> byStructure_;
};

}  // namespace detail

struct GraphOptions {
  ExecutionMode mode = ExecutionMode::kLazy;
  // What recipes are compiled for (the generation name): part of every
  // recipe's identity in the disk cache.
  std::string target = "gaudi2";
  // Optional, shared by the devices of a process: persists compiled recipes
  // across processes (PT_HPU_RECIPE_CACHE_CONFIG).
  std::shared_ptr<RecipeDiskCache> diskCache = nullptr;
};

class GraphRuntime {
 public:
  // deviceName labels summary().
  GraphRuntime(std::string deviceName, GraphOptions options);
  ~GraphRuntime();
  GraphRuntime(const GraphRuntime&) = delete;
  GraphRuntime& operator=(const GraphRuntime&) = delete;

  ExecutionMode mode() const { return options_.mode; }

  void recordOp(OpName op, std::initializer_list<OperandInfo> operands) {
    recordOp(op, std::span<const OperandInfo>(operands.begin(), operands.size()));
  }
  void recordOp(OpName op, std::span<const OperandInfo> operands);
  // Ends a step: in lazy mode compiles or reuses the step's graph.
  void markStep();
  // Drops the ops recorded since the last markStep() without compiling
  // them: the step failed (out of memory) and runs nothing.
  void discardStep() { current_.clear(); }

  const GraphStats& stats() const { return stats_; }
  // The first kMaxRecordedCauses recompile causes, in order.
  static constexpr std::size_t kMaxRecordedCauses = 32;
  const std::vector<RecompileCause>& recompileCauses() const { return causes_; }
  // True if some recompilation changed only leading (batch) dimensions.
  bool leadingDimRecompiled() const { return leadingDimRecompiled_; }
  // Multi-line report for the end of a run.
  std::string summary() const;

 private:
  void lookUp(const detail::GraphRecord& graph);

  std::string deviceName_;
  GraphOptions options_;
  detail::GraphRecord current_;
  detail::RecipeCache cache_;
  GraphStats stats_;
  std::uint64_t ops_at_step_start_ = 0;  // stats_.ops at the last markStep()
  std::vector<RecompileCause> causes_;
  bool leadingDimRecompiled_ = false;
  bool innerShapeRecompiled_ = false;  // a recompilation with the step's first op unchanged
};

}  // namespace hpu::device
