#include "hpu/core/precision/fp8.h"

#include <spdlog/fmt/fmt.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <functional>
#include <set>
#include <utility>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/json_number.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/core/tensor/op_record.h"
#include "hpu/device/check.h"
#include "hpu/device/kernels/gemm.h"
#include "hpu/device/numerics.h"

namespace hpu::core::fp8 {
namespace {

namespace k = device::kernels;

// The values an fp8 tensor of `t` holds, dequantized: round(t * s) / s
// (none for a shape-only tensor, whose data is null).
std::vector<float> fakeQuantize(const float* data, std::int64_t n, DType format, float scale) {
  if (data == nullptr) return {};
  std::vector<float> q(data, data + n);
  device::quantizeFp8InPlace(q, format, scale);
  device::dequantizeFp8InPlace(q, scale);
  return q;
}

// A linear layer's weight as the fp8 layers see it: [out, in] (nn::Linear)
// or [in, out] (nn::Conv1D), and its bias.
// Under tensor parallelism, this rank's pieces and how the layer is split.
struct LinearWeights {
  Tensor weight, bias;
  bool in_out = false;
  nn::LinearParallel parallel;
  Shard weight_shard, bias_shard;
  std::int64_t in() const { return weight.size(in_out ? 0 : 1); }
  std::int64_t out() const { return weight.size(in_out ? 1 : 0); }
  bool rowSplit() const { return parallel.split == nn::ParallelSplit::kRow; }
  // What the GEMM adds: a row-parallel layer's bias comes once, after the sum over its group.
  Tensor gemmBias() const { return rowSplit() ? Tensor() : bias; }
  // The layer's output from its GEMM's: summed over a row-parallel layer's group, plus the bias.
  Tensor output(Tensor gemm, const Tensor& b) const {
    if (!rowSplit()) return gemm;
    return ops::fromParallelRegion(std::move(gemm), *parallel.group, b);
  }
};

// y = q(x) op(q(w)) + b in fp32, then rounded to bf16 (the fp8 GEMM's output).
Tensor fp8Gemm(const Tensor& x, const std::vector<float>& xq, const std::vector<float>& wq, const LinearWeights& l) {
  const std::int64_t in = l.in(), out = l.out(), n = x.numel() / in;
  const Tensor b = l.gemmBias();
  Shape ys = x.shape();
  ys[-1] = out;
  Tensor y = Tensor::empty(x.device(), ys, DType::kBFloat16);
  if (x.shapeOnly()) return y;
  k::gemm(false, !l.in_out, n, out, in, xq.data(), wq.data(), 0.0f, y.data(), k::GemmOperands::kFloat32,
          {b.defined() ? b.data() : nullptr});
  device::roundInPlace(y.values(), DType::kBFloat16);
  return y;
}

// The GEMM's record: its operands in the fp8 format they run in.
ops::OpRecord recordGemm(device::OpName name, const Tensor& x, const Tensor& w, DType format) {
  const device::OperandInfo operands[] = {{x.shape().dims(), format, x.requiresGrad()},
                                          {w.shape().dims(), format, w.requiresGrad()}};
  return ops::OpRecord(x.device(), name, operands);
}

class TrainingLinear final : public nn::Module, public ScaledLayer {
 public:
  TrainingLinear(const LinearWeights& l, const Fp8Options& o) : o_(o), l_(l) {
    weight_ = adoptParameter("weight", l.weight, l.weight_shard);
    if (l.bias.defined()) bias_ = adoptParameter("bias", l.bias, l.bias_shard);
    device::Device& dev = l.weight.device();
    const auto tensors = static_cast<std::int64_t>(kTensors);
    scale_ = registerBuffer("fp8_scale", Tensor::full(dev, {tensors}, 1.0f), {.optional = true});
    history_ = registerBuffer("fp8_amax_history", Tensor::zeros(dev, {std::max(o.amax_history_len, 1), tensors}),
                              {.optional = true});
  }
  std::string typeName() const override { return "Fp8Linear"; }
  std::string describe() const override {
    return fmt::format("in_features={}, out_features={}, {}", l_.in(), l_.out(), o_.hybrid ? "HYBRID" : "E4M3");
  }

