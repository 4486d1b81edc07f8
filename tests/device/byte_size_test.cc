#include "hpu/device/byte_size.h"

#include <gtest/gtest.h>

namespace hpu::device {
namespace {

TEST(ByteSize, ParsesBinaryAndDecimalUnits) {
  EXPECT_EQ(parseByteSize("256MiB"), 256ull << 20);
  EXPECT_EQ(parseByteSize("256 mib"), 256ull << 20);
  EXPECT_EQ(parseByteSize("1GB"), 1000000000ull);
  EXPECT_EQ(parseByteSize("2KB"), 2000ull);
  EXPECT_EQ(parseByteSize("3KiB"), 3072ull);
  EXPECT_EQ(parseByteSize("96GiB"), 96ull << 30);
  EXPECT_EQ(parseByteSize("1TiB"), 1ull << 40);
  EXPECT_EQ(parseByteSize("4096"), 4096ull);
  EXPECT_EQ(parseByteSize(" 12 B "), 12ull);
}

TEST(ByteSize, RejectsEverythingElse) {
  for (const char* bad : {"", "MiB", "0", "0MiB", "-1", "1.5GiB", "12XB", "256 MiB extra", "GiB256",
                          "99999999999999999999", "20000000TiB"})
    EXPECT_FALSE(parseByteSize(bad).has_value()) << bad;
}

TEST(ByteSize, FormatsExactMultiplesWithoutDecimals) {
  EXPECT_EQ(formatByteSize(0), "0 B");
  EXPECT_EQ(formatByteSize(1023), "1023 B");
  EXPECT_EQ(formatByteSize(1024), "1 KiB");
  EXPECT_EQ(formatByteSize(256ull << 20), "256 MiB");
  EXPECT_EQ(formatByteSize(96ull << 30), "96 GiB");
  EXPECT_EQ(formatByteSize((95ull << 30) + (716ull << 20)), "95.70 GiB");
  EXPECT_EQ(formatByteSize(1536), "1.50 KiB");
  EXPECT_EQ(formatByteSize(3ull << 50), "3072 TiB");
}

}  // namespace
}  // namespace hpu::device
