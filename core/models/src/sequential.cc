// Sequential: a classifier whose layers are listed in the config, each a
// registered Layer with its own init_args; input sizes are inferred from the
// data, so a layer names only its outputs:
//   model:
//     class_path: Sequential
//     init_args:
//       layers:
//         - {class_path: Conv2d, init_args: {out_channels: 16, kernel_size: 3, padding: 1}}
//         - ReLU
//         - {class_path: MaxPool2d, init_args: {kernel_size: 2}}
//         - Flatten
//         - {class_path: Linear, init_args: {out_features: 10}}
#include <spdlog/fmt/fmt.h>

#include "classifier.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/ops/autocast.h"

namespace hpu::core::models {

// A layer described in a config; builds its module once the input shape
// (one sample, no batch dimension) is known.
class LayerSpec {
 public:
  virtual ~LayerSpec() = default;
  // Returns the module and sets `out` to its output shape. Throws UsageError
  // (prefixed with `where`) when the input shape does not fit.
  virtual std::shared_ptr<nn::Module> build(nn::InitContext& ctx, const Shape& in, Shape& out,
                                            const std::string& where) const = 0;
};

namespace {

using config::ComponentKind;
using config::ComponentSchema;
using config::Params;
using config::Type;

[[noreturn]] void misfit(const std::string& where, const std::string& why) { throw UsageError(where + ": " + why); }

class LinearSpec final : public LayerSpec {
 public:
  explicit LinearSpec(const Params& p)
      : out_(p.getInt("out_features")), in_(p.has("in_features") ? p.getInt("in_features") : -1), bias_(p.getBool("bias")) {}
  std::shared_ptr<nn::Module> build(nn::InitContext& ctx, const Shape& in, Shape& out,
                                    const std::string& where) const override {
    if (in.ndim() != 1) misfit(where, fmt::format("Linear needs flat inputs; got {} (add Flatten before it)", in.str()));
    if (in_ >= 0 && in_ != in[0])
      misfit(where, fmt::format("in_features is {} but the previous layer gives {}", in_, in[0]));
    out = Shape{out_};
    return std::make_shared<nn::Linear>(ctx, in[0], out_, bias_);
  }

 private:
  std::int64_t out_, in_;
  bool bias_;
};

// Output size of a window sweep; 0 when the kernel exceeds the padded input
// (checked first: integer division truncates toward zero).
std::int64_t pooled(std::int64_t size, std::int64_t k, std::int64_t s, std::int64_t p) {
  return size + 2 * p < k ? 0 : (size + 2 * p - k) / s + 1;
}

class Conv2dSpec final : public LayerSpec {
 public:
  explicit Conv2dSpec(const Params& p)
      : out_(p.getInt("out_channels")),
        k_(p.getInt("kernel_size")),
        stride_(p.getInt("stride")),
        pad_(p.getInt("padding")),
        bias_(p.getBool("bias")) {}
  std::shared_ptr<nn::Module> build(nn::InitContext& ctx, const Shape& in, Shape& out,
                                    const std::string& where) const override {
    if (in.ndim() != 3) misfit(where, fmt::format("Conv2d needs [channels, height, width] inputs; got {}", in.str()));
    const std::int64_t h = pooled(in[1], k_, stride_, pad_), w = pooled(in[2], k_, stride_, pad_);
    if (h <= 0 || w <= 0) misfit(where, fmt::format("kernel {} does not fit the {} input", k_, in.str()));
    out = Shape{out_, h, w};
    return std::make_shared<nn::Conv2d>(ctx, in[0], out_, k_, stride_, pad_, bias_);
  }

 private:
  std::int64_t out_, k_, stride_, pad_;
  bool bias_;
};

template <class Pool>
class PoolSpec final : public LayerSpec {
 public:
  explicit PoolSpec(const Params& p)
      : o_{p.getInt("kernel_size"), p.has("stride") ? p.getInt("stride") : 0, p.getInt("padding")} {}
  std::shared_ptr<nn::Module> build(nn::InitContext&, const Shape& in, Shape& out,
                                    const std::string& where) const override {
    if (in.ndim() != 3) misfit(where, fmt::format("pooling needs [channels, height, width] inputs; got {}", in.str()));
    const std::int64_t s = o_.stride ? o_.stride : o_.kernel;
    const std::int64_t h = pooled(in[1], o_.kernel, s, o_.padding), w = pooled(in[2], o_.kernel, s, o_.padding);
    if (h <= 0 || w <= 0) misfit(where, fmt::format("kernel {} does not fit the {} input", o_.kernel, in.str()));
    out = Shape{in[0], h, w};
    return std::make_shared<Pool>(o_);
  }

