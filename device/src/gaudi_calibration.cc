// The time model's calibration: the efficiency parameters fitted on Intel's
// published figures, and the leave-one-out validation of each published run,
// both written by bench/estimate/calibrate.py (2026-11-27, the software 1.18
// figures of bench/estimate/published.py) and pasted here. Rerun it after
// changing how the estimate prices work, and replace the tables with its
// output.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "hpu/device/gaudi_model.h"

namespace hpu::device {
namespace {

using Mode = ValidationRow::Mode;

constexpr const char* kFitSource =
    "fitted by bench/estimate/calibrate.py on Intel's published figures (software 1.18)";

// BEGIN tables written by bench/estimate/calibrate.py --write
constexpr Calibration kGaudi2Calibration{0.974, 0.542, 1, 0.801, 1, 1.2e-05, 0.00164, kFitSource};
constexpr Calibration kGaudi3Calibration{0.625, 0.281, 0.682, 0.705, 1, 5.21e-06, 0.00103, kFitSource};

constexpr std::array<ValidationRow, 27> kGaudi2Rows{{
    {Mode::kTraining, 4096, 0, 1024, 8, 1.127},  // Llama 2 7B
    {Mode::kTraining, 4096, 0, 256, 16, 0.949},  // Llama 2 13B
    {Mode::kTraining, 4096, 0, 1024, 64, 0.984},  // Llama 2 70B
    {Mode::kTraining, 8192, 0, 128, 8, 0.987},  // Llama 3.1 8B
    {Mode::kTraining, 8192, 0, 128, 64, 1.009},  // Llama 3.1 70B
    {Mode::kInference, 128, 128, 1230, 1, 0.956},  // Llama 2 7B
    {Mode::kInference, 128, 2048, 163, 1, 1.110},  // Llama 2 7B
    {Mode::kInference, 2048, 128, 94, 1, 0.955},  // Llama 2 7B
    {Mode::kInference, 2048, 2048, 81, 1, 1.117},  // Llama 2 7B
    {Mode::kInference, 128, 128, 1750, 2, 0.978},  // Llama 2 70B
    {Mode::kInference, 128, 2048, 327, 2, 1.053},  // Llama 2 70B
    {Mode::kInference, 2048, 128, 95, 2, 0.988},  // Llama 2 70B
    {Mode::kInference, 2048, 2048, 78, 2, 0.850},  // Llama 2 70B
    {Mode::kInference, 128, 128, 896, 1, 1.005},  // Mistral 7B
    {Mode::kInference, 128, 2048, 120, 1, 0.913},  // Mistral 7B
    {Mode::kInference, 2048, 128, 120, 1, 1.187},  // Mistral 7B
    {Mode::kInference, 2048, 2048, 44, 1, 0.923},  // Mistral 7B
    {Mode::kInference, 128, 128, 2429, 1, 0.995},  // Llama 3.1 8B
    {Mode::kInference, 128, 2048, 289, 1, 1.185},  // Llama 3.1 8B
    {Mode::kInference, 2048, 128, 179, 1, 0.996},  // Llama 3.1 8B
    {Mode::kInference, 2048, 2048, 155, 1, 1.036},  // Llama 3.1 8B
    {Mode::kLatency, 128, 1, 1, 1, 0.995},  // Llama 2 7B
    {Mode::kLatency, 2048, 1, 1, 1, 1.110},  // Llama 2 7B
    {Mode::kLatency, 128, 1, 1, 8, 1.159},  // Llama 2 70B
    {Mode::kLatency, 2048, 1, 1, 8, 0.969},  // Llama 2 70B
    {Mode::kLatency, 128, 1, 1, 1, 1.005},  // Llama 3.1 8B
    {Mode::kLatency, 2048, 1, 1, 1, 1.159},  // Llama 3.1 8B
}};

constexpr std::array<ValidationRow, 24> kGaudi3Rows{{
    {Mode::kInference, 128, 128, 1536, 1, 0.859},  // Llama 2 7B
    {Mode::kInference, 128, 2048, 217, 1, 0.971},  // Llama 2 7B
    {Mode::kInference, 2048, 128, 153, 1, 0.900},  // Llama 2 7B
    {Mode::kInference, 2048, 2048, 75, 1, 0.931},  // Llama 2 7B
    {Mode::kInference, 128, 128, 1750, 2, 0.974},  // Llama 2 70B
    {Mode::kInference, 128, 2048, 512, 2, 1.006},  // Llama 2 70B
    {Mode::kInference, 2048, 128, 231, 2, 0.984},  // Llama 2 70B
    {Mode::kInference, 2048, 2048, 240, 2, 1.072},  // Llama 2 70B
    {Mode::kInference, 128, 128, 1536, 1, 1.030},  // Llama 3.1 8B
    {Mode::kInference, 128, 2048, 768, 1, 1.058},  // Llama 3.1 8B
    {Mode::kInference, 2048, 128, 256, 1, 1.049},  // Llama 3.1 8B
    {Mode::kInference, 2048, 2048, 364, 1, 1.138},  // Llama 3.1 8B
    {Mode::kInference, 128, 128, 3516, 2, 1.188},  // Llama 3.1 70B
    {Mode::kInference, 128, 2048, 450, 2, 0.979},  // Llama 3.1 70B
    {Mode::kInference, 2048, 128, 223, 2, 0.984},  // Llama 3.1 70B
    {Mode::kInference, 2048, 2048, 175, 2, 0.992},  // Llama 3.1 70B
    {Mode::kInference, 128, 128, 4000, 8, 0.977},  // Llama 3.1 70B
    {Mode::kInference, 128, 2048, 600, 8, 0.991},  // Llama 3.1 70B
    {Mode::kInference, 2048, 128, 400, 8, 1.039},  // Llama 3.1 70B
    {Mode::kInference, 2048, 2048, 600, 8, 1.002},  // Llama 3.1 70B
    {Mode::kInference, 128, 128, 896, 1, 0.973},  // Mistral 7B
    {Mode::kInference, 128, 2048, 120, 1, 1.018},  // Mistral 7B
    {Mode::kInference, 2048, 128, 120, 1, 1.082},  // Mistral 7B
    {Mode::kInference, 2048, 2048, 44, 1, 0.983},  // Mistral 7B
}};

// END tables written by bench/estimate/calibrate.py --write

}  // namespace

Calibration calibrationFor(Generation generation) {
  switch (generation) {
    case Generation::kGaudi:  // no published figures: uncalibrated
      return {};
    case Generation::kGaudi2:
      return kGaudi2Calibration;
    case Generation::kGaudi3:
      return kGaudi3Calibration;
  }
  return {};
}

std::span<const ValidationRow> validationRows(Generation generation) {
  switch (generation) {
    case Generation::kGaudi:
      return {};
    case Generation::kGaudi2:
      return kGaudi2Rows;
    case Generation::kGaudi3:
      return kGaudi3Rows;
  }
  return {};
}

double validationDistance(const ValidationRow& a, const ValidationRow& b) {
  const auto gap = [](double x, double y) { return std::abs(std::log((x + 1) / (y + 1))); };
  return gap(static_cast<double>(a.tokens_in), static_cast<double>(b.tokens_in)) +
         gap(static_cast<double>(a.tokens_out), static_cast<double>(b.tokens_out)) +
         0.5 * gap(static_cast<double>(a.batch), static_cast<double>(b.batch)) + gap(a.cards, b.cards);
}

Uncertainty uncertaintyWithout(Generation generation, const ValidationRow& run, Generation rows_of, std::size_t k) {
  std::vector<std::pair<double, const ValidationRow*>> near;
  for (const ValidationRow& r : validationRows(rows_of))
    if (r.mode == run.mode && &r != &run) near.emplace_back(validationDistance(run, r), &r);
  if (near.empty()) return {};
  std::stable_sort(near.begin(), near.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  near.resize(std::min(near.size(), k));
  Uncertainty u;
  u.rows = static_cast<int>(near.size());
  u.from = rows_of;
  u.nearest = *near.front().second;
  u.rows_low = u.rows_high = u.nearest.loo_ratio;
  for (const auto& entry : near) {
    u.rows_low = std::min(u.rows_low, entry.second->loo_ratio);
    u.rows_high = std::max(u.rows_high, entry.second->loo_ratio);
  }
  const double w = kUncertaintyBase + kUncertaintyPerDistance * near.front().first +
                   (rows_of != generation ? kUncertaintyOtherGeneration : 0.0);
  u.widening = std::exp(w);
  u.low = u.rows_low / u.widening;
  u.high = u.rows_high * u.widening;
  return u;
}

Uncertainty uncertaintyFor(Generation generation, const ValidationRow& run, std::size_t k) {
  Uncertainty u = uncertaintyWithout(generation, run, generation, k);
  if (u.rows > 0 || generation == Generation::kGaudi) return u;
  return uncertaintyWithout(generation, run,
                            generation == Generation::kGaudi2 ? Generation::kGaudi3 : Generation::kGaudi2, k);
}

}  // namespace hpu::device
