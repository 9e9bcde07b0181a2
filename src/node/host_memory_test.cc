#include "node/host_memory.h"

#include <gtest/gtest.h>

namespace gpuslice::node {
namespace {

TEST(HostMemoryTest, ParsesMemAvailableInBytes) {
  EXPECT_EQ(ParseMemAvailable("MemTotal:       16384 kB\nMemFree:  100 kB\nMemAvailable:    2048 kB\n"),
            std::optional<uint64_t>(2048u * 1024));
  EXPECT_EQ(ParseMemAvailable("MemTotal: 1 kB\n"), std::nullopt);
  EXPECT_EQ(ReadMemAvailable("/nonexistent/meminfo"), std::nullopt);
}

}  // namespace
}  // namespace gpuslice::node
