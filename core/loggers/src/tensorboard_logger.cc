// TensorBoardLogger: Lightning's default logger. <save_dir>/<name>/version_N
// [/<sub_dir>] holds an events.out.tfevents.* file (event_file.h) with
//  - every logged metric as a scalar summary (simple_value) at its step,
//  - the hparams plugin's three summaries (experiment, session start with
//    the model's flattened init_args, session end), after hp_metric = -1 at
//    step 0 (default_hp_metric), as Lightning's log_hyperparams writes them
//    through torch.utils.tensorboard's hparams(),
//  - the resolved config as a text summary ("config/text_summary"),
// and hparams.yaml. Global rank 0 writes; the event file is created at the
// first record. An elastic restart continues the run in a new file of the
// same folder (resumeAt).
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "event_file.h"
#include "hparams.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/yaml_io.h"
#include "hpu/core/loggers/logger.h"
#include "hpu/core/strategies/strategy.h"
#include "log_directory.h"
#include "tensorboard/event.pb.h"
#include "tensorboard/hparams.pb.h"

namespace hpu::core {
namespace {

namespace fs = std::filesystem;
using config::Type;

class TensorBoardLogger final : public Logger {
 public:
  explicit TensorBoardLogger(const config::Params& p)
      : dir_(p),
        sub_dir_(p.has("sub_dir") ? p.getString("sub_dir") : ""),
        prefix_(p.getString("prefix")),
        default_hp_metric_(p.getBool("default_hp_metric")),
        max_queue_(static_cast<int>(p.getInt("max_queue"))),
        flush_secs_(p.getInt("flush_secs")),
        filename_suffix_(p.getString("filename_suffix")) {}

  void setup(const std::string& default_root_dir, Strategy& strategy, bool continue_run,
             const Environment&) override {
    dir_.resolve(default_root_dir, strategy, continue_run);
    global_zero_ = strategy.isGlobalZero();
  }
  std::string name() const override { return dir_.name(); }
  std::string version() const override { return dir_.version(); }
  std::string logDir() const override {
    return sub_dir_.empty() ? dir_.path() : (fs::path(dir_.path()) / sub_dir_).string();
  }

  void logHyperparams(const config::Node& hparams) override {
    writeFileAtomically((fs::path(logDir()) / "hparams.yaml").string(), config::emitYaml(hparams));
    if (!default_hp_metric_) return;  // Lightning writes the hparams summaries with a metric only
    logMetrics({{"hp_metric", -1.0}}, 0);
    namespace hp = tensorboard::hparams;
    hp::HParamsPluginData start;
    hp::HParamsPluginData experiment;
    for (const Hparam& h : flattenHparams(hparams, "/")) {
      google::protobuf::Value& v = (*start.mutable_session_start_info()->mutable_hparams())[h.key];
      hp::HParamInfo* info = experiment.mutable_experiment()->add_hparam_infos();
      info->set_name(h.key);
      // torch's hparams(): numbers (bools among them, as Python ints) are
      // FLOAT64, everything else a string.
      if (const auto* s = std::get_if<std::string>(&h.value)) {
        v.set_string_value(*s);
        info->set_type(hp::DATA_TYPE_STRING);
      } else {
        v.set_number_value(std::holds_alternative<bool>(h.value) ? std::get<bool>(h.value) : std::get<double>(h.value));
        info->set_type(hp::DATA_TYPE_FLOAT64);
      }
    }
    experiment.mutable_experiment()->add_metric_infos()->mutable_name()->set_tag("hp_metric");
    hp::HParamsPluginData end;
    end.mutable_session_end_info()->set_status(hp::STATUS_SUCCESS);
    writeHparams("_hparams_/experiment", experiment);
    writeHparams("_hparams_/session_start_info", start);
    writeHparams("_hparams_/session_end_info", end);
  }

  // A value logged again at the same step (`epoch`, which rides along with
  // the training and the validation metrics of a step) is written once:
  // TensorBoard's Python reader would show it twice.
  void logMetrics(const std::map<std::string, double>& metrics, std::int64_t step) override {
    for (const auto& [k, v] : metrics) {
      const auto last = last_.find(k);
      if (last != last_.end() && last->second == std::pair{step, v}) continue;
      last_[k] = {step, v};
      tensorboard::Event e = event(step);
      tensorboard::Summary::Value* value = e.mutable_summary()->add_value();
      value->set_tag(tagged(k));
      value->set_simple_value(static_cast<float>(v));
      write(e);
    }
  }

  // torch.utils.tensorboard's add_text: a string tensor of shape [1] with
  // the text plugin's metadata; the YAML shown as a code block.
  void logConfig(const config::Node& config) override {
    tensorboard::Event e = event(0);
    tensorboard::Summary::Value* value = e.mutable_summary()->add_value();
    value->set_tag("config/text_summary");
    tensorboard::SummaryMetadata::PluginData* plugin = value->mutable_metadata()->mutable_plugin_data();
    plugin->set_plugin_name("text");
    plugin->set_content(tensorboard::TextPluginData().SerializeAsString());
    tensorboard::TensorProto* tensor = value->mutable_tensor();
    tensor->set_dtype(tensorboard::DT_STRING);
    tensor->mutable_tensor_shape()->add_dim()->set_size(1);
    tensor->add_string_val("```yaml\n" + config::emitYaml(config) + "```\n");
    write(e);
  }

