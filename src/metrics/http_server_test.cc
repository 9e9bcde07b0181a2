#include "metrics/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

namespace gpuslice::metrics {
namespace {

HttpServerOptions Loopback(std::function<Status()> health = nullptr) {
  HttpServerOptions o;
  o.address = "127.0.0.1:0";
  o.health_check = std::move(health);
  return o;
}

TEST(MetricsHttpServerTest, ServesMetricsAndHealth) {
  Registry registry;
  auto up = registry.AddGauge("gpuslice_daemon_up", "1 while the daemon runs.");
  ASSERT_TRUE(up.ok());
  (*up)->WithLabels({}).Set(1);
  bool healthy = true;
  MetricsHttpServer server(
      &registry, Loopback([&healthy] { return healthy ? Status::Ok() : Status::Error("state dir unreadable"); }));
  ASSERT_TRUE(server.Start().ok());
  ASSERT_NE(server.port(), 0);
  EXPECT_EQ(server.bound_address(), "127.0.0.1:" + std::to_string(server.port()));

  httplib::Client client("127.0.0.1", server.port());
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), kTextFormatContentType);
  EXPECT_NE(metrics->body.find("\ngpuslice_daemon_up 1\n"), std::string::npos) << metrics->body;

  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  healthy = false;
  health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(health->body, "state dir unreadable\n");

  auto missing = client.Get("/other");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST(MetricsHttpServerTest, BusyPortIsNamed) {
  Registry registry;
  MetricsHttpServer first(&registry, Loopback());
  ASSERT_TRUE(first.Start().ok());
  HttpServerOptions o;
  o.address = first.bound_address();
  MetricsHttpServer second(&registry, o);
  const Status s = second.Start();
  EXPECT_EQ(s.message(), "metrics address " + o.address + ": port " + std::to_string(first.port()) +
                             " is already in use (another gpuslice daemon or exporter?); stop it or set "
                             "metrics.address to a free port");
}

TEST(MetricsHttpServerTest, RefusesRemoteUnlessAllowedAndBadAddresses) {
  Registry registry;
  HttpServerOptions o;
  o.address = "0.0.0.0:9400";
  EXPECT_EQ(MetricsHttpServer(&registry, o).Start().message(),
            "metrics address: \"0.0.0.0:9400\" is not a loopback address; set metrics.allow_remote: true to "
            "serve other hosts, or use 127.0.0.1:PORT");
  o.address = "nonsense";
  EXPECT_EQ(MetricsHttpServer(&registry, o).Start().message(),
            "metrics address: \"nonsense\" has no port; want host:port, e.g. 127.0.0.1:9400 or [::1]:9400");
}

TEST(MetricsHttpServerTest, StartStopRepeatedlyNeverHangs) {
  Registry registry;
  for (int i = 0; i < 50; ++i) {
    MetricsHttpServer server(&registry, Loopback());
    ASSERT_TRUE(server.Start().ok());
    EXPECT_FALSE(server.Start().ok());  // already started
    server.Stop();
    server.Stop();  // idempotent
    EXPECT_EQ(server.port(), 0);
  }
}

}  // namespace
}  // namespace gpuslice::metrics
