// Modules: layers and models as a tree of named children with named
// parameters (trained) and buffers (state such as batch-norm statistics).
// A module's tensors live on the device it was built on (InitContext).
// Not thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hpu/core/base/random.h"
#include "hpu/core/tensor/shard.h"
#include "hpu/core/tensor/tensor.h"
#include "hpu/core/tensor/tensor_dict.h"

namespace hpu::core::ops {
class ParallelGroup;
}

namespace hpu::core::nn {

// Interleaved 1F1B's virtual pipeline stages: each pipeline stage holds
// `count` model chunks, or chunks of `layers` decoder layers each (0: by
// count). `origin`: where the setting was given ("file:line:col", "command
// line"), for messages.
struct VirtualStages {
  int count = 1;
  int layers = 0;
  std::string origin;
};

// What building a module needs: the device its tensors go to and the
// generator its parameters are initialised from.
struct InitContext {
  device::Device& device;
  Generator& rng;          // parameter initialisation
  Generator& dropout_rng;  // masks of Dropout layers (checkpointed by the Trainer)
  DType param_dtype = DType::kFloat32;
  // Activation checkpoints keep their saved inputs in host memory
  // (DeepSpeed's cpu_checkpointing).
  bool checkpoint_on_host = false;
  // The run's seed (seed_everything), for streams a model draws itself
  // (generation's sampling).
  std::uint64_t seed = 0;
  // The trainable parameters will be partitioned (ZeRO-3): a model that
  // loads their values from files leaves them to
  // LightningModule::fillDeferredParameter, which fills each rank's shard.
  bool defer_trainable_values = false;
  // The tensor-parallel group a model splits its layers across (null: no
  // tensor parallelism).
  ops::ParallelGroup* tensor_parallel = nullptr;
  // Under tensor parallelism, the multiple a model that pads its vocabulary
  // pads to (times the group's size) when its own config sets none; null:
  // the model's default (Megatron-LM's 128).
  std::optional<std::int64_t> vocab_divisible_by;
  // The expert-parallel group a mixture of experts splits its experts
  // across (null: every rank holds every expert).
  ops::ParallelGroup* expert_parallel = nullptr;
  // Between its tensor-parallel regions, the model splits activations along
  // the sequence across that group (training and evaluation; generation
  // with a KV cache runs without).
  bool sequence_parallel = false;
  // Pipeline parallelism: the model builds and runs stage `pipeline_stage`
  // of `pipeline_stages` (a LightningModule that splits into stages says how:
  // module/pipeline_module.h). `pipeline_layers`: the decoder layers of each
  // stage (with virtual stages, of each model chunk), in order (empty:
  // balanced by parameter count).
  int pipeline_stage = 0;
  int pipeline_stages = 1;
  std::vector<int> pipeline_layers;
  VirtualStages virtual_stages;
};

// `ctx` drawing its initial values from `rng` instead.
inline InitContext withRng(const InitContext& ctx, Generator& rng) {
  InitContext out{ctx.device, rng, ctx.dropout_rng};
  out.param_dtype = ctx.param_dtype;
  out.checkpoint_on_host = ctx.checkpoint_on_host;
  out.seed = ctx.seed;
  out.defer_trainable_values = ctx.defer_trainable_values;
  out.tensor_parallel = ctx.tensor_parallel;
  out.vocab_divisible_by = ctx.vocab_divisible_by;
  out.expert_parallel = ctx.expert_parallel;
  out.sequence_parallel = ctx.sequence_parallel;
  out.pipeline_stage = ctx.pipeline_stage;
  out.pipeline_stages = ctx.pipeline_stages;
  out.pipeline_layers = ctx.pipeline_layers;
  out.virtual_stages = ctx.virtual_stages;
  return out;
}

struct NamedTensor {
  std::string name;
  Tensor tensor;
  Shard shard{};  // a parameter split across tensor-parallel ranks: this rank's piece
  // > 1: an expert's parameter under expert parallelism: each of that many
  // ranks holds other experts of its layer (Module::splitExperts), and the
  // ranks holding this one reduce its gradient among themselves.
  int expert_parallel = 1;
  // A buffer a checkpoint may lack: state its module starts afresh without
  // (fp8 scaling windows, absent from a run that was not in fp8).
  bool optional = false;
};

// A model's parameter elements, whole: a tensor-parallel rank counts every
// rank's piece of its split ones (as a DTensor's numel()), an
// expert-parallel rank every rank's experts of its layer (all of one
// shape); a padded vocabulary's rows are not parameters (Shard::padding).
struct ParameterCount {
  std::int64_t total = 0;
  std::int64_t trainable = 0;  // of total, those of parameters that require a gradient (not frozen)
  // Elements of the padded vocabulary's rows beyond total, every rank's
  // together: memory the devices hold that no checkpoint does.
  std::int64_t padding = 0;
};

struct BufferOptions {
  bool optional = false;  // see NamedTensor::optional
};

class Module;
class KVCache;

// The inputs of a forward call with several: named tensors (input_ids,
// attention_mask, position_ids, ...) and, while generating, the decoder's
// key/value cache (kv_cache.h; null otherwise).
struct Inputs {
  TensorDict tensors;
  KVCache* kv_cache = nullptr;
};

// Called around a module's forward through operator() (ZeRO-3 gathers the
// module's parameters before and releases them after).
class ForwardHooks {
 public:
  virtual ~ForwardHooks() = default;
  virtual void before(Module& m) = 0;
  virtual void after(Module& m) = 0;
};

template <class M>
class Child;

class Module {
 public:
  virtual ~Module() = default;