  Tensor forward(const Tensor& x) override {
    // Replicated key/value pieces sum their gradients over their replicas.
    const Tensor weight = l_.parallel.read(weight_), bias = l_.rowSplit() ? Tensor() : l_.parallel.read(bias_);
    return l_.output(gemm(x, weight, bias), l_.rowSplit() ? bias_ : Tensor());
  }

  std::array<float, kTensors> stepAmax() const override { return step_amax_; }
  void moveScales(const std::array<float, kTensors>& amax) override {
    step_amax_ = {};
    if (scale_.shapeOnly()) return;
    const std::array<DType, kTensors> formats{DType::kFloat8E4M3, DType::kFloat8E4M3, gradFormat()};
    fp8::moveScales(history_.values(), scale_.values(), amax, formats, o_.margin);
  }

 private:
  DType gradFormat() const { return o_.hybrid ? DType::kFloat8E5M2 : DType::kFloat8E4M3; }
  // The scale in use for tensor `i` (input, weight, output gradient).
  float scale(std::size_t i) const { return scale_.shapeOnly() ? 1.0f : scale_.data()[i]; }
  void noteAmax(std::size_t i, std::span<const float> values) {
    step_amax_[i] = std::max(step_amax_[i], device::absMax(values));
  }

  // The fp8 GEMM x op(weight) (+ bias) and its backward.
  Tensor gemm(const Tensor& x, const Tensor& w, const Tensor& b) {
    const DType fwd = DType::kFloat8E4M3;
    const DType bwd = gradFormat();
    const ops::OpRecord op_record = recordGemm("fp8_linear", x, w, fwd);
    auto xq = std::make_shared<std::vector<float>>(fakeQuantize(x.data(), x.numel(), fwd, scale(0)));
    auto wq = std::make_shared<std::vector<float>>(fakeQuantize(w.data(), w.numel(), fwd, scale(1)));
    LinearWeights gemm_weights = l_;
    gemm_weights.bias = b;
    Tensor y = fp8Gemm(x, *xq, *wq, gemm_weights);
    const bool computes = !x.shapeOnly();
    // Delayed scaling: a training step's amax shapes the next step's scales
    // (evaluation leaves them be).
    const bool measures = computes && training();
    if (measures) {
      noteAmax(0, x.values());
      noteAmax(1, w.values());
    }
    if (!autograd::needsGrad({&x, &w, &b})) return y;
    y.setRequiresGrad(true);
    for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &w, &b})
      if (t->defined() && t->requiresGrad()) autograd::noteUse(*t);
    autograd::currentTape()->record(
        [this, x = autograd::GradRef(x), y = autograd::GradRef(y), w = autograd::GradRef(w),
         b = autograd::GradRef(b), xq, wq, bwd, computes, measures] {
          Tensor gy = y.grad();
          if (!gy.defined()) return;
          const std::int64_t in = l_.in(), out = l_.out(), n = x.numel() / in;
          const std::vector<float> gq = fakeQuantize(gy.data(), gy.numel(), bwd, scale(2));
          if (measures) noteAmax(2, gy.values());
          if (w.requiresGrad()) {
            autograd::GradTarget g = autograd::gradTarget(w);
            if (computes && l_.in_out)  // dW [in, out] = x^T dy
              k::gemm(true, false, in, out, n, xq->data(), gq.data(), g.accumulate ? 1.0f : 0.0f, g.data);
            else if (computes)  // dW [out, in] = dy^T x
              k::gemm(true, false, out, in, n, gq.data(), xq->data(), g.accumulate ? 1.0f : 0.0f, g.data);
            autograd::gradWritten(w);
          }
          if (b.defined() && b.requiresGrad()) {
            autograd::GradTarget g = autograd::gradTarget(b);
            if (computes) k::columnSums(gy.data(), n, out, g.data, g.accumulate);
            autograd::gradWritten(b);
          }
          if (x.requiresGrad()) {
            autograd::GradTarget g = autograd::gradTarget(x);
            if (computes)
              k::gemm(false, l_.in_out, n, in, out, gq.data(), wq->data(), g.accumulate ? 1.0f : 0.0f, g.data);
            autograd::gradWritten(x);
          }
        },
        "fp8_linear", ops::lastRecordedOpId());
    return y;
  }