 private:
  ops::Pool2dOptions o_;
};

class FlattenSpec final : public LayerSpec {
 public:
  explicit FlattenSpec(const Params&) {}
  std::shared_ptr<nn::Module> build(nn::InitContext&, const Shape& in, Shape& out, const std::string&) const override {
    out = Shape{in.numel()};
    return std::make_shared<nn::Flatten>();
  }
};

class ActivationSpec final : public LayerSpec {
 public:
  explicit ActivationSpec(nn::ActivationKind kind) : kind_(kind) {}
  std::shared_ptr<nn::Module> build(nn::InitContext&, const Shape& in, Shape& out, const std::string&) const override {
    out = in;
    return std::make_shared<nn::Activation>(kind_);
  }

 private:
  nn::ActivationKind kind_;
};

class DropoutSpec final : public LayerSpec {
 public:
  explicit DropoutSpec(const Params& p) : p_(static_cast<float>(p.getFloat("p"))) {}
  std::shared_ptr<nn::Module> build(nn::InitContext& ctx, const Shape& in, Shape& out, const std::string&) const override {
    out = in;
    return std::make_shared<nn::Dropout>(p_, ctx.dropout_rng);
  }

 private:
  float p_;
};

class LayerNormSpec final : public LayerSpec {
 public:
  explicit LayerNormSpec(const Params& p) : eps_(static_cast<float>(p.getFloat("eps"))), affine_(p.getBool("elementwise_affine")) {}
  std::shared_ptr<nn::Module> build(nn::InitContext& ctx, const Shape& in, Shape& out, const std::string&) const override {
    out = in;
    return std::make_shared<nn::LayerNorm>(ctx, in[in.ndim() - 1], eps_, affine_);
  }

 private:
  float eps_;
  bool affine_;
};

class BatchNorm2dSpec final : public LayerSpec {
 public:
  explicit BatchNorm2dSpec(const Params& p)
      : eps_(static_cast<float>(p.getFloat("eps"))), momentum_(static_cast<float>(p.getFloat("momentum"))), affine_(p.getBool("affine")) {}
  std::shared_ptr<nn::Module> build(nn::InitContext& ctx, const Shape& in, Shape& out,
                                    const std::string& where) const override {
    if (in.ndim() != 3) misfit(where, fmt::format("BatchNorm2d needs [channels, height, width] inputs; got {}", in.str()));
    out = in;
    return std::make_shared<nn::BatchNorm2d>(ctx, in[0], eps_, momentum_, affine_);
  }