  // The type shown in model summaries ("Linear").
  virtual std::string typeName() const = 0;
  // One input (the layers a Sequential chains).
  virtual Tensor forward(const Tensor& x);
  // Several named inputs (a batch, attention masks, positions, a KV cache).
  // Default: forward() of the first tensor, as a Lightning model's forward
  // gets batch[0].
  virtual Tensor forward(const Inputs& inputs);
  // Run forward() between the forward hooks, if any, and remember the output
  // shape for the model summary.
  Tensor operator()(const Tensor& x);
  Tensor operator()(const Inputs& inputs);
  // Installs `hooks` on this module and its descendants (nullptr removes).
  void setForwardHooks(const std::shared_ptr<ForwardHooks>& hooks);

  // Fusion of a Sequential's neighbours: how many of the modules after this
  // one (`next`, in order) forwardFused() computes together with it; 0:
  // none (the default).
  virtual std::size_t fusesWith(std::span<Module* const> next) const;
  // The last of `fused` applied after the ones before it and this module,
  // on x: the same values and gradients as running them in turn.
  // `own_output` gets the shape of this module's output, which it need not
  // materialise. REQUIRES: fused.size() == fusesWith(fused).
  virtual Tensor forwardFused(std::span<Module* const> fused, const Tensor& x, Shape& own_output);
  // forwardFused() inside the hooks of this module and each of `fused`;
  // remembers every output shape, as operator() of each in turn would.
  Tensor callFused(std::span<Module* const> fused, const Tensor& x);
  // The parameters registered on this module itself (not its children).
  const std::vector<NamedTensor>& ownParameters() const { return params_; }
  // Parameters of other modules this module's forward reads (a language
  // model's output projection tied to its input embedding): not its own (not
  // counted, saved or stepped twice), but present while it runs (ZeRO-3
  // gathers them around its forward as its own).
  void useParameter(const Tensor& t) { used_.push_back(t); }
  const std::vector<Tensor>& usedParameters() const { return used_; }
  // Whether ZeRO-3 gathers this module's parameters and its descendants'
  // together around its forward instead of child by child (DeepSpeed's
  // set_z3_leaf_modules): a module that calls some of its children on one
  // rank and others on another (a mixture of experts' experts) must, so
  // that every rank issues the same gathers.
  virtual bool zero3Leaf() const { return false; }
  // From now on, in training with a tape recording (and no KV cache), this
  // module's forward keeps none of its activations: backward recomputes
  // them from its saved inputs, dropout drawing the same masks from `rng`
  // rewound (activation checkpointing of a module class, FSDP's
  // activation_checkpointing_policy; torch's checkpoint_wrapper).
  void recomputeInBackward(Generator* rng) {
    recompute_ = true;
    recompute_rng_ = rng;
  }
  // This module's and its descendants' parameters are the experts this rank
  // holds of a layer whose experts are split across `ranks` ranks (expert
  // parallelism; NamedTensor::expert_parallel).
  void splitExperts(int ranks) { expert_parallel_ = ranks; }