  Fp8Options o_;
  LinearWeights l_;
  Tensor weight_, bias_;
  Tensor scale_, history_;  // the buffers: scales in use, amax window [len, kTensors]
  std::array<float, kTensors> step_amax_{};
};

class InferenceLinear final : public nn::Module {
 public:
  InferenceLinear(const LinearWeights& l, std::string path, bool quant, std::shared_ptr<Stats> stats)
      : path_(std::move(path)), quant_(quant), stats_(std::move(stats)), l_(l) {
    // Quantized, the weight is held in fp8 on the device (a byte an element)
    // instead of the layer's. The values stay as loaded (a checkpoint loads
    // after conversion) and are quantized with the measured scale in each
    // GEMM: the same numbers as quantizing them once.
    if (quant_) {
      Tensor w = Tensor::empty(l.weight.device(), l.weight.shape(), DType::kFloat8E4M3);
      if (!w.shapeOnly()) std::copy_n(l.weight.data(), l.weight.numel(), w.data());
      w.setRequiresGrad(l.weight.requiresGrad());
      l_.weight = w;
    }
    weight_ = adoptParameter("weight", l_.weight, l.weight_shard);
    if (l.bias.defined()) bias_ = adoptParameter("bias", l.bias, l.bias_shard);
  }
  std::string typeName() const override { return quant_ ? "QuantizedLinear" : "MeasuredLinear"; }

  Tensor forward(const Tensor& x) override { return l_.output(gemm(x), l_.rowSplit() ? bias_ : Tensor()); }

 private:
  Tensor gemm(const Tensor& x) {
    if (x.shapeOnly()) {  // a dry run: the quantized GEMM's record and output, no measurements needed
      const ops::OpRecord op_record = recordGemm("fp8_linear", x, weight_, quant_ ? DType::kFloat8E4M3 : x.dtype());
      return fp8Gemm(x, {}, {}, l_);
    }
    if (!quant_) {  // measurement: exact forward, record max |x|
      float& in = stats_->inputs[path_];
      in = std::max(in, device::absMax(x.values()));
      stats_->weights[path_] = device::absMax(weight_.values());
      return ops::linear(x, weight_, l_.gemmBias(), {.weight_in_out = l_.in_out});
    }
    const DType fmt8 = DType::kFloat8E4M3;
    auto in = stats_->inputs.find(path_);
    auto w = stats_->weights.find(path_);
    if (in == stats_->inputs.end() || w == stats_->weights.end())
      throw Error(
          fmt::format("fp8 quantization: the measurements have no entry for layer '{}'; measure this model "
                      "first (HPUPrecisionPlugin inference: true, quant: false)",
                      path_));
    const ops::OpRecord op_record = recordGemm("fp8_linear", x, weight_, fmt8);
    const float sx = device::fp8ScaleFromAmax(in->second, 1.0f, fmt8);
    const float sw = device::fp8ScaleFromAmax(w->second, 1.0f, fmt8);
    return fp8Gemm(x, fakeQuantize(x.data(), x.numel(), fmt8, sx),
                   fakeQuantize(weight_.data(), weight_.numel(), fmt8, sw), l_);
  }

  std::string path_;
  bool quant_;
  std::shared_ptr<Stats> stats_;
  LinearWeights l_;
  Tensor weight_, bias_;
};

