#include "config/listen_address.h"

#include <gtest/gtest.h>

namespace gpuslice::config {
namespace {

TEST(ListenAddressTest, ParsesV4V6AndNames) {
  auto a = ParseListenAddress("127.0.0.1:9400");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 9400);
  auto b = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 0);
  auto c = ParseListenAddress("localhost:65535");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->port, 65535);
}

TEST(ListenAddressTest, RejectsMalformedWithAnExample) {
  for (const char* bad : {"", "9400", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:94x",
                          "::1:9400", "[::1]9400", "[::1:9400", "[nothost]:1", "a b:1", ":9400"}) {
    auto r = ParseListenAddress(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("want host:port"), std::string::npos) << bad;
    }
  }
}

TEST(ListenAddressTest, LoopbackIsOnly127AndV6OneAndLocalhost) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("::"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("128.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("localhost.example.com"));
  EXPECT_FALSE(IsLoopbackHost("::ffff:127.0.0.1"));  // v4-mapped: a dual-stack socket, not loopback-only
}

}  // namespace
}  // namespace gpuslice::config
