// The Chrome trace both torch.profiler-style profilers write (HPUProfiler,
// PyTorchProfiler): the Trace Event Format's JSON, which chrome://tracing
// and Perfetto open, one file per rank
// (<dirpath>/[<filename>-]rank<R>-<stage>.pt.trace.json). Tracks, per rank
// (pid = global rank):
//   tid 0  host: the Trainer's and the model's actions (complete events),
//          and ProfilerStep#N around each kept step,
//   tid 1  the emulated device: every op with its operand shapes and dtypes,
//          backward functions as "<op>_backward", and an instant event at
//          each lazy-mode graph compilation,
//   tid 2  collectives: what the process group ran (also on its comm thread).
// Timestamps are steady_clock microseconds, shared by the processes of one
// machine, so the traces of its ranks line up when opened together.
//
// The file is what torch.profiler 2.13's tensorboard_trace_handler writes,
// field for field where a reader looks (schemaVersion, deviceProperties,
// distributedInfo, trace_id, record_shapes, baseTimeNanoseconds, each complete event's
// "External id"), with torch's categories: host actions and collectives are
// record_function ranges ("user_annotation"), device ops are operators
// ("cpu_op", as torch writes an aten op), and each kept step of the stage's
// own loop is "ProfilerStep#<N>" on the host track, N counted from 0 as
// torch.profiler's step_num (training batches in fit, from the batch's
// fetch to its end; the evaluation steps in validate, test, predict). So
// TensorBoard's PyTorch profiler plugin (torch-tb-profiler) reads a
// directory of these files as a run with a worker per rank: its overview's
// step breakdown, its operator view of the device ops, its trace view.
//
// What is kept follows torch.profiler.schedule (skip_first, wait, warmup,
// active, repeat), counted in steps of the stage's loops (training batches,
// and separately validation / test / predict batches, as Lightning counts
// them): events of active steps are kept, with the actions that enclose
// them. A run too short to reach an active step keeps every step instead,
// with PyTorch Lightning's warning.
//
// Thread-safety: the training thread calls start/stop/onOp; the comm thread
// calls the collective observer; both append under one mutex.
#include "trace_profiler.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <array>
#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "action_timer.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/profilers/profiler.h"
#include "hpu/core/tensor/op_record.h"
#include "hpu/device/device.h"

