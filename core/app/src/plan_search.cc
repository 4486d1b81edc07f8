#include "plan_search.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <tuple>

#include "hpu/core/app/root.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/compose.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/estimate/pricing.h"
#include "hpu/core/models/causal_lm.h"
#include "hpu/core/strategies/strategy_names.h"
#include "config_settings.h"
#include "job_trace.h"
#include "log_level_scope.h"

namespace hpu::core::app {
namespace {

using estimate::Interleaving;
using estimate::JobShape;
using estimate::Layout;
using estimate::PlannedLayout;
using estimate::StepTime;

// Optimizer steps a trace runs (the last is priced), as estimate's default.
constexpr std::int64_t kTracedSteps = 2;

// What the search needs of the model: how it divides.
struct ModelFacts {
  std::string class_path;
  std::string layers_key;  // the init_arg that sets its decoder layers
  std::int64_t parameters = 0;
  models::TransformerConfig config;  // its shape: how it divides, how its layers split into stages
  std::int64_t layers() const { return config.num_hidden_layers; }
};

std::string scalarAt(const config::Node& root, std::initializer_list<std::string_view> path, std::string fallback) {
  const config::Node* n = configAt(root, path);
  return n != nullptr && n->isScalar() ? n->str() : fallback;
}

std::vector<std::int64_t> divisorsOf(std::int64_t n) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// A class path's last part: "LlamaForCausalLM" of "transformers.LlamaForCausalLM".
std::string className(const std::string& class_path) { return class_path.substr(class_path.rfind('.') + 1); }

// The layout the config gives, as the search names layouts (none when its
// strategy is not one the search chooses); `layers`: the model's.
std::optional<Layout> givenLayout(const config::Node& cfg, const JobShape& job, std::int64_t layers) {
  Layout l;
  const config::Node* node = configAt(cfg, {"trainer", "strategy"});
  const auto arg = [&](std::string_view key, std::string fallback) {
    return scalarAt(cfg, {"trainer", "strategy", "init_args", key}, std::move(fallback));
  };
  if (node != nullptr && node->isScalar()) {
    // A name of the table: DeepSpeed's stages, or DDP (ZeRO-0 data parallel).
    const StrategyName* name = findStrategyName(node->str());
    if (name == nullptr || name->family == StrategyFamily::kSingleDevice || name->family == StrategyFamily::kFSDP)
      return std::nullopt;
    if (name->family == StrategyFamily::kDeepSpeed) {
      l.strategy = Layout::Strategy::kDeepSpeed;
      l.zero_stage = name->zero_stage;
      l.offload = name->offload;
    }
  } else {
    const std::string strategy = className(scalarAt(cfg, {"trainer", "strategy", "class_path"}, ""));
    if (strategy == "ModelParallelStrategy") {
      l.zero_stage = static_cast<int>(std::stoll(arg("zero_stage", "0")));
      l.sequence_parallel = config::parseBool(arg("sequence_parallel", "false")).value_or(false);
      // Interleaved 1F1B: virtual_pipeline_size chunks a stage, or chunks of layers_per_virtual_stage.
      l.virtual_stages = static_cast<int>(std::stoll(arg("virtual_pipeline_size", "1")));
      if (const std::int64_t per_chunk = std::stoll(arg("layers_per_virtual_stage", "0")); per_chunk > 0)
        l.virtual_stages = static_cast<int>(layers / (std::max(1, job.stages) * per_chunk));
    } else if (strategy == "HPUDeepSpeedStrategy") {
      l.strategy = Layout::Strategy::kDeepSpeed;
      l.zero_stage = static_cast<int>(std::stoll(arg("stage", "2")));
      l.offload = config::parseBool(arg("offload_optimizer", "false")).value_or(false);
    } else if (strategy != "HPUParallelStrategy") {
      return std::nullopt;
    }
  }
  l.expert_parallel = static_cast<int>(std::stoll(arg("expert_parallel_size", "1")));
  l.tensor_parallel = job.tensor_parallel;
  l.pipeline_stages = job.stages;
  l.data_parallel = job.replicas;
  l.micro_batch = job.micro_batch;
  l.accumulate = job.accumulate;
  l.recompute = scalarAt(cfg, {"model", "init_args", "gradient_checkpointing"}, "false");
  if (const auto b = config::parseBool(l.recompute)) l.recompute = *b ? "true" : "false";
  return l;
}

// f11 + x (f21 - f11) + y (f12 - f11) + x y (f22 - f21 - f12 + f11): a
// value measured at layers a stage l1, l2 and micro-batches m1, m2, at x =
// (l - l1) / (l2 - l1), y = (m - m1) / (m2 - m1).
double bilinear(double f11, double f21, double f12, double f22, double x, double y) {
  return f11 + x * (f21 - f11) + y * (f12 - f11) + x * y * (f22 - f21 - f12 + f11);
}

StepTime bilinear(const StepTime& a, const StepTime& b, const StepTime& c, const StepTime& d, double x, double y) {
  const auto f = [&](auto member) { return bilinear(a.*member, b.*member, c.*member, d.*member, x, y); };
  const auto g = [&](auto member) {
    return bilinear(a.breakdown.*member, b.breakdown.*member, c.breakdown.*member, d.breakdown.*member, x, y);
  };
  const auto n = [&](auto member) {
    return static_cast<std::int64_t>(std::llround(bilinear(static_cast<double>(a.*member), static_cast<double>(b.*member),
                                                           static_cast<double>(c.*member),
                                                           static_cast<double>(d.*member), x, y)));
  };
  using B = estimate::StepBreakdown;
  StepTime t;
  t.breakdown.matrix = g(&B::matrix);
  t.breakdown.vector = g(&B::vector);
  t.breakdown.exposed_comm = g(&B::exposed_comm);
  t.breakdown.optimizer = g(&B::optimizer);
  t.breakdown.offload = g(&B::offload);
  t.breakdown.host = g(&B::host);
  t.seconds = t.breakdown.total();
  t.matrix_flops = f(&StepTime::matrix_flops);
  t.comm_seconds = f(&StepTime::comm_seconds);
  t.pipeline_transfers = f(&StepTime::pipeline_transfers);
  t.ops = n(&StepTime::ops);
  t.collectives = n(&StepTime::collectives);
  t.graphs = n(&StepTime::graphs);
  t.blocking_collectives = n(&StepTime::blocking_collectives);
  t.blocking_collective_peers = n(&StepTime::blocking_collective_peers);
  return t;
}

// A reduced job, traced and each bounding rank's step priced; by traced
// rank: the first stage it stands for and how many, its parameters (its
// stage's, with pipeline stages).
struct Reduced {
  JobShape shape;
  std::vector<StepTime> steps;
  std::vector<std::uint64_t> peaks;
  std::vector<int> first_stage, stages_each;
  std::vector<std::int64_t> parameters;
};

class Search {
 public:
  Search(const RunRequest& run, const device::EmulatorSettings& settings, const ModelFacts& facts,
         const device::GaudiModel& model, const device::MemoryLimit& limit, bool memory_only)
      : run_(run), settings_(settings), facts_(facts), model_(model), limit_(limit), memory_only_(memory_only) {}

