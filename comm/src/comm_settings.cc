#include "hpu/comm/comm_settings.h"

#include <cmath>
#include <cstdlib>

#include <spdlog/fmt/fmt.h>

#include "hpu/comm/errors.h"

namespace hpu::comm {
namespace {

using std::chrono::milliseconds;

milliseconds parseDuration(std::string_view name, const std::string& text, milliseconds minimum) {
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  std::string_view unit(end);
  double scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1000;
  } else if (unit == "ms") {
    scale = 1;
  } else if (unit == "m" || unit == "min") {
    scale = 60'000;
  }
  const double ms = number * scale;
  if (end == text.c_str() || scale == 0 || !std::isfinite(ms) || ms > 1e12) {
    throw EnvError(fmt::format("{}='{}' is not a duration; use e.g. 300s, 5m or 1500ms", name, text));
  }
  if (ms < static_cast<double>(minimum.count()) || ms <= 0) {
    throw EnvError(fmt::format("{}='{}' is too short; use at least {}ms", name, text, std::max<long>(minimum.count(), 1)));
  }
  return milliseconds(static_cast<long long>(std::llround(ms)));
}

}  // namespace

std::chrono::milliseconds CommSettings::heartbeatInterval() const {
  return std::max(milliseconds(50), peerTimeout / 5);
}

CommSettings commSettingsFromEnv(const Environment& env) {
  CommSettings settings;
  if (auto v = env.get("HPU_RENDEZVOUS_TIMEOUT")) {
    settings.rendezvousTimeout = parseDuration("HPU_RENDEZVOUS_TIMEOUT", *v, milliseconds(1));
  }
  if (auto v = env.get("HPU_PEER_TIMEOUT")) {
    settings.peerTimeout = parseDuration("HPU_PEER_TIMEOUT", *v, milliseconds(250));
  }
  if (auto v = env.get("HPU_COLLECTIVE_TIMEOUT")) {
    settings.group.timeout = parseDuration("HPU_COLLECTIVE_TIMEOUT", *v, milliseconds(1));
  }
  if (auto v = env.get("HPU_RESTART_BACKOFF")) {
    settings.restartBackoff = parseDuration("HPU_RESTART_BACKOFF", *v, milliseconds(1));
  }
  if (auto v = env.get("HPU_COLLECTIVES")) {
    if (*v == "auto") {
      settings.collectives = CollectivesBackend::kAuto;
    } else if (*v == "zmq") {
      settings.collectives = CollectivesBackend::kZmq;
    } else if (*v == "mpi") {
      settings.collectives = CollectivesBackend::kMpi;
    } else {
      throw EnvError(fmt::format("HPU_COLLECTIVES='{}' is not a backend; use auto, zmq or mpi", *v));
    }
  }
  settings.startedByPmix = env.contains("PMIX_RANK");
  return settings;
}

}  // namespace hpu::comm
