#include "core/byte_size.h"

#include <gtest/gtest.h>

namespace gpuslice::core {
namespace {

TEST(ByteSizeTest, ParsesUnits) {
  EXPECT_EQ(ParseByteSize("4GiB").value(), 4ull << 30);
  EXPECT_EQ(ParseByteSize("4gib").value(), 4ull << 30);
  EXPECT_EQ(ParseByteSize("4G").value(), 4ull << 30);
  EXPECT_EQ(ParseByteSize("4Gi").value(), 4ull << 30);
  EXPECT_EQ(ParseByteSize("512MiB").value(), 512ull << 20);
  EXPECT_EQ(ParseByteSize("1.5GiB").value(), 3ull << 29);
  EXPECT_EQ(ParseByteSize("2GB").value(), 2000000000ull);
  EXPECT_EQ(ParseByteSize("1024").value(), 1024ull);
  EXPECT_EQ(ParseByteSize("7B").value(), 7ull);
}

TEST(ByteSizeTest, RejectsWithAReasonAndAnExample) {
  for (const char* bad : {"", "GiB", "4XB", "-4GiB", "4 GiB", "0", "1.3B", "99999999TiB", "4GiB5", "1..2G"}) {
    auto r = ParseByteSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("for example 4GiB"), std::string::npos) << r.status().message();
  }
}

TEST(ByteSizeTest, Formats) {
  EXPECT_EQ(FormatByteSize(4ull << 30), "4 GiB");
  EXPECT_EQ(FormatByteSize(3ull << 29), "1.50 GiB");
  EXPECT_EQ(FormatByteSize(100), "100 B");
}

}  // namespace
}  // namespace gpuslice::core
