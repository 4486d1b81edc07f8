#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hpu/comm/comm_settings.h"
#include "hpu/comm/config_fingerprint.h"
#include "hpu/comm/errors.h"

namespace hpu::comm {
namespace {

using namespace std::chrono_literals;

TEST(CommSettings, DefaultsAreTheDocumentedOnes) {
  const CommSettings settings = commSettingsFromEnv({});
  EXPECT_EQ(settings.rendezvousTimeout, 300s);
  EXPECT_EQ(settings.peerTimeout, 5s);
  EXPECT_EQ(settings.heartbeatInterval(), 1s);
  EXPECT_EQ(settings.group.timeout, 600s);
}

TEST(CommSettings, DurationsAcceptSecondsMinutesAndMilliseconds) {
  const CommSettings settings = commSettingsFromEnv(
      {{"HPU_RENDEZVOUS_TIMEOUT", "5m"}, {"HPU_PEER_TIMEOUT", "2.5s"}, {"HPU_COLLECTIVE_TIMEOUT", "1500ms"}});
  EXPECT_EQ(settings.rendezvousTimeout, 300s);
  EXPECT_EQ(settings.peerTimeout, 2500ms);
  EXPECT_EQ(settings.heartbeatInterval(), 500ms);
  EXPECT_EQ(settings.group.timeout, 1500ms);
  EXPECT_EQ(commSettingsFromEnv({{"HPU_RENDEZVOUS_TIMEOUT", "45"}}).rendezvousTimeout, 45s);
}

TEST(CommSettings, InvalidDurationsNameTheVariable) {
  auto message = [](const Environment& env) {
    try {
      commSettingsFromEnv(env);
    } catch (const EnvError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({{"HPU_RENDEZVOUS_TIMEOUT", "soon"}}),
            "HPU_RENDEZVOUS_TIMEOUT='soon' is not a duration; use e.g. 300s, 5m or 1500ms");
  EXPECT_EQ(message({{"HPU_RENDEZVOUS_TIMEOUT", "2h"}}),
            "HPU_RENDEZVOUS_TIMEOUT='2h' is not a duration; use e.g. 300s, 5m or 1500ms");
  EXPECT_EQ(message({{"HPU_COLLECTIVE_TIMEOUT", "-5s"}}), "HPU_COLLECTIVE_TIMEOUT='-5s' is too short; use at least 1ms");
  EXPECT_EQ(message({{"HPU_PEER_TIMEOUT", "100ms"}}), "HPU_PEER_TIMEOUT='100ms' is too short; use at least 250ms");
}

TEST(ConfigFingerprint, FirstDifferenceNamesKeyAndBothValues) {
  const ConfigFingerprint reference{{{"model.lr", "0.1"}, {"trainer.devices", "8"}, {"trainer.precision", "32-true"}}};
  ConfigFingerprint same = reference;
  EXPECT_EQ(describeFirstDifference(same, reference), std::nullopt);
  EXPECT_EQ(same.digest(), reference.digest());

  ConfigFingerprint precision = reference;
  precision.entries[2].second = "bf16-mixed";
  EXPECT_NE(precision.digest(), reference.digest());
  EXPECT_EQ(describeFirstDifference(precision, reference), "trainer.precision: bf16-mixed vs 32-true");

  ConfigFingerprint missing{{{"model.lr", "0.1"}, {"trainer.precision", "32-true"}}};
  EXPECT_EQ(describeFirstDifference(missing, reference), "trainer.devices: <unset> vs 8");
  EXPECT_EQ(describeFirstDifference(reference, missing), "trainer.devices: 8 vs <unset>");

  ConfigFingerprint extra = reference;
  extra.entries.emplace_back("trainer.num_nodes", "2");
  EXPECT_EQ(describeFirstDifference(extra, reference), "trainer.num_nodes: 2 vs <unset>");

  ConfigFingerprint reordered{{{"trainer.devices", "8"}, {"model.lr", "0.1"}, {"trainer.precision", "32-true"}}};
  EXPECT_NE(reordered.digest(), reference.digest());
  EXPECT_EQ(describeFirstDifference(reordered, reference), "trainer.devices: same value, listed in a different order");
}

TEST(ConfigFingerprint, DigestSeparatesKeysFromValues) {
  // Length prefixes keep ("ab", "c") and ("a", "bc") apart.
  EXPECT_NE((ConfigFingerprint{{{"ab", "c"}}}.digest()), (ConfigFingerprint{{{"a", "bc"}}}.digest()));
}

}  // namespace
}  // namespace hpu::comm
