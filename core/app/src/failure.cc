#include "hpu/core/app/failure.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "hpu/comm/errors.h"
#include "hpu/device/errors.h"

namespace hpu::core {
namespace {

// The message as one entry (a multi-line message prints as before).
std::vector<std::string> linesOf(const char* what) { return {what}; }

// "3", "0-1", "0,2,5-7"; REQUIRES: ranks sorted, distinct.
std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

struct RankFailure {
  int rank;
  Failure failure;
};

void setRankPattern(int rank) { spdlog::set_pattern(fmt::format("[rank {}] %^%l%$: %v", rank)); }

}  // namespace

Failure failureOf(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const JobFailedError& e) {
    return {e.exitCode(), {}, false, false, true};
  } catch (const ConfigError& e) {
    return {kExitUsage, e.problems()};
  } catch (const UsageError& e) {
    return {kExitUsage, linesOf(e.what())};
  } catch (const comm::EnvError& e) {
    return {kExitUsage, linesOf(e.what())};
  } catch (const device::EmulatorConfigError& e) {  // a bad HABANA_*/HPU_EMULATOR_* variable
    return {kExitUsage, linesOf(e.what())};
  } catch (const comm::PeerLostError& e) {
    return {kExitFailure, linesOf(e.what()), /*secondary=*/true, /*comm_error=*/true};
  } catch (const comm::CommError& e) {
    return {kExitFailure, linesOf(e.what()), false, /*comm_error=*/true};
  } catch (const std::exception& e) {
    return {kExitFailure, linesOf(e.what())};
  } catch (...) {
    return {kExitFailure, {"unknown error (not a std::exception)"}};
  }
}

int reportJobFailure(const std::optional<Failure>& own, int rank, const std::vector<comm::WorkerExit>& workers) {
  std::vector<RankFailure> failed;
  if (own && !own->reported) failed.push_back({rank, *own});
  bool worker_caused = false;  // a worker failed of its own accord
  for (const comm::WorkerExit& w : workers) {
    if (w.exitCode == 0) continue;
    Failure f;
    if (w.report) {
      f.exit_code = w.report->exitCode;
      f.lines = w.report->lines;
      f.secondary = w.report->secondary;
    } else {
      f.exit_code = w.exitCode;
      f.lines = {w.description};
      f.secondary = w.stopped;  // stopped by the launcher after another's failure
    }
    worker_caused = worker_caused || !f.secondary;
    failed.push_back({w.globalRank, std::move(f)});
  }
  if (failed.empty()) return own ? own->exit_code : 0;
  std::sort(failed.begin(), failed.end(), [](const RankFailure& a, const RankFailure& b) { return a.rank < b.rank; });
  // This rank's comm error after a worker's own failure: the launcher
  // aborted its group (or the peers it waited for were gone).
  for (RankFailure& f : failed)
    if (f.rank == rank && f.failure.comm_error && worker_caused) f.failure.secondary = true;
  const bool any_cause = std::any_of(failed.begin(), failed.end(), [](const auto& f) { return !f.failure.secondary; });

  // The causes, grouped by message, in the order of their lowest rank.
  std::vector<std::pair<std::vector<std::string>, std::vector<int>>> causes;
  std::vector<const RankFailure*> consequences;
  int exit_code = 0;
  for (const RankFailure& f : failed) {
    if (any_cause && f.failure.secondary) {
      consequences.push_back(&f);
      continue;
    }
    auto same = std::find_if(causes.begin(), causes.end(), [&](const auto& c) { return c.first == f.failure.lines; });
    if (same == causes.end()) {
      causes.push_back({f.failure.lines, {f.rank}});
      if (exit_code == 0) exit_code = f.failure.exit_code;
    } else {
      same->second.push_back(f.rank);
    }
  }
  for (const auto& [lines, ranks] : causes) {
    setRankPattern(ranks.front());
    for (const std::string& line : lines) spdlog::error("{}", line);
    if (ranks.size() > 1) spdlog::error("(the same error on ranks {})", rankList(ranks));
  }
  setRankPattern(rank);
  for (const RankFailure* f : consequences)
    for (const std::string& line : f->failure.lines) spdlog::debug("rank {} stopped after it: {}", f->rank, line);
  return exit_code == 0 ? kExitFailure : exit_code;
}

}  // namespace hpu::core
