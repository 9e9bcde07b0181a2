#include "port/gpu_uuid.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

namespace gpuslice::port {
namespace {

constexpr std::array<uint8_t, 16> kBytes = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                                            0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};

TEST(GpuUuidTest, ParsesNvmlsSpellingAndBareHex) {
  for (const char* text : {"GPU-12345678-9abc-def0-0123-456789abcdef", "12345678-9ABC-DEF0-0123-456789ABCDEF",
                           "123456789abcdef00123456789abcdef"}) {
    std::array<uint8_t, 16> out{};
    EXPECT_TRUE(ParseGpuUuid(text, &out)) << text;
    EXPECT_EQ(out, kBytes) << text;
  }
  uint8_t raw[16];
  ASSERT_TRUE(ParseGpuUuid("GPU-12345678-9abc-def0-0123-456789abcdef", raw));
  EXPECT_EQ(std::to_array(raw), kBytes);
}

TEST(GpuUuidTest, RefusesAnythingButExactly32HexDigits) {
  std::array<uint8_t, 16> out{};
  EXPECT_FALSE(ParseGpuUuid("", &out));
  EXPECT_FALSE(ParseGpuUuid("GPU-", &out));
  EXPECT_FALSE(ParseGpuUuid("GPU-12345678-9abc-def0-0123-456789abcde", &out));    // 31 digits
  EXPECT_FALSE(ParseGpuUuid("GPU-12345678-9abc-def0-0123-456789abcdef0", &out));  // 33 digits
  EXPECT_FALSE(ParseGpuUuid("GPU-12345678-9abc-def0-0123-456789abcdeg", &out));   // not hex
  EXPECT_FALSE(ParseGpuUuid("MIG-12345678-9abc-def0-0123-456789abcdef", &out));   // not a GPU's
}

}  // namespace
}  // namespace gpuslice::port