  // Prices `layout`: its memory first, its time only if it fits.
  //
  // The reduced jobs give every stage the same layers (one, then two); the
  // whole job splits its layers as the model does (models::balancedLayers:
  // a large vocabulary leaves the first and last stages fewer), and each
  // traced rank is extrapolated to the most layers of the stages it stands
  // for, which bound its memory and time.
  //
  // Memory is measured with the pipeline full (every stage has had as many
  // micro-batches in flight as it ever holds, and at least two, so gradients
  // accumulate): linear in layers from there on. A rank's own step (1F1B's
  // bubble is added by jobStep) is its micro-batches' forwards and
  // backwards plus what each step does once: linear in micro-batches from
  // one, so one and `full` micro-batches give it.
  PlannedLayout price(const Layout& layout) {
    PlannedLayout out;
    out.layout = layout;
    const std::vector<std::int64_t>& split = splitOf(layout.pipeline_stages);
    // With one layer a stage (as many stages as layers) every stage has one.
    const std::int64_t l1 = 1, l2 = std::min<std::int64_t>(2, facts_.layers() / layout.pipeline_stages);
    const auto at = [&](std::int64_t layers) {
      return l2 > l1 ? static_cast<double>(layers - l1) / static_cast<double>(l2 - l1) : 0;
    };
    const std::int64_t full = std::min<std::int64_t>(layout.accumulate, std::max(2, layout.pipeline_stages));
    const double y = full > 1 ? static_cast<double>(layout.accumulate - 1) / static_cast<double>(full - 1) : 0;
    const Reduced& a2 = reduced(layout, l1, full);
    const Reduced& b2 = reduced(layout, l2, full);
    std::vector<double> x;  // by traced rank
    double parameters = 0;
    for (std::size_t i = 0; i < a2.peaks.size(); ++i) {
      const auto first = split.begin() + a2.first_stage[i];
      const auto stages = std::span(first, first + a2.stages_each[i]);
      x.push_back(at(*std::max_element(stages.begin(), stages.end())));
      const double p = static_cast<double>(a2.peaks[i]) +
                       x.back() * (static_cast<double>(b2.peaks[i]) - static_cast<double>(a2.peaks[i]));
      out.peak = std::max(out.peak, static_cast<std::uint64_t>(std::max(0.0, p)));
      // Without pipeline stages rank 0 holds the model (its shards sum to it).
      if (layout.pipeline_stages == 1 && i > 0) continue;
      for (std::int64_t layers : stages)
        parameters += static_cast<double>(a2.parameters[i]) +
                      at(layers) * static_cast<double>(b2.parameters[i] - a2.parameters[i]);
    }
    parameters_ = static_cast<std::int64_t>(std::llround(parameters));
    out.fits = out.peak <= limit_.bytes;
    if (!out.fits || memory_only_) return out;
    const Reduced& a1 = reduced(layout, l1, 1);
    const Reduced& b1 = reduced(layout, l2, 1);
    std::vector<StepTime> steps;
    for (std::size_t i = 0; i < a1.steps.size(); ++i)
      steps.push_back(bilinear(a1.steps[i], b1.steps[i], a2.steps[i], b2.steps[i], x[i], y));
    JobShape shape = a1.shape;
    shape.accumulate = layout.accumulate;
    out.figures = estimate::jobFigures(shape, model_, steps, a1.stages_each);
    return out;
  }

