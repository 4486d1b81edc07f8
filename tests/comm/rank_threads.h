// Runs one function per rank on its own thread and collects what each threw;
// the options those ranks-as-threads tests give their groups; the checks
// they share.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <string>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "hpu/comm/errors.h"
#include "hpu/comm/process_group.h"

namespace hpu::comm::test_support {

// Small chunks, so every size above a few elements streams many chunks, and
// a deadline that no test reaches unless a rank is stuck.
inline ProcessGroupOptions smallChunks() {
  ProcessGroupOptions options;
  options.chunkBytes = 256;
  options.timeout = std::chrono::seconds(30);
  return options;
}

// Calls body(group) for every group on its own thread; returns each rank's
// exception (nullptr when it returned). Every collective in `body` has a
// deadline, so the joins are bounded.
inline std::vector<std::exception_ptr> runRanks(std::vector<std::unique_ptr<ProcessGroup>>& groups,
                                                const std::function<void(ProcessGroup&)>& body) {
  std::vector<std::exception_ptr> errors(groups.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < groups.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(*groups[r]);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// Rethrows the first rank's exception, if any.
inline void rethrowFirst(const std::vector<std::exception_ptr>& errors) {
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace hpu::comm::test_support

namespace hpu::comm::test_support {

// The message of `error`, which must hold an E; otherwise records a test
// failure naming what it held instead and returns "".
template <class E>
std::string messageOf(const std::exception_ptr& error) {
  if (!error) {
    ADD_FAILURE() << "expected an exception, got none";
    return "";
  }
  try {
    std::rethrow_exception(error);
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected another exception type, got: " << e.what();
  }
  return "";
}

// Every group runs `collective` twice; in between, rank `victim` aborts with
// `reason` and returns. Expects every other rank to fail with PeerLostError
// naming `victim` and the reason, in the collective that
// `described(rank)` (a regex) matches: a rank may still be finishing the
// first one when the victim aborts. Both come before any timeout.
inline void expectAbortFailsTheOthers(std::vector<std::unique_ptr<ProcessGroup>>& groups, int victim,
                                      const std::string& reason,
                                      const std::function<void(ProcessGroup&)>& collective,
                                      const std::function<std::string(int rank)>& described) {
  std::vector<int> lostRanks(groups.size(), -1);
  const auto errors = runRanks(groups, [&](ProcessGroup& pg) {
    try {
      collective(pg);
      if (pg.rank() == victim) {
        pg.abort(reason);
        return;
      }
      collective(pg);
    } catch (const PeerLostError& e) {
      lostRanks[static_cast<std::size_t>(pg.rank())] = e.rank();
      throw;
    }
  });
  EXPECT_FALSE(errors[static_cast<std::size_t>(victim)]);
  for (int r = 0; r < static_cast<int>(groups.size()); ++r) {
    if (r == victim) continue;
    const std::string message = messageOf<PeerLostError>(errors[static_cast<std::size_t>(r)]);
    EXPECT_EQ(lostRanks[static_cast<std::size_t>(r)], victim);
    EXPECT_THAT(message, ::testing::ContainsRegex(described(r)));
    EXPECT_THAT(message, ::testing::HasSubstr("rank " + std::to_string(victim) + " aborted: " + reason));
  }
}

}  // namespace hpu::comm::test_support
