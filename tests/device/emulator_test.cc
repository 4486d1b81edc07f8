#include "hpu/device/emulator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "hpu/device/errors.h"

namespace hpu::device {
namespace {

// The EmulatorConfigError message for env, or "no error".
std::string errorOf(const Environment& env) {
  try {
    loadEmulatorSettings(env);
  } catch (const EmulatorConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Emulator, DefaultsAreAnEightDeviceGaudi2NodeInLazyMode) {
  const EmulatorSettings s = loadEmulatorSettings(Environment{});
  EXPECT_EQ(s.devicesPerNode, 8);
  EXPECT_EQ(s.generation, Generation::kGaudi2);
  EXPECT_FALSE(s.memoryLimit.has_value());
  EXPECT_EQ(s.mode, ExecutionMode::kLazy);
  EXPECT_FALSE(s.recipeCache.has_value());
  EXPECT_EQ(visibleModuleIds(s), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  const MemoryLimit limit = memoryLimitOf(s);
  EXPECT_EQ(limit.bytes, 96ull << 30);
  EXPECT_EQ(limit.source, "gaudi2's 96 GiB of HBM");
  EXPECT_FALSE(limit.overridden);
  EXPECT_EQ(describe(s),
            "8 x gaudi2 per node, memory limit 96 GiB (HBM), lazy mode, HABANA_VISIBLE_DEVICES unset, "
            "HABANA_VISIBLE_MODULES unset");
}

TEST(Emulator, ReadsEverySetting) {
  const EmulatorSettings s = loadEmulatorSettings(Environment{{"HPU_EMULATOR_DEVICES", "4"},
                                                      {"HPU_EMULATOR_GENERATION", "GAUDI3"},
                                                      {"HPU_EMULATOR_MEMORY_LIMIT", "256MiB"},
                                                      {"PT_HPU_LAZY_MODE", "0"},
                                                      {"PT_HPU_RECIPE_CACHE_CONFIG", "/tmp/r,True,64"}});
  EXPECT_EQ(s.devicesPerNode, 4);
  EXPECT_EQ(s.generation, Generation::kGaudi3);
  EXPECT_EQ(s.memoryLimit, 256ull << 20);
  EXPECT_EQ(s.mode, ExecutionMode::kEager);
  ASSERT_TRUE(s.recipeCache.has_value());
  EXPECT_EQ(s.recipeCache->directory, "/tmp/r");
  EXPECT_TRUE(s.recipeCache->deleteOnInit);
  EXPECT_EQ(s.recipeCache->maxBytes, 64ull << 20);
  const MemoryLimit limit = memoryLimitOf(s);
  EXPECT_EQ(limit.bytes, 256ull << 20);
  EXPECT_EQ(limit.source, "HPU_EMULATOR_MEMORY_LIMIT=256 MiB");
  EXPECT_TRUE(limit.overridden);
  EXPECT_EQ(loadEmulatorSettings(Environment{{"PT_HPU_LAZY_MODE", "1"}}).mode, ExecutionMode::kLazy);
}

TEST(Emulator, BadValuesNameTheVariableAndTheAcceptedValues) {
  EXPECT_EQ(errorOf({{"HPU_EMULATOR_DEVICES", "0"}}),
            "HPU_EMULATOR_DEVICES: '0' is not a device count; use 1 to 256 (default 8)");
  EXPECT_EQ(errorOf({{"HPU_EMULATOR_DEVICES", "eight"}}),
            "HPU_EMULATOR_DEVICES: 'eight' is not a device count; use 1 to 256 (default 8)");
  EXPECT_EQ(errorOf({{"HPU_EMULATOR_DEVICES", "257"}}),
            "HPU_EMULATOR_DEVICES: '257' is not a device count; use 1 to 256 (default 8)");
  EXPECT_EQ(errorOf({{"HPU_EMULATOR_GENERATION", "gaudi4"}}),
            "HPU_EMULATOR_GENERATION: 'gaudi4' is not a generation; use gaudi, gaudi2 (default) or gaudi3");
  EXPECT_EQ(errorOf({{"HPU_EMULATOR_MEMORY_LIMIT", "12XB"}}),
            "HPU_EMULATOR_MEMORY_LIMIT: '12XB' is not a memory size; use a positive number with an optional "
            "unit B, KiB, MiB, GiB, KB, MB or GB, such as 256MiB");
  EXPECT_EQ(errorOf({{"HPU_EMULATOR_MEMORY_LIMIT", "100GiB"}}),
            "HPU_EMULATOR_MEMORY_LIMIT: 100 GiB is not within 1 B and gaudi2's 96 GiB of HBM; lower it or pick "
            "a generation with more memory (HPU_EMULATOR_GENERATION)");
  EXPECT_EQ(errorOf({{"HPU_EMULATOR_MEMORY_LIMIT", "100GiB"}, {"HPU_EMULATOR_GENERATION", "gaudi3"}}), "no error");
  EXPECT_EQ(errorOf({{"PT_HPU_LAZY_MODE", "2"}}),
            "PT_HPU_LAZY_MODE: '2' is not a mode; use 1 (lazy, the default) or 0 (eager)");
  EXPECT_EQ(errorOf({{"PT_HPU_RECIPE_CACHE_CONFIG", "/tmp/r,maybe,64"}}),
            "PT_HPU_RECIPE_CACHE_CONFIG: '/tmp/r,maybe,64' has delete_on_init 'maybe', not true or false; "
            "expected path,delete_on_init,size_mb, e.g. /tmp/hpu_recipes,false,1024");
  EXPECT_EQ(errorOf({{"PT_HPU_RECIPE_CACHE_CONFIG", "/tmp/r,false"}}),
            "PT_HPU_RECIPE_CACHE_CONFIG: '/tmp/r,false' has 2 fields, not 3; expected path,delete_on_init,size_mb, "
            "e.g. /tmp/hpu_recipes,false,1024");
  EXPECT_EQ(errorOf({{"PT_HPU_RECIPE_CACHE_CONFIG", ",false,10"}}),
            "PT_HPU_RECIPE_CACHE_CONFIG: ',false,10' has an empty path; expected path,delete_on_init,size_mb, "
            "e.g. /tmp/hpu_recipes,false,1024");
  EXPECT_EQ(errorOf({{"PT_HPU_RECIPE_CACHE_CONFIG", "/tmp/r,0,0"}}),
            "PT_HPU_RECIPE_CACHE_CONFIG: '/tmp/r,0,0' has size_mb '0', not a positive number of megabytes; "
            "expected path,delete_on_init,size_mb, e.g. /tmp/hpu_recipes,false,1024");
  try {
    loadEmulatorSettings(Environment{{"PT_HPU_LAZY_MODE", "yes"}});
    FAIL();
  } catch (const EmulatorConfigError& e) {
    EXPECT_EQ(e.variable(), "PT_HPU_LAZY_MODE");
  }
}

TEST(Emulator, VisibleDevicesFilterModulesAsOnARealHost) {
  const auto visible = [](Environment env) { return visibleModuleIds(loadEmulatorSettings(env)); };
  EXPECT_EQ(visible({{"HABANA_VISIBLE_DEVICES", "0,3"}}), (std::vector<int>{0, 3}));
  EXPECT_EQ(visible({{"HABANA_VISIBLE_DEVICES", " 5, 2 "}}), (std::vector<int>{2, 5}));
  EXPECT_EQ(visible({{"HABANA_VISIBLE_DEVICES", "all"}}).size(), 8u);
  EXPECT_EQ(visible({{"HABANA_VISIBLE_MODULES", "3,1"}}), (std::vector<int>{1, 3}));
  EXPECT_EQ(visible({{"HABANA_VISIBLE_MODULES", "all"}, {"HPU_EMULATOR_DEVICES", "2"}}), (std::vector<int>{0, 1}));
  EXPECT_EQ(visible({{"HABANA_VISIBLE_DEVICES", "0,3,5"}, {"HABANA_VISIBLE_MODULES", "5,0"}}),
            (std::vector<int>{0, 5}));
  EXPECT_EQ(visible({{"HABANA_VISIBLE_DEVICES", "0,3"}, {"HABANA_VISIBLE_MODULES", "all"}}),
            (std::vector<int>{0, 3}));
}

TEST(Emulator, MalformedVisibilityListsAreErrorsNamingTheVariable) {
  EXPECT_EQ(errorOf({{"HABANA_VISIBLE_DEVICES", "0,8"}}),
            "HABANA_VISIBLE_DEVICES: device id 8 is out of range: the node has 8 devices (HPU_EMULATOR_DEVICES=8), "
            "ids 0-7");
  EXPECT_EQ(errorOf({{"HABANA_VISIBLE_MODULES", "1,1"}}),
            "HABANA_VISIBLE_MODULES: lists module id 1 twice in '1,1'");
  EXPECT_EQ(errorOf({{"HABANA_VISIBLE_MODULES", "1,x"}}),
            "HABANA_VISIBLE_MODULES: 'x' in '1,x' is not a module id; use 'all' or a comma list such as 0,3");
  EXPECT_EQ(errorOf({{"HABANA_VISIBLE_DEVICES", "-1"}}),
            "HABANA_VISIBLE_DEVICES: device id -1 is out of range: the node has 8 devices "
            "(HPU_EMULATOR_DEVICES=8), ids 0-7");
  EXPECT_EQ(errorOf({{"HABANA_VISIBLE_DEVICES", ""}}),
            "HABANA_VISIBLE_DEVICES: is empty; unset it, or set 'all' or a comma list of device ids such as 0,3");
  EXPECT_EQ(errorOf({{"HABANA_VISIBLE_DEVICES", "0,3"}, {"HABANA_VISIBLE_MODULES", "2"}}),
            "HABANA_VISIBLE_MODULES: module 2 is not visible: HABANA_VISIBLE_DEVICES=0,3 exposes modules 0,3");
  EXPECT_EQ(errorOf({{"HABANA_VISIBLE_MODULES", "3"}, {"HPU_EMULATOR_DEVICES", "2"}}),
            "HABANA_VISIBLE_MODULES: module id 3 is out of range: the node has 2 devices (HPU_EMULATOR_DEVICES=2), "
            "ids 0-1");
}

TEST(Emulator, SettingsMadeInCodeAreValidatedToo) {
  EmulatorSettings s;
  s.devicesPerNode = 0;
  EXPECT_THROW(validate(s), EmulatorConfigError);
  s.devicesPerNode = 2;
  s.memoryLimit = 0;
  EXPECT_THROW(validate(s), EmulatorConfigError);
  s.memoryLimit = 1 << 20;
  s.visibleDevices = "2";
  EXPECT_THROW(validate(s), EmulatorConfigError);
  s.visibleDevices = "1";
  EXPECT_NO_THROW(validate(s));
}

}  // namespace
}  // namespace hpu::device