  // Registration (call from constructors / configureModel). A registered
  // parameter requires a gradient.
  // A parameter split across tensor-parallel ranks names this rank's piece.
  Tensor registerParameter(std::string name, Tensor t, Shard shard = {});
  // Registers a parameter taken over from another module (a wrapper's: fp8
  // layers, LoRA) as it is: frozen stays frozen.
  Tensor adoptParameter(std::string name, Tensor t, Shard shard = {});
  Tensor registerBuffer(std::string name, Tensor t, BufferOptions options = {});
  template <class M>
  std::shared_ptr<M> registerModule(std::string name, std::shared_ptr<M> m) {
    children_.emplace_back(std::move(name), m);
    return m;
  }
  // Registers `m` and returns the handle its owner calls it through: unlike
  // a pointer to `m`, the handle follows a replacement of the child (fp8
  // layers replacing nn::Linear).
  template <class M>
  Child<M> registerChild(std::string name, std::shared_ptr<M> m) {
    children_.emplace_back(std::move(name), std::move(m));
    return Child<M>(this, children_.size() - 1);
  }

  // Recursive, in registration order, names dotted ("fc1.weight").
  std::vector<NamedTensor> namedParameters() const;
  std::vector<NamedTensor> namedBuffers() const;
  std::vector<Tensor> parameters() const;
  // The parameters' elements by what they count for (ParameterCount), this
  // module's and its descendants'. Parameters in `except` (Tensor::sameAs)
  // are left out.
  ParameterCount countParameters(std::span<const Tensor> except = {}) const;
  std::int64_t numParameters(std::span<const Tensor> except = {}) const { return countParameters(except).total; }
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  // For module rewrites (e.g. fp8 layer replacement) before training starts.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>>& mutableChildren() { return children_; }

  // Training / evaluation mode (dropout, batch norm), recursive.
  void train(bool on = true);
  void eval() { train(false); }
  bool training() const { return training_; }

  // The shape of the last forward() output through operator(), if any.
  const Shape& lastOutputShape() const { return last_output_shape_; }
  // One line describing the layer's configuration ("in=784, out=256").
  virtual std::string describe() const { return ""; }

 private:
  template <class Forward>
  Tensor hooked(Forward forward);
  // Whether this forward call is recomputed in backward (recomputeInBackward).
  bool recomputesNow(const KVCache* cache) const;
  // `expert_parallel`: the enclosing modules' (splitExperts).
  void collect(const std::string& prefix, bool params, std::vector<NamedTensor>& out, int expert_parallel = 1) const;

  std::vector<NamedTensor> params_;
  std::vector<Tensor> used_;
  std::vector<NamedTensor> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  int expert_parallel_ = 1;
  bool recompute_ = false;
  Generator* recompute_rng_ = nullptr;
  Shape last_output_shape_;
  std::shared_ptr<ForwardHooks> hooks_;
};

// Every module of `root`'s tree (root included, in pre-order) whose
// typeName is one of `classes`. Throws UsageError naming `setting` and a
// class that matches no module, with the classes the tree has.
std::vector<Module*> modulesOfClasses(Module& root, const std::vector<std::string>& classes, const std::string& setting);

// A registered child as its owner holds it (see Module::registerChild).
template <class M = Module>
class Child {
 public:
  Child() = default;
  Child(Module* owner, std::size_t index) : owner_(owner), index_(index) {}
  // A handle of a derived type converts to one of its base (lm_head: a Linear, or a tied projection).
  template <class N>
  Child(const Child<N>& other) : owner_(other.owner_), index_(other.index_) {}
  Module& module() const { return *owner_->children()[index_].second; }
  // Whether a child was registered (an optional part of a module: false for a default-made handle).
  explicit operator bool() const { return owner_ != nullptr; }
  Tensor operator()(const Tensor& x) const { return module()(x); }
  Tensor operator()(const Inputs& inputs) const { return module()(inputs); }
  // The child as an M. REQUIRES: it still is one (not replaced by another type).
  M* operator->() const {
    auto* m = dynamic_cast<M*>(&module());
    if (m == nullptr)
      throw std::logic_error(owner_->typeName() + ": child " + owner_->children()[index_].first +
                             " was replaced by a " + module().typeName());
    return m;
  }
  M& operator*() const { return *operator->(); }

 private:
  template <class N>
  friend class Child;
  Module* owner_ = nullptr;
  std::size_t index_ = 0;
};

}  // namespace hpu::core::nn
