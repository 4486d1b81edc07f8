// StepTuner on made-up step times: it probes the other mode after a run of
// steps, keeps whichever mode the medians favour, lengthens its runs while
// the chosen mode wins by far, and compares steps of one kind only.
#include "hpu/device/step_tuner.h"

#include <gtest/gtest.h>

#include <functional>

namespace hpu::device {
namespace {

// Feeds `steps` steps of `kind` whose time depends on the mode they ran in;
// returns how many ran alone.
int feed(StepTuner& t, int steps, std::uint64_t kind, const std::function<std::int64_t(bool alone)>& ns) {
  int alone = 0;
  for (int i = 0; i < steps; ++i) {
    alone += t.alone();
    t.onStep(kind, ns(t.alone()));
  }
  return alone;
}

TEST(StepTuner, StaysOnTheTeamWhenItIsFasterAndProbesLessAndLess) {
  StepTuner t;
  const auto team_twice_as_fast = [](bool alone) { return alone ? 2000 : 1000; };
  // The first run, then a probe alone that loses by far in its first kEarly
  // steps after the switch, and ends there.
  const int alone = feed(t, 200, 7, team_twice_as_fast);
  EXPECT_FALSE(t.alone());
  EXPECT_EQ(t.probes(), 1u);
  EXPECT_EQ(alone, static_cast<int>(StepTuner::kEarly) + 1);
  EXPECT_EQ(t.switches(), 0u);
  // Runs double after each far-behind probe: 512, 1024, 2048 steps, each
  // followed by a probe of kEarly + 1 steps.
  const int probe = static_cast<int>(StepTuner::kEarly) + 1;
  const int first = static_cast<int>(StepTuner::kFirstRun) + probe;
  feed(t, first + 512 + probe + 1024 + probe - 200, 7, team_twice_as_fast);
  EXPECT_EQ(t.probes(), 3u);
  feed(t, 2047, 7, team_twice_as_fast);
  EXPECT_EQ(t.probes(), 3u);
  feed(t, 1 + probe, 7, team_twice_as_fast);
  EXPECT_EQ(t.probes(), 4u);
  EXPECT_EQ(t.switches(), 0u);
}

// A probe runs its whole window unless each of its first kEarly steps after
// the switch loses by far: one close step among them keeps it going.
TEST(StepTuner, OnlyAProbeLosingByFarAtEveryEarlyStepEndsEarly) {
  StepTuner t;
  feed(t, StepTuner::kFirstRun - 1, 1, [](bool) { return 1000; });
  ASSERT_FALSE(t.alone());
  t.onStep(1, 1000);  // the first run ends: the next steps probe one thread
  ASSERT_TRUE(t.alone());
  int steps = 0;
  for (const std::int64_t ns : {5000, 1300, 1200, 1300}) t.onStep(1, ns), ++steps;  // 1200: not by far
  EXPECT_EQ(t.probes(), 0u);
  EXPECT_TRUE(t.alone());
  while (t.probes() == 0) t.onStep(1, 1300), ++steps;
  EXPECT_EQ(steps, static_cast<int>(StepTuner::kWindow) + 1);
  EXPECT_FALSE(t.alone());  // 30% behind: the team stays
  EXPECT_EQ(t.switches(), 0u);
}

TEST(StepTuner, SwitchesToOneThreadWhenThatIsFasterAndBackWhenTheHostChanges) {
  StepTuner t;
  bool shared_is_slow = true;
  const auto host = [&](bool alone) -> std::int64_t { return alone == shared_is_slow ? 1000 : 1600; };
  feed(t, StepTuner::kFirstRun + StepTuner::kWindow + 1, 3, host);
  EXPECT_TRUE(t.alone());
  EXPECT_EQ(t.switches(), 1u);
  // Alone from now on, probing the team now and then (a close-call run:
  // kMinRun steps after a switch).
  const int alone = feed(t, 500, 3, host);
  EXPECT_GT(alone, 480);
  EXPECT_TRUE(t.alone());
  shared_is_slow = false;  // the host's other core is free again
  feed(t, 2 * StepTuner::kMaxRun, 3, host);
  EXPECT_FALSE(t.alone());
  EXPECT_EQ(t.switches(), 2u);
}

TEST(StepTuner, CloseCallsFavourOneThreadAndKindsAreNotMixed) {
  StepTuner t;
  // The team 3% faster: not enough to leave it (one thread must be faster),
  // so the runs stay short.
  feed(t, 2000, 5, [](bool alone) { return alone ? 1030 : 1000; });
  EXPECT_FALSE(t.alone());
  EXPECT_EQ(t.switches(), 0u);
  EXPECT_GE(t.probes(), 6u);
  // One thread 2% faster (a busy core beside the team): it is chosen, and the
  // team, 3% faster once the core is free, is not enough to win it back
  // (kToTeam); 10% is.
  StepTuner busy;
  feed(busy, 300, 5, [](bool alone) { return alone ? 980 : 1000; });
  EXPECT_TRUE(busy.alone());
  EXPECT_EQ(busy.switches(), 1u);
  feed(busy, 2000, 5, [](bool alone) { return alone ? 1030 : 1000; });
  EXPECT_TRUE(busy.alone());
  EXPECT_EQ(busy.switches(), 1u);
  feed(busy, 2000, 5, [](bool alone) { return alone ? 1100 : 1000; });
  EXPECT_FALSE(busy.alone());
  EXPECT_EQ(busy.switches(), 2u);
  // Alternating kinds (fast evaluation steps between training steps) never
  // fill a window of one kind: no probe, no switch.
  StepTuner mixed;
  for (int i = 0; i < 1000; ++i) mixed.onStep(i % 2 ? 10 : 20, mixed.alone() ? 100 : (i % 2 ? 500 : 50));
  EXPECT_EQ(mixed.probes(), 0u);
  EXPECT_FALSE(mixed.alone());
}

}  // namespace
}  // namespace hpu::device
