#include "hpu/env/catalogue.h"

#include <algorithm>
#include <array>

namespace hpu::env {
namespace {

using G = Group;

// Grouped in Group's order; within a group, as a user meets them.
constexpr std::array kCatalogue = std::to_array<Variable>({
    // The emulated HPU.
    {"HPU_EMULATOR_DEVICES", G::kEmulator, "8", "devices per emulated node, 1 to 256",
     "device::EmulatorSettings::devicesPerNode"},
    {"HPU_EMULATOR_GENERATION", G::kEmulator, "gaudi2", "the emulated card: gaudi, gaudi2 or gaudi3",
     "device::EmulatorSettings::generation"},
    {"HPU_EMULATOR_MEMORY_LIMIT", G::kEmulator, "the card's HBM",
     "device memory per device, e.g. 256MiB (B, KiB, MiB, GiB, KB, MB, GB)", "device::EmulatorSettings::memoryLimit"},
    {"HABANA_VISIBLE_DEVICES", G::kEmulator, "all", "the device ids this process sees, e.g. 0,3",
     "device::EmulatorSettings::visibleDevices"},
    {"HABANA_VISIBLE_MODULES", G::kEmulator, "all", "the module ids this process sees, e.g. 0,1",
     "device::EmulatorSettings::visibleModules"},
    {"PT_HPU_LAZY_MODE", G::kEmulator, "1", "1: lazy mode (ops build graphs run at mark_step), 0: eager",
     "device::EmulatorSettings::mode"},
    {"PT_HPU_RECIPE_CACHE_CONFIG", G::kEmulator, "no disk cache",
     "compiled graph recipes cached on disk: path,delete_on_init,size_mb", "device::EmulatorSettings::recipeCache"},
    {"HPU_CPU_ISA", G::kEmulator, "the best this CPU runs",
     "the kernels' instruction set: portable, avx2, avx512 or avx512_bf16", "device::setCpuIsa (cpuIsaFromEnv)"},
    {"HPU_INTRA_OP_THREADS", G::kEmulator, "cores / local ranks; 1 with trainer.deterministic",
     "threads each op runs on, 1 to 1024", "device::setIntraOpThreads"},

    // Where a process stands in a job.
    {"MASTER_ADDR", G::kLaunch, "127.0.0.1 on one node", "the address of the node that runs global rank 0",
     "comm::ClusterInfo::masterAddr"},
    {"MASTER_PORT", G::kLaunch, "a free port on one node", "rank 0's rendezvous port, the same on every node",
     "comm::ClusterInfo::masterPort"},
    {"NODE_RANK", G::kLaunch, "0", "this node's index (LightningEnvironment)", "comm::ClusterInfo::nodeRank"},
    {"GROUP_RANK", G::kLaunch, "unset", "NODE_RANK's torchrun spelling", "comm::ClusterInfo::nodeRank"},
    {"WORLD_SIZE", G::kLaunch, "devices x num_nodes", "processes in the job, checked against the config",
     "comm::ClusterInfo::worldSize"},
    {"LOCAL_RANK", G::kLaunch, "0", "this process's rank on its node (hpu-train sets it for the ranks it starts)",
     "comm::ClusterInfo::localRank"},
    {"RANK", G::kLaunch, "unset", "the global rank torchrun gives (TorchElasticEnvironment)",
     "comm::ClusterInfo::globalRank"},
    {"LOCAL_WORLD_SIZE", G::kLaunch, "unset", "torchrun's processes per node, checked against trainer.devices",
     "comm::Topology"},
    {"SLURM_NTASKS", G::kLaunch, "unset", "SLURM's processes in the job (SLURMEnvironment)",
     "comm::ClusterInfo::worldSize"},
    {"SLURM_PROCID", G::kLaunch, "unset", "SLURM's global rank", "comm::ClusterInfo::globalRank"},
    {"SLURM_LOCALID", G::kLaunch, "unset", "SLURM's rank on the node", "comm::ClusterInfo::localRank"},
    {"SLURM_NODEID", G::kLaunch, "unset", "SLURM's node index", "comm::ClusterInfo::nodeRank"},
    {"SLURM_JOB_NAME", G::kLaunch, "unset", "bash or interactive: an salloc shell, not a batch job's rank",
     "comm::detectClusterEnvironment"},
    {"SLURM_JOB_NODELIST", G::kLaunch, "unset", "the job's hosts; the first is MASTER_ADDR when that is unset",
     "comm::ClusterInfo::masterAddr"},
    {"SLURM_NODELIST", G::kLaunch, "unset", "SLURM_JOB_NODELIST's older name", "comm::ClusterInfo::masterAddr"},
    {"SLURM_JOB_ID", G::kLaunch, "unset", "derives MASTER_PORT when that is unset", "comm::ClusterInfo::masterPort"},
    {"OMPI_COMM_WORLD_RANK", G::kLaunch, "unset", "mpirun's global rank (MPIEnvironment)",
     "comm::ClusterInfo::globalRank"},
    {"OMPI_COMM_WORLD_SIZE", G::kLaunch, "unset", "mpirun's processes in the job", "comm::ClusterInfo::worldSize"},
    {"OMPI_COMM_WORLD_LOCAL_RANK", G::kLaunch, "unset", "mpirun's rank on the node", "comm::ClusterInfo::localRank"},
    {"PMIX_RANK", G::kLaunch, "unset", "set by mpirun (PMIx): the process may use Open MPI's collectives",
     "comm::CommSettings::startedByPmix"},

    // Communication.
    {"HPU_RENDEZVOUS_TIMEOUT", G::kCommunication, "300s",
     "how long ranks wait to meet at the rendezvous (300, 300s, 5m, 1500ms)",
     "comm::CommSettings::rendezvousTimeout"},
    {"HPU_PEER_TIMEOUT", G::kCommunication, "5s", "a rank silent this long is lost (at least 250ms)",
     "comm::CommSettings::peerTimeout"},
    {"HPU_COLLECTIVE_TIMEOUT", G::kCommunication, "600s", "a collective that cannot finish fails after this long",
     "comm::CommSettings::group.timeout"},
    {"HPU_COLLECTIVES", G::kCommunication, "auto",
     "collectives' backend: zmq, mpi (Open MPI, under mpirun) or auto (mpi under mpirun when built with it)",
     "comm::CommSettings::collectives"},
    {"HPU_JOB_TOKEN", G::kCommunication, "none: loopback jobs only",
     "the job's shared secret: authenticates ranks and keys the encryption of their traffic", "comm::JobToken"},
    {"HPU_JOB_TOKEN_FILE", G::kCommunication, "unset",
     "a file holding HPU_JOB_TOKEN, readable by its owner only", "comm::JobToken"},

    // Restarts.
    {"HPU_MAX_RESTARTS", G::kRestarts, "0", "restarts of a failed job when trainer.max_restarts is not set",
     "comm::ElasticOptions::maxRestarts"},
    {"HPU_RESTART_BACKOFF", G::kRestarts, "1s", "the wait before the first restart (doubling after)",
     "comm::CommSettings::restartBackoff"},
    {"HPU_RESTART_COUNT", G::kRestarts, "unset", "set by hpu-train for the ranks it restarts: the restart's number",
     "TrainerParts::restart_round"},
    {"HPU_WORKER_ERROR_FILE", G::kRestarts, "unset",
     "set by hpu-train for the ranks it starts: where a rank writes its error", "comm::reportErrorToLauncher"},

    // Training.
    {"PL_GLOBAL_SEED", G::kTraining, "a fresh draw",
     "the seed of seed_everything: true (and of every restarted round)", "TrainerParts::seed"},
    {"LOWER_LIST", G::kTraining, "the built-in list", "a file of op names autocast runs in bf16 / fp16",
     "autocast::Policy"},
    {"FP32_LIST", G::kTraining, "the built-in list", "a file of op names autocast keeps in fp32", "autocast::Policy"},
    {"QUANT_CONFIG", G::kTraining, "unset", "fp8 inference's JSON: mode MEASURE or QUANTIZE and the stats' path",
     "Fp8Options::quant_config"},
    {"PL_DEEPSPEED_CONFIG_PATH", G::kTraining, "unset", "a DeepSpeed JSON config when the strategy's config is null",
     "DeepSpeedSettings"},

    // Config values from the environment.
    {"HPU_DEFAULT_ENV", G::kConfig, "false", "true: the PL_ variables below set config values",
     "config::envOverrides"},
    {"JSONARGPARSE_DEFAULT_ENV", G::kConfig, "false", "HPU_DEFAULT_ENV's LightningCLI spelling",
     "config::envOverrides"},
    {"PL_<SUBCOMMAND>__<KEY>", G::kConfig, "unset",
     "a config value, after the files and before the command line: PL_FIT__TRAINER__MAX_EPOCHS=3",
     "config::envOverrides"},

    // Logging.
    {"HPU_LOG_LEVEL", G::kLogging, "info", "trace, debug, info, warn, error, critical or off (-v: debug)",
     "spdlog's level"},
    {"MLFLOW_TRACKING_TOKEN", G::kLogging, "unset", "MLFlowLogger: a bearer token for the tracking server",
     "HttpOptions::bearer_token"},
    {"MLFLOW_TRACKING_USERNAME", G::kLogging, "unset", "MLFlowLogger: basic authentication's user",
     "HttpOptions::username"},
    {"MLFLOW_TRACKING_PASSWORD", G::kLogging, "unset", "MLFlowLogger: basic authentication's password",
     "HttpOptions::password"},
    {"MLFLOW_TRACKING_INSECURE_TLS", G::kLogging, "false", "MLFlowLogger: true skips the server's TLS check",
     "HttpOptions::verify_tls"},
    {"MLFLOW_TRACKING_SERVER_CERT_PATH", G::kLogging, "the system's CAs", "MLFlowLogger: the PEM of the server's CA",
     "HttpOptions::ca_bundle"},
    {"MLFLOW_HTTP_REQUEST_TIMEOUT", G::kLogging, "120", "MLFlowLogger: seconds a request may take",
     "HttpOptions::timeout"},
    {"MLFLOW_HTTP_REQUEST_MAX_RETRIES", G::kLogging, "7", "MLFlowLogger: retries of a failed request",
     "MlflowRetry::max_retries"},
    {"MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", G::kLogging, "2", "MLFlowLogger: seconds before retry n: factor x 2^(n-1)",
     "MlflowRetry::backoff_factor"},
    {"MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", G::kLogging, "1", "MLFlowLogger: up to this many seconds more per retry",
     "MlflowRetry::jitter"},
    {"MLFLOW_TRACKING_OFFLINE", G::kLogging, "false",
     "MLFlowLogger: true logs to the local file store when the server is unreachable",
     "MlflowEnvironment::offline_allowed"},
    {"USER", G::kLogging, "unset", "MLflow's run user when the user database has no name for this uid",
     "MlflowEnvironment::user"},

    // Test builds.
    {"HPU_FAULT", G::kTesting, "unset",
     "builds with -DHPU_FAULT_INJECTION=ON: crash, error, hang, freeze or drop a rank on cue (comm/fault_injection.h)",
     "comm::installFaultPlan"},

    // The repository's scripts and tests.
    {"HPU_JOBS", G::kRepository, "2", "scripts/build.sh, test.sh, fuzz.sh: parallel compile jobs", "scripts"},
    {"HPU_FEATURE_MATRIX", G::kRepository, "a sample", "the feature-matrix test: every cell (all) or a sample",
     "tests/train/feature_matrix_test.cc"},
    {"HPU_FEATURE_MATRIX_TABLE", G::kRepository, "unset", "the feature-matrix test: where to write its table",
     "tests/train/feature_matrix_test.cc"},
    {"HPU_REQUIRE_INTEROP_PYTHON", G::kRepository, "unset",
     "the interop tests fail instead of skipping without .venv/interop", "tests/interop"},
});

constexpr std::string_view kProductPrefix = "HPU_";

}  // namespace

std::span<const Variable> catalogue() { return kCatalogue; }

const Variable* findVariable(std::string_view name) {
  const auto it = std::find_if(kCatalogue.begin(), kCatalogue.end(), [&](const Variable& v) { return v.name == name; });
  return it == kCatalogue.end() ? nullptr : &*it;
}

std::string_view groupTitle(Group group) {
  switch (group) {
    case G::kEmulator: return "The emulated HPU";
    case G::kLaunch: return "Launching: where a process stands in a job";
    case G::kCommunication: return "Communication";
    case G::kRestarts: return "Restarts";
    case G::kTraining: return "Training";
    case G::kConfig: return "Config values from the environment";
    case G::kLogging: return "Logging";
    case G::kTesting: return "Test builds";
    case G::kRepository: return "Read by the repository's scripts and tests, not by hpu-train";
  }
  return "";
}

std::vector<std::string> unknownProductVariables(const Environment& env) {
  std::vector<std::string> out;
  for (const auto& [name, value] : env.variables())
    if (name.starts_with(kProductPrefix) && findVariable(name) == nullptr) out.push_back(name);
  return out;  // sorted: the map's order
}

std::string describeCatalogue() {
  constexpr std::size_t kNameWidth = 36;
  std::string out = "Environment variables (read once at start-up; docs/environment.md says more):\n";
  bool first = true;
  Group group{};
  for (const Variable& v : kCatalogue) {
    if (v.group == G::kRepository) continue;
    if (first || v.group != group) {
      out += "\n  " + std::string(groupTitle(v.group)) + ":\n";
      group = v.group;
      first = false;
    }
    std::string line = "    " + std::string(v.name);
    line.resize(std::max(line.size() + 1, kNameWidth + 4), ' ');
    out += line + std::string(v.meaning) + " (default: " + std::string(v.default_value) + ")\n";
  }
  return out;
}

}  // namespace hpu::env