// Replaces the linear layers (nn::Linear, nn::Conv1D) under `root` with
// make(weights, path), but for the modules at the paths in `keep`.
template <class Make>
int replaceLinears(nn::Module& root, const std::string& prefix, const std::set<std::string>& keep, Make make) {
  int n = 0;
  for (auto& [name, child] : root.mutableChildren()) {
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    if (keep.count(path)) continue;
    const auto weightsOf = [](const auto& layer, bool in_out) {
      const auto& params = layer.ownParameters();
      return LinearWeights{layer.weight, layer.bias, in_out, layer.parallel(), params.front().shard,
                           params.size() > 1 ? params.back().shard : Shard{}};
    };
    if (auto* linear = dynamic_cast<nn::Linear*>(child.get())) {
      child = make(weightsOf(*linear, false), path);
      ++n;
    } else if (auto* conv1d = dynamic_cast<nn::Conv1D*>(child.get())) {
      child = make(weightsOf(*conv1d, true), path);
      ++n;
    } else {
      n += replaceLinears(*child, path, keep, make);
    }
  }
  return n;
}

}  // namespace

void moveScales(std::span<float> history, std::span<float> scale, std::span<const float> amax,
                std::span<const DType> formats, int margin) {
  const std::size_t n = amax.size();
  HPU_CHECK(n > 0 && history.size() % n == 0 && scale.size() == n && formats.size() == n,
            "fp8 scales: a window of {} values, {} scales and {} formats for {} amaxes", history.size(), scale.size(),
            formats.size(), n);
  std::copy_backward(history.begin(), history.end() - static_cast<std::ptrdiff_t>(n), history.end());
  std::copy(amax.begin(), amax.end(), history.begin());
  for (std::size_t i = 0; i < n; ++i) {
    float m = 0;
    for (std::size_t row = i; row < history.size(); row += n) m = std::max(m, history[row]);
    scale[i] = device::fp8ScaleFromAmax(m, scale[i], formats[i], margin);
  }
}

std::vector<std::pair<std::string, ScaledLayer*>> scaledLayers(nn::Module& root) {
  std::vector<std::pair<std::string, ScaledLayer*>> out;
  const std::function<void(nn::Module&, const std::string&)> walk = [&](nn::Module& m, const std::string& prefix) {
    for (auto& [name, child] : m.mutableChildren()) {
      const std::string path = prefix.empty() ? name : prefix + "." + name;
      if (auto* layer = dynamic_cast<TrainingLinear*>(child.get()))
        out.emplace_back(path, layer);
      else
        walk(*child, path);
    }
  };
  walk(root, "");
  return out;
}

int convertForTraining(nn::Module& root, const Fp8Options& options, const std::set<std::string>& keep) {
  return replaceLinears(root, "", keep, [&](const LinearWeights& l, const std::string&) {
    return std::make_shared<TrainingLinear>(l, options);
  });
}

int convertForInference(nn::Module& root, bool quant, std::shared_ptr<Stats> stats, const std::set<std::string>& keep) {
  return replaceLinears(root, "", keep, [&](const LinearWeights& l, const std::string& path) {
    return std::make_shared<InferenceLinear>(l, path, quant, stats);
  });
}

std::string Stats::toJson() const {
  nlohmann::json nodes = nlohmann::json::object();
  for (const auto& [path, amax] : inputs) nodes[path]["inputs"] = {amax};
  for (const auto& [path, amax] : weights) nodes[path]["params"]["weight"] = amax;
  return nlohmann::json{{"GlobalRank", nullptr}, {"LocalRank", nullptr}, {"Mode", "MEASURE"}, {"Nodes", nodes}}.dump(
             2) +
         "\n";
}

Stats Stats::fromJson(const std::string& text, const std::string& origin) {
  Stats s;
  try {
    const auto j = nlohmann::json::parse(text);
    for (const auto& [path, node] : j.at("Nodes").items()) {
      const auto input = jsonFloat<float>(node.at("inputs").at(0));
      const auto weight = jsonFloat<float>(node.at("params").at("weight"));
      if (!input || !weight)
        throw Error(fmt::format("{} is not an fp8 measurement file: {}'s maxima {} and {} are not float numbers", origin,
                                path, node.at("inputs").at(0).dump(), node.at("params").at("weight").dump()));
      s.inputs[path] = *input;
      s.weights[path] = *weight;
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{} is not an fp8 measurement file: {}", origin, e.what()));
  }
  return s;
}

}  // namespace hpu::core::fp8
