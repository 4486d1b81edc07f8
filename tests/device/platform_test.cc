#include "hpu/device/platform.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "hpu/device/device_table.h"
#include "hpu/device/errors.h"

namespace hpu::device {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(Platform, OwnsOneDevicePerVisibleModule) {
  const Platform platform = Platform::fromEnv(Environment{{"HABANA_VISIBLE_DEVICES", "0,3"}});
  ASSERT_EQ(platform.autoDeviceCount(), 2);
  EXPECT_EQ(platform.device(0).name(), "hpu:0");
  EXPECT_EQ(platform.device(0).moduleId(), 0);
  EXPECT_EQ(platform.device(1).name(), "hpu:1");
  EXPECT_EQ(platform.device(1).index(), 1);
  EXPECT_EQ(platform.device(1).moduleId(), 3);
  EXPECT_EQ(platform.device(1).spec().generation, Generation::kGaudi2);
  EXPECT_EQ(platform.device(1).allocator().limit(), 96ull << 30);
  EXPECT_EQ(platform.device(1).graph().mode(), ExecutionMode::kLazy);
  EXPECT_EQ(Platform::fromEnv(Environment{}).autoDeviceCount(), 8);
  EXPECT_EQ(Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "2"}}).autoDeviceCount(), 2);
}

TEST(Platform, SettingsReachEveryDevice) {
  Platform platform = Platform::fromEnv(Environment{{"HPU_EMULATOR_GENERATION", "gaudi"},
                                                  {"HPU_EMULATOR_MEMORY_LIMIT", "1MiB"},
                                                  {"PT_HPU_LAZY_MODE", "0"},
                                                  {"HABANA_VISIBLE_MODULES", "6,7"}});
  for (int i = 0; i < platform.autoDeviceCount(); ++i) {
    const Device& d = platform.device(i);
    EXPECT_EQ(d.spec().generation, Generation::kGaudi);
    EXPECT_EQ(d.allocator().limit(), 1u << 20);
    EXPECT_EQ(d.graph().mode(), ExecutionMode::kEager);
    EXPECT_EQ(d.moduleId(), 6 + i);
  }
  EXPECT_THROW(platform.device(0).requireSupported(DType::kFloat8E4M3), UnsupportedDTypeError);
  EXPECT_NO_THROW(platform.device(0).requireSupported(DType::kBFloat16));
}

TEST(Platform, AskingForMoreDevicesThanVisibleFailsWithTheNumbers) {
  const Platform platform = Platform::fromEnv(Environment{{"HABANA_VISIBLE_MODULES", "0,3"}});
  EXPECT_NO_THROW(platform.requireDevices(2));
  try {
    platform.requireDevices(4);
    FAIL() << "expected NotEnoughDevicesError";
  } catch (const NotEnoughDevicesError& e) {
    EXPECT_STREQ(e.what(),
                 "There is not enough devices available for training. Please verify if HABANA_VISIBLE_MODULES is "
                 "set correctly: requested 4, visible 2 (HABANA_VISIBLE_DEVICES unset, HABANA_VISIBLE_MODULES=0,3, "
                 "HPU_EMULATOR_DEVICES=8)");
    EXPECT_EQ(e.requested(), 4);
    EXPECT_EQ(e.visible(), 2);
  }
}

TEST(Platform, BadSettingsFailConstruction) {
  EmulatorSettings s;
  s.visibleModules = "9";
  EXPECT_THROW(Platform{s}, EmulatorConfigError);
}

TEST(Platform, DeviceIndexOutOfRangeIsABug) {
  const Platform platform = Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  EXPECT_DEATH(platform.device(1), "device 1 of 1 visible");
}

TEST(DeviceTable, ListsExactlyTheVisibleDevicesLikeHlSmi) {
  Platform platform = Platform::fromEnv(Environment{{"HABANA_VISIBLE_DEVICES", "0,3"}});
  Buffer held = platform.device(1).allocator().allocate(DType::kBFloat16, 512 * 1024);
  const std::vector<std::string> out = lines(formatDeviceTable(platform));
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0],
            "HPU emulator: 8 x gaudi2 per node, memory limit 96 GiB (HBM), lazy mode, HABANA_VISIBLE_DEVICES=0,3, "
            "HABANA_VISIBLE_MODULES unset");
  EXPECT_EQ(out[1],
            "Intel Gaudi 2: HBM 96 GiB at 2.46 TB/s; matrix-engine peak TFLOP/s: bfloat16 432, float8_e4m3fn 865, "
            "float8_e5m2 865; NIC 24 x 100 GbE RoCE v2");
  EXPECT_EQ(out[2], "HPU    Module  Generation  Memory (in use / limit)  DTypes");
  EXPECT_EQ(out[3],
            "hpu:0  0       gaudi2      0 B / 96 GiB             float32 bfloat16 float16 float8_e4m3fn float8_e5m2 "
            "int64 int32 uint8 bool");
  EXPECT_EQ(out[4],
            "hpu:1  3       gaudi2      1 MiB / 96 GiB           float32 bfloat16 float16 float8_e4m3fn float8_e5m2 "
            "int64 int32 uint8 bool");
}

TEST(DeviceTable, ShowsTheFirstGenerationWithoutFp8) {
  const Platform platform =
      Platform::fromEnv(Environment{{"HPU_EMULATOR_GENERATION", "gaudi"}, {"HPU_EMULATOR_DEVICES", "1"},
                            {"HPU_EMULATOR_MEMORY_LIMIT", "256MiB"}});
  const std::vector<std::string> out = lines(formatDeviceTable(platform));
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0],
            "HPU emulator: 1 x gaudi per node, memory limit 256 MiB (HPU_EMULATOR_MEMORY_LIMIT), lazy mode, "
            "HABANA_VISIBLE_DEVICES unset, HABANA_VISIBLE_MODULES unset");
  EXPECT_EQ(out[1],
            "Habana Gaudi: HBM 32 GiB at 0.9 TB/s; matrix-engine peak TFLOP/s: bfloat16 60; NIC 10 x 100 GbE RoCE v2");
  EXPECT_EQ(out[3], "hpu:0  0       gaudi       0 B / 256 MiB            float32 bfloat16 int64 int32 uint8 bool");
}

}  // namespace
}  // namespace hpu::device
