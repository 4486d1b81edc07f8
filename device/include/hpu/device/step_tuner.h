// StepTuner: whether whole training steps run faster on the intra-op team or
// on the calling thread alone, measured on the steps themselves.
//
// Each parallel loop learns its own costs (threading.h), but not what
// sharing costs between kernels: data one thread wrote that the next kernel
// reads on the other core. On some hosts, and in some phases of one host,
// that traffic made memory-bound kernels run 3.5x slower on two threads
// (Adam, packing the weights), and the loops could not see it: run alone
// inside a two-thread step, they pay it too. Whole steps can. After a run
// of steps in the chosen mode, a few steps run in the other; the faster
// (median step time) is chosen for the next run: the calling thread alone as
// soon as it is faster at all, the team only when it is kToTeam faster, so
// that a second core must earn its place (beside a busy core a close call
// runs alone, never slower than one thread) and a 5% band still keeps the
// host's noise from flipping modes. A run grows while the chosen mode keeps
// winning by far, so that probing the worse one costs little; it shrinks to
// kMinRun after a close call or a change. A probe whose first kEarly steps
// (after the switch) all lose by far ends there: beside a busy core, a
// probe of the team whose worker is preempted mid-task costs several
// times a step alone.
//
// A step's kind (its op count) tells training steps from validation steps:
// only steps of one kind are compared.
//
// Thread-safety: not thread-safe; threading.cc serialises calls.
#pragma once

#include <cstdint>
#include <vector>

namespace hpu::device {

class StepTuner {
 public:
  static constexpr std::size_t kWindow = 8;   // steps compared in each mode
  static constexpr std::uint64_t kFirstRun = 16, kMinRun = 256, kMaxRun = 8192;
  // The probed mode wins below these ratios of its median step time to the chosen mode's.
  static constexpr double kToAlone = 1.0, kToTeam = 0.95;
  static constexpr double kFarBehind = 1.25;  // it loses by far above this one
  static constexpr std::size_t kEarly = 3;    // probe steps that can lose by far before kWindow

  // A step of `kind` took `ns`; returns whether the next steps run alone.
  bool onStep(std::uint64_t kind, std::int64_t ns);
  bool alone() const { return alone_; }
  // Runs of steps probed so far, and switches made.
  std::uint64_t probes() const { return probes_; }
  std::uint64_t switches() const { return switches_; }

 private:
  void restart(std::uint64_t kind);

  bool alone_ = false;
  bool probing_ = false;
  std::uint64_t kind_ = 0;
  std::uint64_t run_left_ = kFirstRun, run_length_ = kMinRun;
  std::vector<std::int64_t> chosen_, probe_;  // the chosen mode's last steps; the probe's
  std::uint64_t probes_ = 0, switches_ = 0;
};

}  // namespace hpu::device
