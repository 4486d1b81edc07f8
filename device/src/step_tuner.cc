#include "hpu/device/step_tuner.h"

#include <algorithm>

namespace hpu::device {
namespace {

double median(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? static_cast<double>(v[h]) : 0.5 * static_cast<double>(v[h - 1] + v[h]);
}

}  // namespace

void StepTuner::restart(std::uint64_t kind) {
  if (probing_) alone_ = !alone_;  // back to the chosen mode
  probing_ = false;
  kind_ = kind;
  chosen_.clear();
  probe_.clear();
  run_left_ = std::max<std::uint64_t>(run_left_, kWindow);
}

bool StepTuner::onStep(std::uint64_t kind, std::int64_t ns) {
  if (kind != kind_) {
    const bool probed = probing_;
    restart(kind);
    if (probed) return alone_;  // the step ran in the probe's mode
  }
  if (!probing_) {
    chosen_.push_back(ns);
    if (chosen_.size() > kWindow) chosen_.erase(chosen_.begin());
    if (run_left_ > 0) --run_left_;
    if (run_left_ == 0 && chosen_.size() == kWindow) {
      probing_ = true;
      alone_ = !alone_;
      probe_.clear();
    }
    return alone_;
  }
  // The probe's first step pays for the switch (workers waking, caches).
  probe_.push_back(ns);
  const double chosen = median(chosen_);
  const bool lost_early =
      probe_.size() == kEarly + 1 && std::all_of(probe_.begin() + 1, probe_.end(), [&](std::int64_t t) {
        return static_cast<double>(t) > kFarBehind * chosen;
      });
  if (probe_.size() < kWindow + 1 && !lost_early) return alone_;
  ++probes_;
  probe_.erase(probe_.begin());
  const double ratio = median(probe_) / chosen;
  probing_ = false;
  if (ratio < (alone_ ? kToAlone : kToTeam)) {  // the probed mode (alone_ now) is chosen
    ++switches_;
    run_length_ = kMinRun;
  } else {
    alone_ = !alone_;
    run_length_ = ratio > kFarBehind ? std::min(2 * run_length_, kMaxRun) : kMinRun;
  }
  run_left_ = run_length_;
  chosen_.clear();
  return alone_;
}

}  // namespace hpu::device