  // Prices `layout` from a trace of its whole job, as estimate fit does.
  PlannedLayout priceWhole(const Layout& layout) {
    ++traces_;
    const estimate::TracedJob job = traceJob(withLayout(run_, layout), kTracedSteps, settings_);
    const estimate::EstimateResult r = estimate::priceJob(job, model_, limit_);
    PlannedLayout out;
    out.layout = layout;
    out.fits = r.fits;
    out.peak = r.peak;
    out.figures = {r.step, r.per_token, r.throughput, r.range, r.mfu};
    out.whole = true;
    return out;
  }

  std::int64_t traces() const { return traces_; }
  std::int64_t parameters() const { return parameters_; }

 private:
  // The model's layers a stage over `stages` stages (models::balancedLayers), memoised.
  const std::vector<std::int64_t>& splitOf(int stages) {
    auto it = splits_.find(stages);
    if (it == splits_.end()) it = splits_.emplace(stages, models::balancedLayers(facts_.config, stages)).first;
    return it->second;
  }

  const Reduced& reduced(const Layout& layout, std::int64_t per_stage, std::int64_t micro_batches) {
    Settings settings = estimate::configOverrides(layout);
    settings.emplace_back(facts_.layers_key, std::to_string(per_stage * layout.pipeline_stages));
    if (layout.pipeline_stages > 1)  // every stage alike (the model would balance them otherwise)
      settings.emplace_back("trainer.strategy.init_args.pipeline_layers",
                            fmt::format("[{}]", fmt::join(std::vector<std::int64_t>(
                                                              static_cast<std::size_t>(layout.pipeline_stages), per_stage),
                                                          ", ")));
    settings.emplace_back("trainer.accumulate_grad_batches", std::to_string(micro_batches));
    std::string key;
    for (const auto& [k, v] : settings) key += k + "=" + v + ";";
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
    ++traces_;
    const estimate::TracedJob job =
        traceJob(withSettings(run_, settings), kTracedSteps, settings_, TraceScope::kBounding);
    Reduced r;
    r.shape = job.shape;
    r.stages_each = estimate::stagesEach(job);
    for (const estimate::RankTrace& t : job.ranks) {
      r.steps.push_back(estimate::priceStep(t.step, model_).time);
      r.peaks.push_back(t.peak);
      r.first_stage.push_back(job.shape.stages > 1 ? t.stage : 0);
      r.parameters.push_back(t.parameters);
    }
    return memo_.emplace(key, std::move(r)).first->second;
  }

