#include "hpu/cli/app.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <optional>

#include "hpu/cli/help.h"
#include "hpu/cli/overrides.h"
#include "hpu/cli/version.h"
#include "hpu/comm/launcher.h"
#include "hpu/core/app/estimate.h"
#include "hpu/core/app/export.h"
#include "hpu/core/app/failure.h"
#include "hpu/core/app/plan.h"
#include "hpu/core/app/root.h"
#include "hpu/core/app/run.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/checkpoint/checkpoint.h"
#include "hpu/core/checkpoint/consolidate.h"
#include "hpu/core/checkpoint/run_checkpoints.h"
#include "hpu/core/config/paths.h"
#include "hpu/core/config/print.h"
#include "hpu/core/config/scalars.h"
#include "hpu/env/catalogue.h"
#include "plot_command.h"
#include "startup.h"

namespace hpu::cli {
namespace {

constexpr int kExitOk = 0;

const char* const kTrainerCommands[][2] = {
    {"fit", "Run the full optimization routine (train + validate)."},
    {"validate", "Run one evaluation epoch over the validation set."},
    {"test", "Run one evaluation epoch over the test set."},
    {"predict", "Run inference over the predict set."},
};

// The names of `app`'s subcommands in the order they were added (with
// `configs_only`, of those that take --config), joined by `sep`, the last
// two by `last_sep` when given.
std::string subcommandNames(const CLI::App& app, const std::string& sep, bool configs_only = false,
                            const std::string& last_sep = "") {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (!configs_only || sub->get_option_no_throw("--config") != nullptr) names.push_back(sub->get_name());
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() && !last_sep.empty() ? last_sep : sep) + names[i];
  return out;
}

// The top-level usage line names every subcommand.
class UsageFormatter final : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    if (app->get_parent() != nullptr) return CLI::Formatter::make_usage(app, std::move(name));
    return "Usage: " + name + " [OPTIONS] {" + subcommandNames(*app, "|") + "} [SUBCOMMAND OPTIONS]\n\n";
  }
};

// Options a trainer subcommand takes besides its dotted config keys.
struct TrainerArgs {
  std::vector<std::string> configs;
  CLI::Option* print_config = nullptr;
  std::string print_config_flags;
  bool save_config_overwrite = false;
};

void addTrainerOptions(CLI::App& app, TrainerArgs& args) {
  app.add_option("-c,--config", args.configs,
                 "YAML config file; repeatable, merged left to right, flags override them")
      ->allow_extra_args(false)
      ->type_name("FILE");
  args.print_config =
      app.add_option("--print_config", args.print_config_flags,
                     "Print the resolved config as YAML and exit. Flags: skip_default,skip_null,comments")
          ->expected(0, 1)
          ->type_name("[=FLAGS]");
  app.add_flag("--save_config_overwrite", args.save_config_overwrite,
               "Overwrite an existing <log_dir>/config.yaml at the start of fit");
}

core::config::PrintOptions parsePrintFlags(const std::string& flags) {
  core::config::PrintOptions o;
  std::string rest = flags;
  const std::vector<std::string> known{"skip_default", "skip_null", "comments"};
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string f = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    if (f == "skip_default")
      o.skip_default = true;
    else if (f == "skip_null")
      o.skip_null = true;
    else if (f == "comments")
      o.comments = true;
    else if (!f.empty())
      throw core::UsageError("--print_config: unknown flag '" + f + "'" +
                             core::config::didYouMean(f, known) +
                             " (flags: skip_default, skip_null, comments)");
  }
  return o;
}

// Rejects top-level flags given after the subcommand, saying where they go.
void rejectMisplaced(const std::vector<std::string>& extras, const std::string& sub) {
  for (const std::string& e : extras) {
    if (e == "--version")
      throw core::UsageError("--version belongs before the subcommand: hpu-train --version");
    if (e == "-v" || e == "--verbose")
      throw core::UsageError(e + " belongs before the subcommand: hpu-train " + e + " " + sub + " ...");
  }
}