  // An elastic restart: a new event file in the same folder (named to sort
  // after the earlier rounds' files), opened with SessionLog START at
  // `step`, as a restarted TensorFlow run writes it. TensorBoard keeps what
  // the earlier files hold below `step` (its Python reader drops the rest at
  // this second START of the run, its Rust reader where a tag's step comes
  // again), so a value this round would log again below it (hp_metric, the
  // hparams and the config at step 0) is left out: TensorBoard would show
  // it twice.
  void resumeAt(std::int64_t step) override {
    if (!global_zero_) return;  // every rank resumes; one writes
    resumed_at_ = step;
    for (const std::string& name : eventFilesIn(logDir()))
      for (const std::string& record : readTfRecords((fs::path(logDir()) / name).string())) {
        tensorboard::Event e;
        if (!e.ParseFromString(record) || e.step() >= step) continue;
        for (const auto& v : e.summary().value()) kept_.emplace(v.tag(), e.step());
      }
    write(sessionStart(step));
  }

  void save() override {
    if (file_) file_->flush();
  }

 private:
  std::string tagged(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "-" + key; }

  static tensorboard::Event event(std::int64_t step) {
    tensorboard::Event e;
    e.set_wall_time(wallTime());
    e.set_step(step);
    return e;
  }

  static tensorboard::Event sessionStart(std::int64_t step) {
    tensorboard::Event e = event(step);
    e.mutable_session_log()->set_status(tensorboard::SessionLog::START);
    return e;
  }

  void writeHparams(const std::string& tag, const tensorboard::hparams::HParamsPluginData& content) {
    tensorboard::Event e = event(0);
    tensorboard::Summary::Value* value = e.mutable_summary()->add_value();
    value->set_tag(tag);
    tensorboard::SummaryMetadata::PluginData* plugin = value->mutable_metadata()->mutable_plugin_data();
    plugin->set_plugin_name("hparams");
    plugin->set_content(content.SerializeAsString());
    write(e);
  }

  void write(const tensorboard::Event& e) {
    if (e.step() < resumed_at_ && e.summary().value_size() > 0 &&
        std::all_of(e.summary().value().begin(), e.summary().value().end(),
                    [&](const auto& v) { return kept_.contains({v.tag(), e.step()}); }))
      return;  // an earlier round's file holds it (resumeAt)
    if (!file_) {
      file_ = std::make_unique<EventFile>(logDir(), filename_suffix_);
      // A run's file opens with START at step 0, as TensorFlow's sessions
      // open theirs: TensorBoard's Python reader takes a run's first START
      // for its start and only a later one (resumeAt's) for a restart.
      if (!e.has_session_log()) write(sessionStart(0));
    }
    file_->append(e.SerializeAsString(), max_queue_, std::chrono::seconds(flush_secs_));
  }

  LogDirectory dir_;
  std::string sub_dir_, prefix_;
  bool default_hp_metric_;
  int max_queue_;
  std::int64_t flush_secs_;
  std::string filename_suffix_;
  std::unique_ptr<EventFile> file_;
  bool global_zero_ = true;
  std::int64_t resumed_at_ = 0;                        // the step an elastic restart resumed at
  std::set<std::pair<std::string, std::int64_t>> kept_;  // (tag, step) below it in earlier files
  std::map<std::string, std::pair<std::int64_t, double>> last_;  // metric -> its last step and value
};

HPU_REGISTER_COMPONENT(
    Logger,
    config::ComponentSchema{
        config::ComponentKind::kLogger,
        "TensorBoardLogger",
        "lightning.pytorch.loggers",
        {"TensorBoardLogger",
         "",
         [] {
           auto params = logDirectoryParams();
           params.push_back({"log_graph", Type::boolean(), "false",
                             "Add the model's computational graph.",
                             "the graph tab needs a TorchScript trace, which a native model has not"});
           params.push_back({"default_hp_metric", Type::boolean(), "true",
                             "Log hp_metric = -1 with the hyper-parameters, so the HPARAMS tab lists the run."});
           params.push_back({"prefix", Type::string(), "''", "Prefix of every metric tag."});
           params.push_back({"sub_dir", Type::optional(Type::string()), "null",
                             "A folder under version_N for the event file."});
           // SummaryWriter's keyword arguments, as LightningCLI lists them.
           params.push_back({"comment", Type::string(), "''", "Suffix of a log_dir SummaryWriter names itself.",
                             "SummaryWriter appends it only to a log_dir it names itself, and the logger names "
                             "log_dir (Lightning ignores it too)"});
           params.push_back({"purge_step", Type::optional(Type::integer().min(0)), "null",
                             "On a restart, hide the events logged at or after this step.",
                             "hpu-train's event writer does not write SummaryWriter's purge record"});
           params.push_back({"max_queue", Type::integer().min(1), "10",
                             "Records kept in memory before they are written (SummaryWriter's max_queue)."});
           params.push_back({"flush_secs", Type::integer().min(0), "120",
                             "Write pending records at least this often, in seconds."});
           params.push_back({"filename_suffix", Type::string(), "''", "Suffix of the event file's name."});
           return params;
         }()},
        "Writes TensorBoard event files (scalars, hparams, the config as text) under "
        "<save_dir>/<name>/version_<N>; open them with `tensorboard --logdir lightning_logs`."},
    [](const config::Params& p) { return std::make_unique<TensorBoardLogger>(p); });

}  // namespace
}  // namespace hpu::core
