// Test-only fault injection: a chosen rank fails at a chosen point of its
// run, so that tests exercise crashes, hangs and partitions deterministically
// instead of with sleeps and signals sent from outside. The plan comes from
// HPU_FAULT in builds configured with -DHPU_FAULT_INJECTION=ON (the default
// when the tests are built); other builds ignore it and warn once when it is
// set.
//
//   HPU_FAULT = fault[;fault...]
//   fault     = action,rank=R,(step=N | collective=N)[,restart=K]
//
// Actions:
//   crash   the process kills itself with SIGKILL (no unwinding, no flush),
//           as kill -9 or a lost machine would;
//   error   an error is thrown out of the step or collective: the rank fails
//           as a bug in user code makes it fail (exit code 1, message logged);
//   hang    the calling thread blocks while the process stays alive and keeps
//           sending heartbeats: peers wait in their next collective until
//           HPU_COLLECTIVE_TIMEOUT;
//   freeze  the process stops itself (SIGSTOP): no heartbeats, so peers
//           declare it lost after HPU_PEER_TIMEOUT;
//   drop    the rank's connections go silent both ways, as in a network
//           partition: peers declare it lost after HPU_PEER_TIMEOUT, and it
//           loses rank 0 in turn.
// Sites:
//   step=N        when training reaches global step N (N optimizer steps done
//                 and the checkpoints of step N saved); a drop there happens
//                 at the rank's next collective in the job's group;
//   collective=N  before the rank's collective #N (0-based, the numbers its
//                 peer-lost and mismatch errors print) in the job's group;
//                 the collectives of groups split from it are not sites;
//   restart=K     only in elastic round K (HPU_RESTART_COUNT, 0 for the first
//                 launch); in every round when absent.
// Each fault fires at most once per process. R is the global rank.
//
// Example: HPU_FAULT="crash,rank=1,step=35,restart=0" kills rank 1 at step
// 35 of the first launch only.
//
// Thread-safety: faultPoint may be called from any thread; the plan is the
// one installFaultPlan installed last (none until then).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "hpu/env/environment.h"

namespace hpu::comm {

enum class FaultAction : std::uint8_t { kNone, kCrash, kError, kHang, kFreeze, kDrop };
enum class FaultSite : std::uint8_t { kStep, kCollective };

struct Fault {
  FaultAction action = FaultAction::kNone;
  int rank = 0;
  FaultSite site = FaultSite::kStep;
  std::int64_t index = 0;
  std::optional<int> restart{};  // nullopt: every round
  bool operator==(const Fault&) const = default;
};

// Makes HPU_FAULT of `env` this process's plan, in the elastic round
// HPU_RESTART_COUNT names (0 when unset), replacing any earlier plan; an
// executable calls it once at start-up, before any site runs. Throws
// EnvError for a bad HPU_FAULT; warns once and installs nothing in builds
// without fault injection.
void installFaultPlan(const Environment& env);

// Parses HPU_FAULT's value. Throws EnvError naming HPU_FAULT and the part at fault.
std::vector<Fault> parseFaultPlan(std::string_view text);

// Called at each site. Fires the fault planned for (`site`, `index`) on
// global rank `rank` in this process's round, if any: crash and freeze act
// here, error throws CommError, hang blocks the caller (up to an hour, then
// the process exits with code 1). Returns kDrop when the caller must drop its
// connections (at a collective site: planned there, or at an earlier step),
// else kNone. Always kNone in builds without fault injection.
FaultAction faultPoint(FaultSite site, std::int64_t index, int rank);

// Whether this build honours HPU_FAULT.
bool faultInjectionBuilt();

}  // namespace hpu::comm
