#include "metrics/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

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

// A TCP connection to the server, sending `text` (maybe half a request).
int Connect(uint16_t port, const std::string& text) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
  return fd;
}

// Everything the server sends on `fd` until it closes it (a receive timeout
// of 20 s bounds a server that never does).
std::string ReadToEnd(int fd) {
  timeval tv{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) all.append(buf, static_cast<size_t>(n));
  return all;
}

TEST(MetricsHttpServerTest, HalfSentRequestsDoNotHoldUpAScrape) {
  Registry registry;
  MetricsHttpServer server(&registry, Loopback());
  ASSERT_TRUE(server.Start().ok());
  std::vector<int> stalled;
  for (int i = 0; i < 64; ++i) stalled.push_back(Connect(server.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n"));
  // With a pool of two blocking workers and a 5 s read timeout, this scrape
  // waited behind all 64 (over 20 s). It must not wait for any of them; the
  // client's 10 s is only a bound for a broken server.
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(10, 0);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
  EXPECT_EQ(metrics->status, 200);
  for (int fd : stalled) close(fd);
}

TEST(MetricsHttpServerTest, AClientThatNeverFinishesItsRequestIsClosedAtItsDeadline) {
  Registry registry;
  HttpServerOptions o = Loopback();
  o.request_deadline_ms = 300;
  MetricsHttpServer server(&registry, o);
  ASSERT_TRUE(server.Start().ok());
  const int fd = Connect(server.port(), "GET /metr");
  // A byte every 10 ms does not extend the deadline (a read timeout per
  // byte, as cpp-httplib's, would keep it open forever): the server closes
  // the connection while the client still trickles, answering nothing.
  bool closed = false;
  for (int i = 0; i < 800 && !closed; ++i) {  // 8 s at most
    closed = send(fd, "i", 1, MSG_NOSIGNAL) != 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(closed) << "a trickling connection stayed open for 8 s";
  EXPECT_EQ(ReadToEnd(fd), "");
  close(fd);
}

TEST(MetricsHttpServerTest, OnlyGetsOfAtMost4KiBAreServed) {
  Registry registry;
  MetricsHttpServer server(&registry, Loopback());
  ASSERT_TRUE(server.Start().ok());
  int fd = Connect(server.port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(ReadToEnd(fd).rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0), 0u);
  close(fd);
  fd = Connect(server.port(), "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(5000, 'a') + "\r\n\r\n");
  EXPECT_EQ(ReadToEnd(fd).rfind("HTTP/1.1 431 ", 0), 0u);
  close(fd);
  fd = Connect(server.port(), "hello\r\n\r\n");
  EXPECT_EQ(ReadToEnd(fd).rfind("HTTP/1.1 400 ", 0), 0u);
  close(fd);
  fd = Connect(server.port(), "GET /healthz?verbose=1 HTTP/1.0\r\n\r\n");
  const std::string ok = ReadToEnd(fd);
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("\r\n\r\nok\n"), std::string::npos) << ok;
  close(fd);
}

TEST(MetricsHttpServerTest, BeyondItsConnectionsTheOldestMakesRoom) {
  Registry registry;
  HttpServerOptions o = Loopback();
  o.max_connections = 4;
  o.request_deadline_ms = 60'000;  // so that only making room closes the first
  MetricsHttpServer server(&registry, o);
  ASSERT_TRUE(server.Start().ok());
  const int first = Connect(server.port(), "GET /");
  std::vector<int> later;
  for (int i = 0; i < 4; ++i) later.push_back(Connect(server.port(), "GET /"));
  EXPECT_EQ(ReadToEnd(first), "");  // closed to make room, unanswered
  httplib::Client client("127.0.0.1", server.port());
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
  EXPECT_EQ(metrics->status, 200);
  close(first);
  for (int fd : later) close(fd);
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