  const RunRequest& run_;
  const device::EmulatorSettings& settings_;
  const ModelFacts& facts_;
  const device::GaudiModel& model_;
  device::MemoryLimit limit_;
  bool memory_only_;
  std::map<std::string, Reduced> memo_;
  std::map<int, std::vector<std::int64_t>> splits_;
  std::int64_t traces_ = 0, parameters_ = 0;
};

ModelFacts modelFacts(const RunRequest& run, const Pipeline& pipeline) {
  const auto* lm = dynamic_cast<const models::CausalLM*>(pipeline.model.get());
  const std::string class_path = className(scalarAt(run.config, {"model", "class_path"}, "the model"));
  if (lm == nullptr)
    throw UsageError(fmt::format("estimate plan: {} is not a transformer language model; plan searches the layouts of "
                                 "the causal LMs (LlamaForCausalLM, GPT2LMHeadModel, MixtralForCausalLM, ...)",
                                 class_path));
  const models::TransformerConfig& c = lm->config();
  return {class_path, c.family == models::Family::kGpt2 ? "model.init_args.n_layer" : "model.init_args.num_hidden_layers",
          0, c};
}

// Every layout of `job`'s cluster for `facts`' model at `global` sequences a
// step; `data_parallel_sizes` collects the replica counts the model allows
// (whatever the batch).
std::vector<Layout> layoutsOf(const JobShape& job, const ModelFacts& facts, std::int64_t global,
                              std::set<std::int64_t>& data_parallel_sizes) {
  std::vector<Layout> out;
  const std::vector<std::string> recomputes{"false", "selective", "true"};
  for (std::int64_t tp : divisorsOf(job.devices)) {
    if (facts.config.num_attention_heads % tp != 0) continue;
    for (std::int64_t pp : divisorsOf(facts.layers())) {
      if ((job.world / tp) % pp != 0 || job.world % (tp * pp) != 0) continue;
      const std::int64_t dp = job.world / (tp * pp);
      data_parallel_sizes.insert(dp);
      if (global % dp != 0) continue;
      std::vector<std::int64_t> eps{1};
      if (facts.config.num_local_experts > 0)
        for (std::int64_t e : divisorsOf(dp))
          if (e > 1 && facts.config.num_local_experts % e == 0) eps.push_back(e);
      for (std::int64_t micro : divisorsOf(global / dp))
        for (std::int64_t ep : eps)
          for (const std::string& recompute : recomputes) {
            Layout l;
            l.tensor_parallel = static_cast<int>(tp);
            l.pipeline_stages = static_cast<int>(pp);
            l.data_parallel = static_cast<int>(dp);
            l.expert_parallel = static_cast<int>(ep);
            l.micro_batch = micro;
            l.accumulate = global / dp / micro;
            l.recompute = recompute;
            for (int zero = 0; zero <= (dp > 1 ? 1 : 0); ++zero)
              for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp) {
                l.zero_stage = zero;
                l.sequence_parallel = sp == 1;
                out.push_back(l);
              }
            // DeepSpeed's ZeRO-2 and ZeRO-3 (data parallel only; stage 3 holds no experts apart).
            if (tp == 1 && pp == 1 && dp > 1) {
              Layout d = l;
              d.strategy = Layout::Strategy::kDeepSpeed;
              d.sequence_parallel = false;
              for (int stage = 2; stage <= (ep > 1 ? 2 : 3); ++stage) {
                d.zero_stage = stage;
                out.push_back(d);
              }
            }
          }
    }
  }
  return out;
}

// The layouts of `all` with `offload` variants of DeepSpeed's (ZeRO-Offload):
// searched only when nothing else fits.
std::vector<Layout> offloaded(const std::vector<Layout>& all) {
  std::vector<Layout> out;
  for (Layout l : all)
    if (l.strategy == Layout::Strategy::kDeepSpeed) {
      l.offload = true;
      out.push_back(l);
    }
  return out;
}

// How much device memory a layout's settings keep, each from least to most
// (for a layout of the same parallel sizes): recompute full, selective,
// none; sequence parallelism on, off; ZeRO-3, 2 (DeepSpeed), 1, 0; smaller
// micro-batches.
int recomputeOrder(const std::string& r) { return r == "true" ? 0 : r == "selective" ? 1 : 2; }
int zeroOrder(const Layout& l) { return 3 - l.zero_stage; }

std::tuple<int, int, int, int, bool, std::int64_t, int, int, int> memoryOrder(const Layout& l) {
  return {l.tensor_parallel, l.pipeline_stages, l.data_parallel, l.expert_parallel, l.offload, l.micro_batch,
          recomputeOrder(l.recompute), l.sequence_parallel ? 0 : 1, zeroOrder(l)};
}

// Whether `a` keeps at least as much device memory as `b` by every setting
// of memoryOrder (so if `b` does not fit, neither does `a`).
bool needsMore(const Layout& a, const Layout& b) {
  return a.tensor_parallel == b.tensor_parallel && a.pipeline_stages == b.pipeline_stages &&
         a.data_parallel == b.data_parallel && a.expert_parallel == b.expert_parallel && a.offload == b.offload &&
         a.micro_batch >= b.micro_batch && recomputeOrder(a.recompute) >= recomputeOrder(b.recompute) &&
         (!a.sequence_parallel || b.sequence_parallel) && zeroOrder(a) >= zeroOrder(b);
}

std::string joined(const std::set<std::int64_t>& values) {
  std::string out;
  for (std::int64_t v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

}  // namespace

RunRequest withLayout(const RunRequest& run, const Layout& layout) {
  return withSettings(run, estimate::configOverrides(layout));
}

estimate::PlanResult searchPlans(const RunRequest& run, const device::EmulatorSettings& settings,
                                 const PlanSearchOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const LogLevelScope quiet(spdlog::level::warn);
  if (run.subcommand != "fit") throw UsageError("estimate plan searches training layouts: use it with fit's config");
  const device::EmulatorSettings traced = traceSettings(settings);
  JobShape job;
  ModelFacts facts;
  {
    device::Platform platform(traced);
    const Pipeline pipeline = buildPipeline(run, platform, 0);
    job = jobShapeOf(run, pipeline);
    facts = modelFacts(run, pipeline);
  }
  const std::int64_t global =
      options.global_batch > 0 ? options.global_batch : job.micro_batch * job.accumulate * job.replicas;
  const device::GaudiModel model(settings.generation, job.topology());
  const device::MemoryLimit limit = device::memoryLimitOf(settings);

  estimate::PlanResult result;
  result.generation = std::string(model.spec().name);
  result.product = std::string(model.spec().product);
  result.world = job.world;
  result.nodes = job.nodes;
  result.devices = job.devices;
  result.precision = scalarAt(run.config, {"trainer", "precision"}, "32-true");
  result.tokens_per_sample = job.tokens_per_sample;
  result.global_batch = global;
  result.limit = limit;

  std::set<std::int64_t> dps;
  std::vector<Layout> layouts = layoutsOf(job, facts, global, dps);
  if (layouts.empty()) {
    const std::int64_t step = *dps.begin();
    const std::int64_t below = global / step * step, above = below + step;
    throw UsageError(fmt::format(
        "estimate plan: a global batch of {} sequences (micro {} x accumulation {} x {} data-parallel) divides across "
        "no layout of {} on {} cards: its layouts have {} data-parallel replicas; a global batch that one of them "
        "divides works, e.g. {} (set data.init_args.batch_size and trainer.accumulate_grad_batches)",
        global, job.micro_batch, job.accumulate, job.replicas, facts.class_path, job.world, joined(dps),
        below > 0 ? fmt::format("{} or {}", below, above) : std::to_string(above)));
  }
  result.given = givenLayout(run.config, job, facts.layers());
  if (result.given && std::find(layouts.begin(), layouts.end(), *result.given) == layouts.end())
    layouts.push_back(*result.given);

  Search search(run, settings, facts, model, limit, options.memory_only);
  std::vector<PlannedLayout> fitting, over;
  const auto evaluate = [&](std::vector<Layout> candidates) {
    // Smallest memory first, so that a layout that needs at least as much
    // as one that did not fit is not traced (needsMore).
    std::stable_sort(candidates.begin(), candidates.end(), [](const Layout& a, const Layout& b) {
      return memoryOrder(a) < memoryOrder(b);
    });
    std::vector<Layout> over_limit;
    for (const Layout& l : candidates) {
      if (options.memory_only && !fitting.empty()) return;
      ++result.candidates;
      if (std::any_of(over_limit.begin(), over_limit.end(), [&](const Layout& o) { return needsMore(l, o); })) {
        ++result.over_memory;
        continue;
      }
      try {
        // Interleaved stages are priced whole (the reduced jobs have too few layers to chunk).
        PlannedLayout p = l.virtual_stages > 1 ? search.priceWhole(l) : search.price(l);
        if (!p.fits) {
          over_limit.push_back(l);
          ++result.over_memory;
          over.push_back(std::move(p));
        } else {
          fitting.push_back(std::move(p));
        }
      } catch (const UsageError& e) {
        --result.candidates;  // a layout the model cannot take (e.g. features that do not split)
        spdlog::debug("estimate plan: {}: {}", describe(l), e.what());
      }
    }
  };
  evaluate(layouts);
  if (fitting.empty()) evaluate(offloaded(layouts));

  const auto faster = [](const PlannedLayout& a, const PlannedLayout& b) { return a.figures.throughput > b.figures.throughput; };
  std::sort(fitting.begin(), fitting.end(), faster);
  // The first `whole` are priced whole; a layout whose whole figure drops
  // lets the next one in.
  for (std::size_t i = 0; i < fitting.size() && i < (options.memory_only ? 0 : options.whole);) {
    if (fitting[i].whole) {
      ++i;
      continue;
    }
    PlannedLayout whole = search.priceWhole(fitting[i].layout);
    if (!whole.fits) {
      over.push_back(whole);
      fitting.erase(fitting.begin() + static_cast<std::ptrdiff_t>(i));
      ++result.over_memory;
    } else {
      fitting[i] = whole;
    }
    std::stable_sort(fitting.begin(), fitting.end(), faster);
    i = 0;
  }
  // The fastest layout without virtual stages interleaved over them, every
  // number of virtual stages that promises more than the fastest of all
  // (which may have virtual stages already: the config's own layout, say):
  // priced whole, as `estimate fit` prices a config that sets
  // virtual_pipeline_size, and ranked with the others. The promise leaves
  // out what whole pricing finds (GPT-3 175B, TP4 PP16 DP16: 6 virtual
  // stages promise the most, 3 run fastest). The rows added have virtual
  // stages, so the interleavings stay those of the fastest layout without
  // (PlanResult::interleaved).
  const PlannedLayout* plain = estimate::fastestWithoutVirtualStages(fitting);
  if (plain) result.interleaved = estimate::interleavings(*plain, facts.layers() / plain->layout.pipeline_stages);
  if (!result.interleaved.empty() && !options.memory_only) {
    const Layout layout = plain->layout;  // a copy: pricing grows `fitting`
    const double to_beat = fitting.front().figures.throughput;
    for (const Interleaving& way : result.interleaved) {
      Layout interleaved = layout;
      interleaved.virtual_stages = way.virtual_stages;
      const bool priced = std::any_of(fitting.begin(), fitting.end(),  // the config's own, say
                                      [&](const PlannedLayout& p) { return p.layout == interleaved; });
      if (way.throughput <= to_beat || priced) continue;
      try {
        PlannedLayout whole = search.priceWhole(interleaved);
        if (whole.fits) fitting.push_back(std::move(whole));
      } catch (const UsageError& e) {
        spdlog::debug("estimate plan: {}: {}", describe(interleaved), e.what());
      }
    }
    std::stable_sort(fitting.begin(), fitting.end(), faster);
  }
  for (std::size_t i = 1; i < fitting.size(); ++i) fitting[i].loses = estimate::whyLoses(fitting[0], fitting[i]);
  std::sort(over.begin(), over.end(), [](const PlannedLayout& a, const PlannedLayout& b) { return a.peak < b.peak; });
  if (over.size() > 3) over.resize(3);
  if (result.given)
    for (std::size_t i = 0; i < fitting.size(); ++i)
      if (fitting[i].layout == *result.given) result.given_rank = static_cast<int>(i + 1);
  result.fitting = std::move(fitting);
  result.too_big = std::move(over);
  result.traces = search.traces();
  facts.parameters = search.parameters();
  const double parameters = static_cast<double>(facts.parameters);
  result.model = fmt::format("{}, {} layers, {} parameters", facts.class_path, facts.layers(),
                             parameters >= 1e9 ? fmt::format("{:.2f}B", parameters / 1e9)
                                               : fmt::format("{:.2f}M", parameters / 1e6));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace hpu::core::app