 private:
  float eps_, momentum_;
  bool affine_;
};

ComponentSchema layer(const char* name, std::vector<config::ParamSpec> params, const char* doc) {
  return ComponentSchema{ComponentKind::kLayer, name, {std::string("torch.nn.") + name}, {name, "", std::move(params)}, doc};
}

Type positiveInt() { return Type::integer().min(1); }

HPU_REGISTER_COMPONENT(LayerSpec,
                       layer("Linear",
                             {{"out_features", positiveInt(), "null", "Output features."},
                              {"in_features", Type::optional(positiveInt()), "null", "Input features (inferred; checked if given)."},
                              {"bias", Type::boolean(), "true", "Learn an additive bias."}},
                             "Fully connected layer."),
                       [](const Params& p) { return std::make_unique<LinearSpec>(p); });
HPU_REGISTER_COMPONENT(LayerSpec,
                       layer("Conv2d",
                             {{"out_channels", positiveInt(), "null", "Output channels."},
                              {"kernel_size", positiveInt(), "3", "Square kernel size."},
                              {"stride", positiveInt(), "1", "Stride."},
                              {"padding", Type::integer().min(0), "0", "Zero padding on each side."},
                              {"bias", Type::boolean(), "true", "Learn an additive bias."}},
                             "2-D convolution."),
                       [](const Params& p) { return std::make_unique<Conv2dSpec>(p); });
std::vector<config::ParamSpec> poolParams() {
  return {{"kernel_size", positiveInt(), "2", "Window size."},
          {"stride", Type::optional(positiveInt()), "null", "Stride (default: kernel_size)."},
          {"padding", Type::integer().min(0), "0", "Padding on each side."}};
}
HPU_REGISTER_COMPONENT(LayerSpec, layer("MaxPool2d", poolParams(), "2-D max pooling."),
                       [](const Params& p) { return std::make_unique<PoolSpec<nn::MaxPool2d>>(p); });
HPU_REGISTER_COMPONENT(LayerSpec, layer("AvgPool2d", poolParams(), "2-D average pooling."),
                       [](const Params& p) { return std::make_unique<PoolSpec<nn::AvgPool2d>>(p); });
HPU_REGISTER_COMPONENT(LayerSpec, layer("Flatten", {}, "Flattens each sample to a vector."),
                       [](const Params& p) { return std::make_unique<FlattenSpec>(p); });
HPU_REGISTER_COMPONENT(LayerSpec, layer("ReLU", {}, "max(0, x)."),
                       [](const Params&) { return std::make_unique<ActivationSpec>(nn::ActivationKind::kReLU); });
HPU_REGISTER_COMPONENT(LayerSpec,
                       layer("GELU", {{"approximate", Type::string({"none", "tanh"}), "none", "Exact (erf) or tanh approximation."}},
                             "Gaussian error linear unit."),
                       [](const Params& p) {
                         return std::make_unique<ActivationSpec>(p.getString("approximate") == "tanh" ? nn::ActivationKind::kGELUTanh
                                                                                                     : nn::ActivationKind::kGELU);
                       });
HPU_REGISTER_COMPONENT(LayerSpec, layer("Tanh", {}, "Hyperbolic tangent."),
                       [](const Params&) { return std::make_unique<ActivationSpec>(nn::ActivationKind::kTanh); });
HPU_REGISTER_COMPONENT(LayerSpec, layer("Sigmoid", {}, "Logistic sigmoid."),
                       [](const Params&) { return std::make_unique<ActivationSpec>(nn::ActivationKind::kSigmoid); });
HPU_REGISTER_COMPONENT(LayerSpec,
                       layer("Dropout", {{"p", Type::real().min(0.0).max(1.0, true), "0.5", "Probability of zeroing an element."}},
                             "Randomly zeroes elements in training."),
                       [](const Params& p) { return std::make_unique<DropoutSpec>(p); });
HPU_REGISTER_COMPONENT(LayerSpec,
                       layer("LayerNorm",
                             {{"eps", Type::real().min(0.0, true), "1.0e-05", "Added to the variance."},
                              {"elementwise_affine", Type::boolean(), "true", "Learn a scale and a shift."}},
                             "Normalises over the last dimension."),
                       [](const Params& p) { return std::make_unique<LayerNormSpec>(p); });
HPU_REGISTER_COMPONENT(LayerSpec,
                       layer("BatchNorm2d",
                             {{"eps", Type::real().min(0.0, true), "1.0e-05", "Added to the variance."},
                              {"momentum", Type::real().min(0.0).max(1.0), "0.1", "Running statistics update factor."},
                              {"affine", Type::boolean(), "true", "Learn a scale and a shift."}},
                             "Batch normalisation over [N, C, H, W] per channel."),
                       [](const Params& p) { return std::make_unique<BatchNorm2dSpec>(p); });

// A block of layers built one after another (shared by Autocast and Checkpoint).
void buildInto(nn::Sequential& block, const std::vector<std::unique_ptr<LayerSpec>>& specs, nn::InitContext& ctx,
               const Shape& in, Shape& out, const std::string& where) {
  Shape shape = in;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    Shape next;
    block.append(specs[i]->build(ctx, shape, next, where + ".init_args.layers[" + std::to_string(i) + "]"));
    shape = next;
  }
  out = shape;
}

std::vector<std::unique_ptr<LayerSpec>> innerLayers(const Params& p) {
  const config::Node& layers = p.node("layers");
  if (layers.items().empty()) p.fail("layers", "lists no layers");
  std::vector<std::unique_ptr<LayerSpec>> specs;
  for (std::size_t i = 0; i < layers.items().size(); ++i)
    specs.push_back(config::ComponentFactory<LayerSpec>::instance().create(
        layers.items()[i], p.pathOf("layers") + "[" + std::to_string(i) + "]"));
  return specs;
}

// Runs its layers inside an autocast region (torch.autocast's rules: the
// region sets enabled and dtype, and the outer state returns after it).
class AutocastBlock final : public nn::Sequential {
 public:
  AutocastBlock(bool enabled, DType dtype) : enabled_(enabled), dtype_(dtype) {}
  std::string typeName() const override { return "Autocast"; }
  std::string describe() const override {
    return enabled_ ? fmt::format("enabled, {}", device::dtypeName(dtype_)) : std::string("disabled");
  }
  Tensor forward(const Tensor& x) override {
    autocast::Scope scope(enabled_, dtype_);
    return nn::Sequential::forward(x);
  }

 private:
  bool enabled_;
  DType dtype_;
};

class AutocastSpec final : public LayerSpec {
 public:
  explicit AutocastSpec(const Params& p)
      : enabled_(p.getBool("enabled")),
        dtype_(p.getString("dtype") == "float16" ? DType::kFloat16 : DType::kBFloat16),
        inner_(innerLayers(p)) {}
  std::shared_ptr<nn::Module> build(nn::InitContext& ctx, const Shape& in, Shape& out,
                                    const std::string& where) const override {
    auto block = std::make_shared<AutocastBlock>(enabled_, dtype_);
    buildInto(*block, inner_, ctx, in, out, where);
    return block;
  }