// The run a trainer subcommand's command line asks for, or nothing when it
// only printed the config (--print_config) or a class's help (--model.help).
std::optional<core::RunRequest> composeRequest(const std::string& sub, const TrainerArgs& top, const TrainerArgs& args,
                                               std::vector<std::string> extras, int argc, char** argv,
                                               const Environment& env,
                                               std::vector<core::config::ConfigDocument> documents = {}) {
  rejectMisplaced(extras, sub);
  if (const std::optional<std::string> help = classHelpRequest(extras)) {
    std::cout << *help;
    return std::nullopt;
  }
  const CLI::Option* print = args.print_config->count() ? args.print_config : top.print_config;
  core::config::ConfigSources sources;
  sources.subcommand = sub;
  sources.template_only = print->count() > 0;
  sources.documents = std::move(documents);
  sources.files = top.configs;
  sources.files.insert(sources.files.end(), args.configs.begin(), args.configs.end());
  sources.overrides = parseOverrides(extras);
  sources.env = env;
  core::RunRequest request;
  request.subcommand = sub;
  request.config = core::config::composeConfig(sources, core::config::rootType(), &request.notes);
  if (print->count()) {
    core::resolveSeed(request.config, sources.env);
    for (const std::string& note : request.notes) spdlog::warn("{}", note);
    const std::string& flags = print == args.print_config ? args.print_config_flags : top.print_config_flags;
    std::cout << core::config::printConfig(request.config, core::config::rootType(), parsePrintFlags(flags));
    return std::nullopt;
  }
  request.save_config_overwrite = args.save_config_overwrite || top.save_config_overwrite;
  request.argv.assign(argv, argv + argc);
  request.version = std::string(version());
  request.env = std::move(sources.env);
  return request;
}

int runTrainerCommand(const std::string& sub, const TrainerArgs& top, const TrainerArgs& args,
                      std::vector<std::string> extras, int argc, char** argv, const Environment& env) {
  auto request = composeRequest(sub, top, args, std::move(extras), argc, argv, env);
  return request ? core::run(*request) : kExitOk;
}

// hpu-train estimate [fit|predict|plan] ...: the stage is the first word
// after the subcommand (fit when none).
struct EstimateArgs {
  TrainerArgs trainer;
  std::int64_t steps = 2;
  std::string json;
  bool verbose = false;
  std::string output;  // plan: the winner's config
  std::size_t top = 10, whole = 3;
  std::vector<const CLI::Option*> plan_only;  // -o, --top, --whole
  std::vector<const CLI::Option*> not_plan;   // --steps, --verbose
};

int estimateCommand(const TrainerArgs& top, const EstimateArgs& args, std::vector<std::string> extras, int argc,
                    char** argv, const Environment& env) {
  std::string stage = "fit";
  if (!extras.empty() && (extras.front() == "fit" || extras.front() == "predict" || extras.front() == "plan")) {
    stage = extras.front();
    extras.erase(extras.begin());
  } else if (!extras.empty() && extras.front().rfind('-', 0) != 0) {
    throw core::UsageError("estimate: unknown stage '" + extras.front() + "'" +
                           core::config::didYouMean(extras.front(), {"fit", "predict", "plan"}) +
                           " (fit, predict or plan)");
  }
  if (stage != "plan")
    for (const CLI::Option* o : args.plan_only)
      if (o->count() > 0)
        throw core::UsageError("estimate: " + o->get_name() + " belongs to estimate plan, not estimate " + stage);
  if (stage == "plan")
    for (const CLI::Option* o : args.not_plan)
      if (o->count() > 0) throw core::UsageError("estimate: " + o->get_name() + " belongs to estimate fit and predict, not plan");
  auto run = composeRequest(stage == "plan" ? "fit" : stage, top, args.trainer, std::move(extras), argc, argv, env);
  if (!run) return kExitOk;
  if (stage == "plan") {
    core::PlanRequest plan;
    plan.run = std::move(*run);
    plan.json_path = args.json;
    plan.output_path = args.output;
    plan.top = args.top;
    plan.whole = args.whole;
    return core::runPlan(plan);
  }
  core::EstimateRequest request;
  request.run = std::move(*run);
  request.steps = args.steps;
  request.json_path = args.json;
  request.verbose = args.verbose;
  return core::runEstimate(request);
}

