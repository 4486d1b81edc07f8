// HPU_FAULT's grammar (comm/fault_injection.h): every action and site, the
// restart filter, several faults, and errors that name the part at fault.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hpu/comm/errors.h"
#include "hpu/comm/fault_injection.h"

namespace hpu::comm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(FaultPlan, ParsesEveryActionSiteAndTheRestartFilter) {
  EXPECT_THAT(parseFaultPlan("crash,rank=1,step=35,restart=0"),
              ElementsAre(Fault{FaultAction::kCrash, 1, FaultSite::kStep, 35, 0}));
  EXPECT_THAT(parseFaultPlan(" hang , rank=0 , collective=7 ; freeze,rank=2,step=0;drop,rank=3,collective=1;"
                             "error,collective=2,rank=4"),
              ElementsAre(Fault{FaultAction::kHang, 0, FaultSite::kCollective, 7, std::nullopt},
                          Fault{FaultAction::kFreeze, 2, FaultSite::kStep, 0, std::nullopt},
                          Fault{FaultAction::kDrop, 3, FaultSite::kCollective, 1, std::nullopt},
                          Fault{FaultAction::kError, 4, FaultSite::kCollective, 2, std::nullopt}));
  EXPECT_TRUE(parseFaultPlan("").empty());
}

void expectRejected(const std::string& text, const std::string& why) {
  try {
    parseFaultPlan(text);
    ADD_FAILURE() << text << " was accepted";
  } catch (const EnvError& e) {
    EXPECT_THAT(e.what(), HasSubstr("HPU_FAULT: '"));
    EXPECT_THAT(e.what(), HasSubstr(why)) << text;
  }
}

TEST(FaultPlan, MistakesAreNamed) {
  expectRejected("explode,rank=1,step=2", "unknown action 'explode'");
  expectRejected("crash,step=2", "rank= is missing");
  expectRejected("crash,rank=1", "step= or collective= is missing");
  expectRejected("crash,rank=1,step=2,collective=3", "give one of step= and collective=");
  expectRejected("crash,rank=one,step=2", "rank=one is not a count");
  expectRejected("crash,rank=-1,step=2", "rank=-1 is not a count");
  expectRejected("crash,rank=1,when=2", "unknown key 'when' (rank, step, collective, restart)");
  expectRejected("crash,rank", "'rank' is not key=value");
}

}  // namespace
}  // namespace hpu::comm