 private:
  bool enabled_;
  DType dtype_;
  std::vector<std::unique_ptr<LayerSpec>> inner_;
};

HPU_REGISTER_COMPONENT(
    LayerSpec,
    ComponentSchema{ComponentKind::kLayer,
                    "Autocast",
                    {"torch.autocast"},
                    {"Autocast",
                     "",
                     {{"enabled", Type::boolean(), "true", "Autocast on (with dtype) or off inside the block."},
                      {"dtype", Type::string({"bfloat16", "float16"}), "bfloat16", "Lower-precision dtype of the region."},
                      {"layers", Type::list(Type::component({ComponentKind::kLayer})), "[]", "The layers of the region."}}},
                    "A region of layers with its own autocast setting (torch.autocast semantics)."},
    [](const Params& p) { return std::make_unique<AutocastSpec>(p); });

// Activation checkpointing of its layers: their activations are not kept
// but recomputed in backward (DeepSpeed's checkpoint()).
class CheckpointBlock final : public nn::Sequential {
 public:
  CheckpointBlock(Generator& rng, bool on_host) : rng_(&rng), on_host_(on_host) {}
  std::string typeName() const override { return "Checkpoint"; }
  std::string describe() const override { return on_host_ ? "inputs kept in host memory" : ""; }
  Tensor forward(const Tensor& x) override {
    return ops::checkpoint([this](const Tensor& in) { return nn::Sequential::forward(in); }, x, rng_, on_host_);
  }

 private:
  Generator* rng_;
  bool on_host_;
};

class CheckpointSpec final : public LayerSpec {
 public:
  explicit CheckpointSpec(const Params& p) : inner_(innerLayers(p)) {}
  std::shared_ptr<nn::Module> build(nn::InitContext& ctx, const Shape& in, Shape& out,
                                    const std::string& where) const override {
    auto block = std::make_shared<CheckpointBlock>(ctx.dropout_rng, ctx.checkpoint_on_host);
    buildInto(*block, inner_, ctx, in, out, where);
    return block;
  }

 private:
  std::vector<std::unique_ptr<LayerSpec>> inner_;
};

HPU_REGISTER_COMPONENT(
    LayerSpec,
    ComponentSchema{ComponentKind::kLayer,
                    "Checkpoint",
                    {"deepspeed.checkpointing.checkpoint", "torch.utils.checkpoint.checkpoint"},
                    {"Checkpoint",
                     "",
                     {{"layers", Type::list(Type::component({ComponentKind::kLayer})), "[]",
                       "The layers whose activations are recomputed in backward instead of kept."}}},
                    "Activation checkpointing: trades recomputation for activation memory."},
    [](const Params& p) { return std::make_unique<CheckpointSpec>(p); });

class SequentialModel final : public Classifier {
 public:
  explicit SequentialModel(const Params& p)
      : Classifier(p.getFloat("lr"), static_cast<float>(p.getFloat("label_smoothing"))), layers_node_(p.node("layers")) {
    if (layers_node_.items().empty()) p.fail("layers", "lists no layers");
    for (std::size_t i = 0; i < layers_node_.items().size(); ++i)
      specs_.push_back(config::ComponentFactory<LayerSpec>::instance().create(
          layers_node_.items()[i], p.pathOf("layers") + "[" + std::to_string(i) + "]"));
  }
  std::string typeName() const override { return "Sequential"; }

 protected:
  void build(nn::InitContext& ctx, const ModelInput& input, nn::Sequential& net) override {
    Shape shape = input.sample_shape;
    for (std::size_t i = 0; i < specs_.size(); ++i) {
      Shape out;
      net.append(specs_[i]->build(ctx, shape, out, "model.init_args.layers[" + std::to_string(i) + "]"));
      shape = out;
    }
    if (shape.ndim() != 1 || shape[0] != input.num_classes)
      throw UsageError(fmt::format("model.init_args.layers: the last layer gives {} per sample but the data has {} "
                                   "classes; end with {{class_path: Linear, init_args: {{out_features: {}}}}}",
                                   shape.str(), input.num_classes, input.num_classes));
  }

 private:
  config::Node layers_node_;
  std::vector<std::unique_ptr<LayerSpec>> specs_;
};

HPU_REGISTER_COMPONENT(
    LightningModule,
    ComponentSchema{ComponentKind::kModel,
                    "Sequential",
                    {},
                    {"Sequential",
                     "",
                     {{"layers", Type::list(Type::component({ComponentKind::kLayer})), "[]",
                       "The layers, in order (see the Layer classes below); input sizes are inferred."},
                      {"lr", Type::real().min(0.0, true), "0.001", "Learning rate of the default Adam optimizer."},
                      {"label_smoothing", Type::real().min(0.0).max(1.0), "0.0", "Label smoothing of the cross-entropy loss."}}},
                    "A classifier whose layers are listed in the config."},
    [](const Params& p) { return std::make_unique<SequentialModel>(p); });

}  // namespace
}  // namespace hpu::core::models