// A checkpoint named on the command line (export's --ckpt_path, consolidate's
// input): last or best, a run of ./lightning_logs (Lightning's default root
// directory), or a file, read from the working directory. The one picked is
// said.
std::string checkpointArgument(const std::string& option, const std::string& value) {
  if (core::checkpoint::isRunCheckpointWord(value)) {
    using core::checkpoint::RunCheckpoint;
    const RunCheckpoint found = core::checkpoint::findRunCheckpoint(value, {{}, "lightning_logs", ""});
    if (found.outcome != RunCheckpoint::Outcome::kFound)
      throw core::UsageError(option + " " + value + ": " +
                             (found.outcome == RunCheckpoint::Outcome::kNoRecordedBest
                                  ? "the ModelCheckpoint state of " + found.looked_in + " records no best checkpoint"
                                  : "no last.ckpt under ./" + found.looked_in) +
                             "; give the checkpoint file");
    spdlog::info("{} {}: {} ({})", option, value, found.path, found.how);
    return found.path;
  }
  static const auto origin = std::make_shared<const std::string>("command line");
  const core::config::ResolvedPath resolved = core::config::resolvePath(
      core::config::Node::scalar(value, {origin}), core::config::PathKind::kFile, option);
  if (!resolved.problem.empty()) throw core::ConfigError(resolved.problem);
  return resolved.path;
}

// hpu-train export --ckpt_path CKPT --output DIR [--adapter] [-c cfg.yaml]:
// without --config, the config saved in the checkpoint builds the model.
struct ExportArgs {
  TrainerArgs trainer;
  std::string ckpt_path, output;
  bool adapter = false;
};

int exportCommand(const TrainerArgs& top, ExportArgs args, std::vector<std::string> extras, int argc, char** argv,
                  const Environment& env) {
  const bool own_config = !top.configs.empty() || !args.trainer.configs.empty();
  // With a config, last and best are the Trainer's to find, in the config's log directories.
  if (!own_config || !core::checkpoint::isRunCheckpointWord(args.ckpt_path))
    args.ckpt_path = checkpointArgument("--ckpt_path", args.ckpt_path);
  std::vector<core::config::ConfigDocument> saved;  // the checkpoint's own config
  if (!own_config) {
    const auto meta = core::checkpoint::readMetadata(args.ckpt_path);
    const auto it = meta.find("config");
    if (it == meta.end())
      throw core::UsageError("export: " + args.ckpt_path + " holds no config; give the one that trained it with -c");
    saved.push_back({"the config saved in " + args.ckpt_path, it->second});
  }
  std::optional<core::RunRequest> run =
      composeRequest("predict", top, args.trainer, std::move(extras), argc, argv, env, std::move(saved));
  if (!run) return kExitOk;
  core::ExportRequest request{std::move(*run), args.ckpt_path, args.output, args.adapter};
  return core::runExport(std::move(request));
}