namespace hpu::core {
namespace {

using config::Type;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr int kHostTrack = 0, kDeviceTrack = 1, kCollectiveTrack = 2;
// torch's event categories: record_function ranges and operators.
constexpr const char* kAnnotation = "user_annotation";
constexpr const char* kOperator = "cpu_op";
// Events beyond this many per trace are counted, not kept (a bound on memory
// for schedules that keep every step of a long run).
constexpr std::size_t kMaxEvents = 1'000'000;

std::int64_t nanos(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// `text` as a JSON string literal.
void appendJsonString(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  out += '"';
}

// PyTorch's op arguments: {"Input Dims": [[64,784],...], "Input type": ["float32",...]}.
std::string operandArgs(std::span<const device::OperandInfo> operands) {
  std::string out = R"({"Input Dims": [)";
  for (std::size_t i = 0; i < operands.size(); ++i) {
    out += i == 0 ? "[" : ", [";
    fmt::format_to(std::back_inserter(out), "{}", fmt::join(operands[i].shape, ","));
    out += ']';
  }
  out += R"(], "Input type": [)";
  for (std::size_t i = 0; i < operands.size(); ++i) {
    if (i > 0) out += ", ";
    appendJsonString(out, device::dtypeName(operands[i].dtype));
  }
  return out + "]}";
}

// The events of one trace. Until the first active step starts, events are
// kept provisionally: they become the trace if no active step ever runs;
// the first active step discards them.
class TraceBuffer {
 public:
  enum class Mode { kProvisional, kKeep, kDrop };

  void add(TraceEvent event) { add(std::move(event), mode_.load(std::memory_order_relaxed)); }
  void add(TraceEvent event, Mode mode) {
    if (mode == Mode::kDrop) return;
    std::lock_guard lock(mutex_);
    auto& events = mode == Mode::kKeep ? kept_ : provisional_;
    if (events.size() >= kMaxEvents) {
      ++dropped_;
      return;
    }
    events.push_back(std::move(event));
  }
  Mode mode() const { return mode_.load(std::memory_order_relaxed); }
  void setMode(Mode mode) {
    if (mode == Mode::kKeep && mode_.load() != Mode::kKeep) ++keep_windows_;
    mode_.store(mode);
  }
  // Entries into kKeep so far (training thread only).
  std::uint64_t keepWindows() const { return keep_windows_; }
  // An active step starts: the provisional events are not needed.
  void confirm() {
    if (confirmed_) return;
    std::lock_guard lock(mutex_);
    confirmed_ = true;
    provisional_.clear();
  }
  bool confirmed() const { return confirmed_; }

  // The trace's events: the kept ones, with the provisional ones when no
  // active step ran.
  std::vector<TraceEvent> take(std::size_t* dropped) {
    std::lock_guard lock(mutex_);
    *dropped = dropped_;
    if (!confirmed_) kept_.insert(kept_.begin(), provisional_.begin(), provisional_.end());
    return std::move(kept_);
  }

 private:
  std::mutex mutex_;
  std::vector<TraceEvent> kept_, provisional_;
  std::size_t dropped_ = 0;
  std::atomic<Mode> mode_{Mode::kProvisional};
  std::uint64_t keep_windows_ = 0;
  bool confirmed_ = false;  // written by the training thread only
};

class CollectiveTracer final : public comm::CollectiveObserver {
 public:
  explicit CollectiveTracer(std::shared_ptr<TraceBuffer> buffer) : buffer_(std::move(buffer)) {}
  void onCollective(const comm::CollectiveRecord& r) override {
    if (buffer_->mode() == TraceBuffer::Mode::kDrop) return;
    const json args = {{"description", r.description},
                       {"dtype", comm::dtypeName(r.dtype)},
                       {"count", r.count},
                       {"bytes", r.count * comm::elementSize(r.dtype)},
                       {"sequence", r.sequence},
                       {"async", r.async},
                       {"failed", r.failed}};
    buffer_->add({std::string(r.kind), kAnnotation, kCollectiveTrack, 'X', nanos(r.begin), nanos(r.end) - nanos(r.begin),
                  args.dump()});
  }

 private:
  std::shared_ptr<TraceBuffer> buffer_;
};

class TraceProfiler final : public Profiler, public ops::OpObserver {
 public:
  explicit TraceProfiler(TraceOptions options) : options_(std::move(options)) {}
  void setup(const ProfilerContext& context) override {
    context_ = context;
    buffer_ = std::make_shared<TraceBuffer>();
    tracer_ = std::make_shared<CollectiveTracer>(buffer_);
    steps_.fill(0);
    compilations_seen_ = context.device ? context.device->graph().stats().compilations : 0;
    updateMode(0);
  }

  void start(std::string_view action) override {
    if (const std::size_t kind = stepKind(action); kind != kNoStep) {
      updateMode(steps_[kind]);
      if (buffer_->mode() == TraceBuffer::Mode::kKeep) buffer_->confirm();
      if (kind == loopKind()) step_mode_ = buffer_->mode();
    }
    timer_.start(action, buffer_->keepWindows() * 2 + (buffer_->mode() == TraceBuffer::Mode::kKeep ? 1 : 0));
  }

  void stop(std::string_view action) override {
    const auto open = timer_.stop(action);
    const auto end = Clock::now();
    // Kept if it overlapped an active step: it started in one, or one began
    // or is running since it started.
    const bool overlapped_keep = open.mark % 2 == 1 || open.mark / 2 != buffer_->keepWindows() ||
                                 buffer_->mode() == TraceBuffer::Mode::kKeep;
    const auto mode = overlapped_keep ? TraceBuffer::Mode::kKeep : buffer_->mode();
    buffer_->add({open.action, kAnnotation, kHostTrack, 'X', nanos(open.begin), nanos(end) - nanos(open.begin), ""}, mode);
    noteCompilations(end);
    if (action == kTrainFetch) fetch_begin_ns_ = nanos(open.begin);
    if (const std::size_t kind = stepKind(action); kind != kNoStep) {
      if (kind == loopKind()) {
        // torch.profiler's step: a training batch from its fetch on.
        const std::int64_t begin = kind == 0 && fetch_begin_ns_ >= 0 ? fetch_begin_ns_ : nanos(open.begin);
        buffer_->add({fmt::format("ProfilerStep#{}", steps_[kind]), kAnnotation, kHostTrack, 'X', begin, nanos(end) - begin,
                      ""},
                     step_mode_);
      }
      fetch_begin_ns_ = -1;
      updateMode(++steps_[kind]);
    } else if (action == "run_validation" && context_.stage == "fit") {
      // Back in the training loop: its schedule decides again.
      updateMode(steps_[0]);
    }
  }

  void onOp(const ops::OpEvent& e) override {
    if (buffer_->mode() == TraceBuffer::Mode::kDrop) return;
    std::string args = options_.record_shapes && !e.operands.empty() ? operandArgs(e.operands) : std::string();
    buffer_->add({e.backward ? std::string(e.op) + "_backward" : std::string(e.op), kOperator, kDeviceTrack, 'X',
                  nanos(e.begin), nanos(e.end) - nanos(e.begin), std::move(args)});
  }

  ops::OpObserver* opObserver() override { return this; }
  std::shared_ptr<comm::CollectiveObserver> collectiveObserver() override { return tracer_; }

  void teardown() override {
    noteCompilations(Clock::now());
    if (!buffer_->confirmed() && context_.rank == 0)
      spdlog::warn(
          "The PyTorch Profiler default schedule will be overridden as there is not enough steps to properly record "
          "traces. ({} schedule: {}; the {} stage ended before an active step, so the trace holds every step.)",
          options_.name, options_.schedule.str(), context_.stage);
    std::size_t dropped = 0;
    const std::vector<TraceEvent> events = buffer_->take(&dropped);
    if (dropped > 0 && context_.rank == 0)
      spdlog::warn("{}: the trace kept its first {} events and left out {}; narrow trainer.profiler's schedule",
                   options_.name, kMaxEvents, dropped);
    if (options_.export_to_chrome) {
      const std::string path = profilerReportPath(options_.dirpath, options_.filename, context_, ".pt.trace.json");
      writeFileAtomically(path, render(events, path));
      if (context_.rank == 0)
        spdlog::info("{}: wrote {} ({} events{}); open it in chrome://tracing or https://ui.perfetto.dev", options_.name,
                     path, events.size(), context_.world_size > 1 ? ", one file per rank" : "");
    }
    if (options_.report) options_.report(events, context_);
  }

 private:
  static constexpr std::size_t kNoStep = 4;
  static constexpr std::string_view kTrainFetch = "get_train_batch";
  // Which loop's step `action` is: training, validation, test, predict.
  static std::size_t stepKind(std::string_view action) {
    static constexpr std::array<std::string_view, 4> kSteps = {"run_training_batch", "validation_step", "test_step",
                                                               "predict_step"};
    for (std::size_t i = 0; i < kSteps.size(); ++i)
      if (action == kSteps[i]) return i;
    return kNoStep;
  }

  // The stepKind() of the stage's own loop, whose steps are torch's ProfilerSteps.
  std::size_t loopKind() const {
    if (context_.stage == "validate") return 1;
    if (context_.stage == "test") return 2;
    if (context_.stage == "predict") return 3;
    return 0;
  }

  void updateMode(std::int64_t step) {
    if (options_.schedule.active_at(step))
      buffer_->setMode(TraceBuffer::Mode::kKeep);
    else
      buffer_->setMode(buffer_->confirmed() ? TraceBuffer::Mode::kDrop : TraceBuffer::Mode::kProvisional);
  }

  // An instant event on the device track for each graph compilation since
  // the last look (the lazy-mode cache misses of the steps just run).
  void noteCompilations(Clock::time_point at) {
    if (context_.device == nullptr) return;
    const device::GraphRuntime& graph = context_.device->graph();
    const device::GraphStats& s = graph.stats();
    if (s.compilations == compilations_seen_) return;
    json args = {{"compilations", s.compilations}, {"new", s.compilations - compilations_seen_},
                 {"recompilations", s.recompilations}, {"cache_hits", s.cacheHits}};
    if (!graph.recompileCauses().empty() && graph.recompileCauses().back().step == s.steps)
      args["recompile_cause"] = graph.recompileCauses().back().change;
    compilations_seen_ = s.compilations;
    buffer_->add({"graph_compile", kOperator, kDeviceTrack, 'i', nanos(at), 0, args.dump()});
  }

  // torch.profiler's top-level fields: the device, the process group,
  // what was recorded, and the wall clock of ts 0.
  json torchFields(const std::string& path) const {
    json device = json::array();
    if (context_.device != nullptr) {
      const device::DeviceSpec& spec = context_.device->spec();
      device.push_back({{"id", context_.device->index()},
                        {"name", fmt::format("{} (emulated)", spec.product)},
                        {"totalGlobalMem", spec.hbmBytes}});
    }
    std::random_device random;
    const std::string trace_id = fmt::format("{:08X}{:08X}{:08X}{:08X}", random(), random(), random(), random());
    json fields = {{"schemaVersion", 1},
                   {"deviceProperties", device},
                   {"trace_id", trace_id},
                   {"record_shapes", options_.record_shapes ? 1 : 0}};
    if (context_.world_size > 1) {
      json ranks = json::array();
      for (int r = 0; r < context_.world_size; ++r) ranks.push_back(r);
      fields["distributedInfo"] = {{"backend", "hccl"},
                                   {"rank", context_.rank},
                                   {"world_size", context_.world_size},
                                   {"pg_count", 1},
                                   {"pg_config", json::array({{{"pg_name", "0"},
                                                               {"pg_desc", "default_pg"},
                                                               {"backend_config", "hpu:hccl"},
                                                               {"pg_size", context_.world_size},
                                                               {"ranks", ranks}}})}};
    }
    std::array<char, 256> host{};
    if (::gethostname(host.data(), host.size() - 1) == 0) fields["host_name"] = host.data();
    fields["displayTimeUnit"] = "ms";
    // ts + baseTimeNanoseconds / 1000 is the wall clock's microsecond.
    const std::int64_t wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
    fields["baseTimeNanoseconds"] = wall - nanos(Clock::now());
    fields["traceName"] = path;
    return fields;
  }

  std::string render(const std::vector<TraceEvent>& events, const std::string& path) const {
    const int pid = context_.rank;
    std::string fields = torchFields(path).dump();
    fields.pop_back();  // the closing brace: traceEvents and otherData follow
    std::string out = fields + ",\n\"traceEvents\": [\n";
    auto meta = [&](const char* name, int tid, const json& args) {
      out += json{{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", args}}.dump() + ",\n";
    };
    meta("process_name", 0, {{"name", fmt::format("rank {}", pid)}});
    meta("process_sort_index", 0, {{"sort_index", pid}});
    const std::string device = context_.device ? context_.device->name() : "hpu";
    const std::array<std::string, 3> tracks = {"host: training loop", device + " (emulated device)", "collectives"};
    for (int t = 0; t < 3; ++t) {
      meta("thread_name", t, {{"name", tracks[static_cast<std::size_t>(t)]}});
      meta("thread_sort_index", t, {{"sort_index", t}});
    }
    out.reserve(out.size() + events.size() * 180);
    auto put = std::back_inserter(out);
    std::int64_t external_id = 0;
    for (const TraceEvent& e : events) {
      fmt::format_to(put, R"({{"ph": "{}", "cat": "{}", "name": )", e.phase, e.category);
      appendJsonString(out, e.name);
      fmt::format_to(put, R"(, "pid": {}, "tid": {}, "ts": {:.3f})", pid, e.track, static_cast<double>(e.begin_ns) / 1e3);
      if (e.phase == 'X') fmt::format_to(put, R"(, "dur": {:.3f})", static_cast<double>(e.duration_ns) / 1e3);
      if (e.phase == 'i') out += R"(, "s": "t")";
      if (e.phase == 'X') {
        fmt::format_to(put, R"(, "args": {{"External id": {})", ++external_id);
        if (e.args.size() > 2) {  // a non-empty object: its members follow
          out += ", ";
          out.append(e.args, 1);
        } else {
          out += '}';
        }
      } else if (!e.args.empty()) {
        out += R"(, "args": )";
        out += e.args;
      }
      out += "},\n";
    }
    json other = {{"rank", pid}, {"world_size", context_.world_size}, {"stage", context_.stage},
                  {"schedule", options_.schedule.str()}};
    if (context_.device != nullptr) {
      const device::GraphRuntime& graph = context_.device->graph();
      const device::GraphStats& s = graph.stats();
      json causes = json::array();
      for (const device::RecompileCause& c : graph.recompileCauses()) causes.push_back({{"step", c.step}, {"change", c.change}});
      other["lazy_mode"] = {{"mode", device::executionModeName(graph.mode())},
                            {"steps", s.steps},
                            {"ops", s.ops},
                            {"compilations", s.compilations},
                            {"cache_hits", s.cacheHits},
                            {"recompilations", s.recompilations},
                            {"recompile_causes", causes}};
    }
    // The metadata events end with ",\n": close the array with one more.
    out += json{{"ph", "M"}, {"name", "trace_end"}, {"pid", pid}, {"tid", 0}, {"args", json::object()}}.dump();
    out += "\n],\n\"otherData\": " + other.dump() + "\n}\n";
    return out;
  }

  TraceOptions options_;
  ProfilerContext context_;
  detail::ActionTimer timer_;
  std::shared_ptr<TraceBuffer> buffer_ = std::make_shared<TraceBuffer>();
  std::shared_ptr<CollectiveTracer> tracer_;
  std::array<std::int64_t, 4> steps_{};  // steps done per loop kind
  std::uint64_t compilations_seen_ = 0;
  TraceBuffer::Mode step_mode_ = TraceBuffer::Mode::kProvisional;  // at the start of the running step
  std::int64_t fetch_begin_ns_ = -1;  // the start of the training batch fetched last, until its step ends
};

}  // namespace

const config::StructSchema& traceScheduleSchema() {
  static const config::StructSchema s{
      "schedule",
      "torch.profiler.schedule: which steps the trace keeps.",
      {{"skip_first", Type::integer().min(0), "0", "Steps to skip before the first cycle."},
       {"wait", Type::integer().min(0), "1", "Steps of each cycle not recorded."},
       {"warmup", Type::integer().min(0), "1", "Steps of each cycle after wait, traced but not kept."},
       {"active", Type::integer().min(1), "3", "Steps of each cycle kept in the trace."},
       {"repeat", Type::integer().min(0), "1", "Cycles to record (0: until the run ends)."}}};
  return s;
}

std::vector<config::ParamSpec> traceParams() {
  return {{"dirpath", Type::optional(Type::string()), "null", "Directory of the trace files (null: the logger's log_dir)."},
          {"filename", Type::optional(Type::string()), "null",
           "Trace file prefix: <dirpath>/<filename>-rank<R>-<stage>.pt.trace.json, one per rank."},
          // torch.profiler.schedule is a function, which LightningCLI's
          // parser does not take from a config: hpu-train's own.
          {"schedule", Type::structure(&traceScheduleSchema()),
           "{skip_first: 0, wait: 1, warmup: 1, active: 3, repeat: 1}",
           "Steps to trace, as torch.profiler.schedule: {skip_first, wait, warmup, active, repeat}.", "", true},
          {"record_shapes", Type::boolean(), "false",
           "Record each op's operand shapes and dtypes (torch.profiler's record_shapes)."}};
}

TraceOptions traceOptions(const config::Params& p, std::string name) {
  TraceOptions o;
  o.name = std::move(name);
  o.dirpath = p.has("dirpath") ? p.getString("dirpath") : "";
  o.filename = p.has("filename") ? p.getString("filename") : "";
  o.record_shapes = p.getBool("record_shapes");
  if (p.has("schedule")) {
    const config::Node& s = p.node("schedule");
    for (auto [key, field] : {std::pair{"skip_first", &o.schedule.skip_first}, std::pair{"wait", &o.schedule.wait},
                              std::pair{"warmup", &o.schedule.warmup}, std::pair{"active", &o.schedule.active},
                              std::pair{"repeat", &o.schedule.repeat}})
      if (const config::Node* v = s.find(key); v != nullptr && !v->isNull()) *field = config::asInt(*v);
  }
  return o;
}

std::unique_ptr<Profiler> makeTraceProfiler(TraceOptions options) {
  return std::make_unique<TraceProfiler>(std::move(options));
}

}  // namespace hpu::core
