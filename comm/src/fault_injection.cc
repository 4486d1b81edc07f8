#include "hpu/comm/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "hpu/comm/errors.h"
#include "hpu/env/environment.h"

namespace hpu::comm {
namespace {

constexpr std::chrono::hours kLongestHang{1};

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (;;) {
    const auto at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

EnvError bad(std::string_view fault, const std::string& why) {
  return EnvError(fmt::format("HPU_FAULT: '{}': {}; expected action,rank=R,step=N|collective=N[,restart=K] with "
                              "action crash, error, hang, freeze or drop",
                              fault, why));
}

std::int64_t number(std::string_view fault, std::string_view key, std::string_view value) {
  std::int64_t n = -1;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < 0 || n > (std::int64_t{1} << 40))
    throw bad(fault, fmt::format("{}={} is not a count", key, value));
  return n;
}

Fault parseFault(std::string_view text) {
  const std::vector<std::string_view> parts = split(text, ',');
  Fault fault;
  static constexpr std::pair<std::string_view, FaultAction> kActions[] = {{"crash", FaultAction::kCrash},
                                                                          {"error", FaultAction::kError},
                                                                          {"hang", FaultAction::kHang},
                                                                          {"freeze", FaultAction::kFreeze},
                                                                          {"drop", FaultAction::kDrop}};
  for (const auto& [name, action] : kActions)
    if (trim(parts.front()) == name) fault.action = action;
  if (fault.action == FaultAction::kNone) throw bad(text, fmt::format("unknown action '{}'", trim(parts.front())));
  bool hasRank = false, hasSite = false;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string_view part = trim(parts[i]);
    const auto eq = part.find('=');
    if (eq == std::string_view::npos) throw bad(text, fmt::format("'{}' is not key=value", part));
    const std::string_view key = part.substr(0, eq), value = part.substr(eq + 1);
    const std::int64_t n = number(text, key, value);
    if (key == "rank") {
      fault.rank = static_cast<int>(n);
      hasRank = true;
    } else if (key == "step" || key == "collective") {
      if (hasSite) throw bad(text, "give one of step= and collective=");
      fault.site = key == "step" ? FaultSite::kStep : FaultSite::kCollective;
      fault.index = n;
      hasSite = true;
    } else if (key == "restart") {
      fault.restart = static_cast<int>(n);
    } else {
      throw bad(text, fmt::format("unknown key '{}' (rank, step, collective, restart)", key));
    }
  }
  if (!hasRank) throw bad(text, "rank= is missing");
  if (!hasSite) throw bad(text, "step= or collective= is missing");
  return fault;
}

const char* siteName(FaultSite site) { return site == FaultSite::kStep ? "step" : "collective"; }

// This process's plan and what already fired.
struct Plan {
  std::mutex mutex;
  std::vector<Fault> faults;
  std::vector<bool> fired;
  int round = 0;
  bool dropArmed = false;
};

Plan& plan() {
  static Plan* const instance = new Plan;  // lives as long as the process: sites may run during exit
  return *instance;
}

}  // namespace

bool faultInjectionBuilt() {
#if HPU_FAULT_INJECTION
  return true;
#else
  return false;
#endif
}

void installFaultPlan(const Environment& env) {
  const auto text = env.get("HPU_FAULT");
  std::vector<Fault> faults;
  int round = 0;
  if (text && !text->empty()) {
    if (!faultInjectionBuilt()) {
      spdlog::warn("HPU_FAULT is set but this build has no fault injection (configure with -DHPU_FAULT_INJECTION=ON)");
    } else {
      faults = parseFaultPlan(*text);
      if (const auto n = env.get("HPU_RESTART_COUNT")) round = std::atoi(n->c_str());
    }
  }
  Plan& p = plan();
  std::lock_guard lock(p.mutex);
  p.fired.assign(faults.size(), false);
  p.faults = std::move(faults);
  p.round = round;
  p.dropArmed = false;
}

std::vector<Fault> parseFaultPlan(std::string_view text) {
  std::vector<Fault> faults;
  for (std::string_view part : split(text, ';'))
    if (!trim(part).empty()) faults.push_back(parseFault(trim(part)));
  return faults;
}

FaultAction faultPoint(FaultSite site, std::int64_t index, int rank) {
  if (!faultInjectionBuilt()) return FaultAction::kNone;
  Plan& p = plan();
  std::optional<Fault> due;
  {
    std::lock_guard lock(p.mutex);
    if (site == FaultSite::kCollective && p.dropArmed) {
      p.dropArmed = false;
      return FaultAction::kDrop;
    }
    for (std::size_t i = 0; i < p.faults.size(); ++i) {
      const Fault& f = p.faults[i];
      if (p.fired[i] || f.site != site || f.index != index || f.rank != rank) continue;
      if (f.restart && *f.restart != p.round) continue;
      p.fired[i] = true;
      due = f;
      break;
    }
    if (due && due->action == FaultAction::kDrop && site == FaultSite::kStep) {
      p.dropArmed = true;
      return FaultAction::kNone;
    }
  }
  if (!due) return FaultAction::kNone;
  const std::string where = fmt::format("rank {}: fault injected at {} {} (HPU_FAULT)", rank, siteName(site), index);
  switch (due->action) {
    case FaultAction::kCrash:
      spdlog::error("{}: crash (SIGKILL)", where);
      spdlog::default_logger()->flush();
      ::kill(::getpid(), SIGKILL);
      break;
    case FaultAction::kFreeze:
      spdlog::error("{}: freeze (SIGSTOP)", where);
      spdlog::default_logger()->flush();
      ::kill(::getpid(), SIGSTOP);
      break;
    case FaultAction::kError:
      throw CommError(where + ": error");
    case FaultAction::kHang:
      spdlog::error("{}: hang", where);
      std::this_thread::sleep_for(kLongestHang);
      spdlog::error("{}: still hanging after an hour; exiting", where);
      std::_Exit(1);
    case FaultAction::kDrop:
      spdlog::error("{}: dropping every connection", where);
      return FaultAction::kDrop;
    case FaultAction::kNone:
      break;
  }
  return FaultAction::kNone;
}

}  // namespace hpu::comm