int dispatch(int argc, char** argv, const Environment& env) {
  CLI::App app{"hpu-train: LightningCLI-style training on an emulated Habana Gaudi (HPU) runtime",
               "hpu-train"};
  app.set_version_flag("--version", "hpu-train " + std::string(version()));
  app.allow_extras();
  app.require_subcommand(0, 1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Debug logging (or HPU_LOG_LEVEL=trace|debug|info|warn|error)");
  app.footer([] { return env::describeCatalogue(); });
  app.formatter(std::make_shared<UsageFormatter>());
  TrainerArgs top;  // trainer options given before the subcommand
  addTrainerOptions(app, top);

  std::map<std::string, TrainerArgs> trainer_args;
  std::map<std::string, CLI::App*> trainer_apps;
  for (const auto& [name, doc] : kTrainerCommands) {
    CLI::App* sub = app.add_subcommand(name, doc);
    sub->allow_extras();
    addTrainerOptions(*sub, trainer_args[name]);
    sub->footer([] { return configKeysHelp(); });
    trainer_apps[name] = sub;
  }
  EstimateArgs estimate_args;
  CLI::App* estimate = app.add_subcommand(
      "estimate",
      "Estimate a run on Gaudi without running it: hpu-train estimate [fit|predict|plan] -c cfg.yaml. Runs the step "
      "graph shape-only (no data, no arithmetic) and reports device memory per rank, step time, throughput and MFU; "
      "plan searches the layouts of the config's model, cluster and global batch for the fastest that fits.");
  estimate->allow_extras();
  addTrainerOptions(*estimate, estimate_args.trainer);
  estimate_args.not_plan.push_back(
      estimate->add_option("--steps", estimate_args.steps, "fit: optimizer steps to trace (the last is priced)")
          ->check(CLI::Range(1, 1000))
          ->type_name("N"));
  estimate->add_option("--json", estimate_args.json, "Also write the report as JSON to FILE")->type_name("FILE");
  estimate_args.not_plan.push_back(
      estimate->add_flag("--verbose", estimate_args.verbose, "List every constant of the Gaudi model with its source"));
  estimate_args.plan_only = {
      estimate->add_option("-o,--output", estimate_args.output, "plan: write the fastest layout's config to FILE")
          ->type_name("FILE"),
      estimate->add_option("--top", estimate_args.top, "plan: rows of the ranked table")
          ->check(CLI::Range(1, 1000))
          ->type_name("N"),
      estimate->add_option("--whole", estimate_args.whole,
                           "plan: the fastest N layouts are traced whole and priced as estimate fit prices them")
          ->check(CLI::Range(1, 100))
          ->type_name("N")};
  estimate->footer([] { return configKeysHelp(); });
  ExportArgs export_args;
  CLI::App* export_app = app.add_subcommand(
      "export",
      "Write a language model's checkpoint as a Hugging Face model directory (config.json, model.safetensors, "
      "tokenizer, generation_config.json), LoRA merged; --adapter: its LoRA adapters as a PEFT adapter directory.");
  export_app->allow_extras();
  addTrainerOptions(*export_app, export_args.trainer);
  export_app->add_option("--ckpt_path", export_args.ckpt_path, "The checkpoint to export")->required()->type_name("CKPT");
  export_app->add_option("--output", export_args.output, "The directory to write")->required()->type_name("DIR");
  export_app->add_flag("--adapter", export_args.adapter, "Write the LoRA adapters alone (PEFT's layout)");
  CLI::App* devices = app.add_subcommand("devices", "List the emulated HPU devices (like hl-smi).");
  devices->allow_extras();
  std::string consolidate_in, consolidate_out;
  CLI::App* consolidate = app.add_subcommand(
      "consolidate", "Merge a checkpoint written by every rank (<ckpt>.rank<R>: a ZeRO run's optimizer shards, a tensor-parallel run's distributed checkpoint) into one checkpoint file that any strategy resumes.");
  consolidate->add_option("checkpoint", consolidate_in, "The sharded checkpoint")->required()->type_name("INPUT");
  consolidate->add_option("output", consolidate_out, "Where to write the consolidated checkpoint")->required()->type_name("OUTPUT");
  PlotArgs plot_args;
  setupPlotCommand(app, plot_args);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw core::UsageError(e.what());
  }
  applyEnvironment(env, verbose);

  const std::vector<std::string> before = app.remaining();
  const std::string config_subcommands = subcommandNames(app, ", ", /*configs_only=*/true, " and ");
  // What a subcommand left unparsed, after what came before it: its dotted keys.
  const auto extrasOf = [&before](const CLI::App* sub) {
    std::vector<std::string> extras = before;
    const auto after = sub->remaining();
    extras.insert(extras.end(), after.begin(), after.end());
    return extras;
  };
  for (const auto& [name, sub] : trainer_apps)
    if (sub->parsed()) return runTrainerCommand(name, top, trainer_args[name], extrasOf(sub), argc, argv, env);
  if (estimate->parsed()) return estimateCommand(top, estimate_args, extrasOf(estimate), argc, argv, env);
  if (export_app->parsed()) return exportCommand(top, export_args, extrasOf(export_app), argc, argv, env);
  if (devices->parsed()) {
    std::vector<std::string> misplaced = before;
    const auto after = devices->remaining();
    misplaced.insert(misplaced.end(), after.begin(), after.end());
    if (!top.configs.empty()) misplaced.push_back("--config");
    if (top.print_config->count()) misplaced.push_back("--print_config");
    if (top.save_config_overwrite) misplaced.push_back("--save_config_overwrite");
    if (!misplaced.empty())
      throw core::UsageError(misplaced.front() + " belongs to the " + config_subcommands + " subcommands, not 'devices'");
    std::cout << core::describeDevices(env);
    return kExitOk;
  }
  if (consolidate->parsed()) {
    if (!before.empty())
      throw core::UsageError(before.front() + " belongs to the " + config_subcommands + " subcommands, not 'consolidate'");
    core::checkpoint::consolidate(checkpointArgument("consolidate INPUT", consolidate_in), consolidate_out);
    std::cout << "wrote " << consolidate_out << "\n";
    return kExitOk;
  }
  if (plot_args.command->parsed()) {
    if (!before.empty())
      throw core::UsageError(before.front() + " belongs to the " + config_subcommands + " subcommands, not 'plot'");
    return runPlot(plot_args);
  }
  if (!before.empty() && before.front().rfind('-', 0) != 0) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
    throw core::UsageError("unknown subcommand '" + before.front() + "'" +
                           core::config::didYouMean(before.front(), names) + " (subcommands: " +
                           subcommandNames(app, ", ") + ")");
  }
  if (!before.empty() || !top.configs.empty())
    throw core::UsageError("missing subcommand before the options: hpu-train " +
                           subcommandNames(app, "|", /*configs_only=*/true) + " " +
                           (before.empty() ? std::string("--config FILE") : before.front()));
  throw core::UsageError("missing subcommand: hpu-train " + subcommandNames(app, "|") +
                         " [OPTIONS] (hpu-train --help lists them)");
}

}  // namespace

int runCli(int argc, char** argv, char** envp) {
  const Environment env = Environment::fromEntries(envp);  // the process's one snapshot
  // Logs and errors go to stderr; results (tables, printed configs) to stdout.
  // In a distributed run every line carries its rank (set by the strategy).
  spdlog::set_default_logger(spdlog::stderr_color_mt("hpu-train"));
  spdlog::set_pattern("%^%l%$: %v");
  try {
    return dispatch(argc, argv, env);
  } catch (...) {
    const core::Failure failure = core::failureOf(std::current_exception());
    // A local rank that hpu-train started hands its error to the process
    // that started it, which reports the job's failure once for every rank.
    const comm::WorkerErrorReport report{failure.exit_code, failure.secondary, failure.lines};
    const bool handed_over = !failure.reported && comm::reportErrorToLauncher(env, report);
    if (!failure.reported)
      for (const std::string& line : failure.lines)
        spdlog::log(handed_over ? spdlog::level::debug : spdlog::level::err, "{}", line);
    return failure.exit_code;
  }
}

}  // namespace hpu::cli
