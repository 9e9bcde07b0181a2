// A real Prometheus (Debian's /usr/bin/prometheus) scrapes gpuslice's
// /metrics every second, and the series are read back through its HTTP API:
// proof that the hand-written text format, label escaping and histograms are
// what Prometheus accepts. About 6 s: the first sample shows in queries
// ~5.5 s after Prometheus starts (build-notes.md), however short the interval.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "metrics/gpuslice_metrics.h"
#include "metrics/http_server.h"

namespace gpuslice::metrics {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

std::string PrometheusBinary() {
  const char* env = std::getenv("GPUSLICE_PROMETHEUS");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/prometheus";
}

// A port free right now on loopback, for Prometheus's own web listener
// (it cannot report a port chosen by the kernel).
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

// Prometheus as a child process, killed when this goes out of scope (also
// when an assertion fails) and by the kernel if the test itself dies.
class PrometheusProcess {
 public:
  PrometheusProcess() {
    char tmpl[] = "/tmp/gpuslice-prom-XXXXXX";
    dir_ = mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~PrometheusProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      if (!WaitExit(std::chrono::seconds(5))) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
      }
    }
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Scrapes every port in `targets`, each one a separate `instance`.
  bool Start(const std::vector<int>& targets, int web_port) {
    if (dir_.empty()) return false;
    std::ofstream config(dir_ + "/prometheus.yml");
    config << "global:\n"
              "  scrape_interval: 1s\n"
              "  evaluation_interval: 1s\n"
              "scrape_configs:\n"
              "  - job_name: gpuslice\n"
              "    static_configs:\n"
              "      - targets:\n";
    for (int port : targets) config << "        - 127.0.0.1:" << port << "\n";
    config.close();
    const std::string binary = PrometheusBinary();
    const std::string args[] = {binary, "--config.file=" + dir_ + "/prometheus.yml",
                                "--storage.tsdb.path=" + dir_ + "/data",
                                "--web.listen-address=127.0.0.1:" + std::to_string(web_port), "--log.level=warn"};
    const std::string log = dir_ + "/prometheus.log";
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      char* argv[] = {const_cast<char*>(args[0].c_str()), const_cast<char*>(args[1].c_str()),
                      const_cast<char*>(args[2].c_str()), const_cast<char*>(args[3].c_str()),
                      const_cast<char*>(args[4].c_str()), nullptr};
      execv(argv[0], argv);
      _exit(127);
    }
    return pid_ > 0;
  }

  // False once the process has exited (it failed to start, or crashed).
  bool Alive() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }

  std::string Log() const {
    std::ifstream in(dir_ + "/prometheus.log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  bool WaitExit(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling an exit, not synchronising
    }
    return false;
  }

  std::string dir_;
  pid_t pid_ = -1;
};

// Runs an instant query; returns Prometheus's whole answer (null when there
// was none).
nlohmann::json Answer(httplib::Client& client, const std::string& promql) {
  auto res = client.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
  if (!res) return nullptr;
  const nlohmann::json body = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  return body.is_discarded() ? nlohmann::json(nullptr) : body;
}

// The `result` array of an instant query (empty on any error).
nlohmann::json Query(httplib::Client& client, const std::string& promql) {
  const nlohmann::json body = Answer(client, promql);
  if (!body.is_object() || body.value("status", "") != "success") return nlohmann::json::array();
  return body["data"]["result"];
}

// The dashboard's queries with Grafana's variables filled in as Grafana
// would: every node, GPU and vGPU, and a rate window.
std::vector<std::pair<std::string, std::string>> DashboardQueries() {
  std::ifstream in(GPUSLICE_SOURCE_DIR "/deploy/grafana/gpuslice-dashboard.json");
  const nlohmann::json dash = nlohmann::json::parse(in, nullptr, false);
  std::vector<std::pair<std::string, std::string>> out;
  if (dash.is_discarded()) return out;
  for (const nlohmann::json& panel : dash["panels"]) {
    for (const nlohmann::json& target : panel["targets"]) {
      std::string expr = target.value("expr", "");
      for (const auto& [var, value] : {std::pair<std::string, std::string>{"$__rate_interval", "1m"},
                                       {"$instance", ".*"},
                                       {"$gpu", ".*"},
                                       {"$vgpu", ".*"}}) {
        for (size_t at; (at = expr.find(var)) != std::string::npos;) expr.replace(at, var.size(), value);
      }
      out.emplace_back(panel.value("title", ""), expr);
    }
  }
  return out;
}

double ValueOf(const nlohmann::json& sample) { return std::stod(sample["value"][1].get<std::string>()); }

TEST(PrometheusScrapeTest, RealPrometheusScrapesAndAnswersQueries) {
  ASSERT_TRUE(fs::exists(PrometheusBinary()))
      << PrometheusBinary() << " not found; install the Debian package prometheus (scripts/install-deps.sh) "
      << "or set GPUSLICE_PROMETHEUS";

  // The exporter: a few gpuslice series, one with every character that must
  // be escaped in its label value, and a histogram.
  Registry registry;
  StatusOr<GpusliceMetrics> m = RegisterGpusliceMetrics(registry);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::string weird = "we\"ird\\name\nx";
  m->vgpu_memory_used_bytes->WithLabels({"0", "train"}).Set(4294967296.0);
  m->vgpu_memory_used_bytes->WithLabels({"1", weird}).Set(7);
  m->vgpu_allocation_denials_total->WithLabels({"train"}).Increment(3);
  m->daemon_up->WithLabels({}).Set(1);
  for (int i = 0; i < 10; ++i) m->vgpu_lc_latency_seconds->WithLabels({"lc"}).Observe(0.0004);
  // The rest, so that every dashboard query has data to evaluate over.
  m->vgpu_memory_limit_bytes->WithLabels({"0", "train"}).Set(8589934592.0);
  m->gpu_memory_total_bytes->WithLabels({"0"}).Set(85899345920.0);
  m->vgpu_compute_share_target_ratio->WithLabels({"0", "train"}).Set(0.5);
  m->vgpu_compute_share_measured_ratio->WithLabels({"0", "train"}).Set(0.48);
  m->vgpu_timeslice_applications_total->WithLabels({"train"}).Increment(4);
  m->vgpu_timeslice_failures_total->WithLabels({"train"}).Increment(0);
  m->daemon_start_time_seconds->WithLabels({}).Set(1.7e9);
  m->daemon_reaped_processes_total->WithLabels({}).Increment(2);
  // GPU time, energy, power caps and health (issue 15): what an operator
  // asks of them below, with values whose answers are exact.
  m->vgpu_gpu_seconds_total->WithLabels({"0", "train"}).Increment(30);
  m->vgpu_gpu_seconds_total->WithLabels({"0", "lc"}).Increment(10);
  m->vgpu_energy_joules_total->WithLabels({"0", "train"}).Increment(6000);
  m->vgpu_energy_joules_total->WithLabels({"0", "lc"}).Increment(2000);
  m->gpu_energy_joules_total->WithLabels({"0"}).Increment(10000);
  m->gpu_idle_energy_joules_total->WithLabels({"0"}).Increment(2000);
  m->vgpu_power_cap_watts->WithLabels({"0", "train"}).Set(200);
  m->vgpu_power_budget_ratio->WithLabels({"0", "train"}).Set(0.75);
  m->gpu_healthy->WithLabels({"0"}).Set(1);
  m->gpu_healthy->WithLabels({"1"}).Set(0);
  m->gpu_xid_errors_total->WithLabels({"1", "79"}).Increment(1);
  int scrapes = 0;
  registry.AddCollector([&] { m->vgpu_processes->WithLabels({"train"}).Set(++scrapes); });
  HttpServerOptions options;
  options.address = "127.0.0.1:0";
  MetricsHttpServer exporter(&registry, options);
  ASSERT_TRUE(exporter.Start().ok());
  // A second node, in effect: the dashboard's queries must keep nodes apart
  // (a join on `gpu` alone is many-to-many with two of them).
  MetricsHttpServer second_node(&registry, options);
  ASSERT_TRUE(second_node.Start().ok());
  const std::string instance = "instance=\"127.0.0.1:" + std::to_string(exporter.port()) + "\"";

  PrometheusProcess prometheus;
  const int web_port = FreeLoopbackPort();
  ASSERT_NE(web_port, 0);
  const auto start = Clock::now();
  ASSERT_TRUE(prometheus.Start({exporter.port(), second_node.port()}, web_port));
  httplib::Client client("127.0.0.1", web_port);
  client.set_connection_timeout(1, 0);
  client.set_read_timeout(2, 0);

  nlohmann::json result = nlohmann::json::array();
  const auto deadline = start + std::chrono::seconds(20);
  while (result.size() != 2 && Clock::now() < deadline) {
    ASSERT_TRUE(prometheus.Alive()) << "prometheus exited:\n" << prometheus.Log();
    result = Query(client, "gpuslice_vgpu_memory_used_bytes{vgpu=\"train\"}");
    if (result.size() != 2) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // poll interval
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_EQ(result.size(), 2u) << "no gpuslice series from both exporters in Prometheus after " << seconds
                               << " s; its log:\n"
                               << prometheus.Log();
  RecordProperty("first_sample_seconds", std::to_string(seconds));
  std::printf("first gpuslice sample queryable %.2f s after prometheus started\n", seconds);
  EXPECT_EQ(ValueOf(result[0]), 4294967296.0);
  EXPECT_EQ(result[0]["metric"]["gpu"], "0");
  EXPECT_EQ(result[0]["metric"]["job"], "gpuslice");
  EXPECT_NE(result[0]["metric"]["instance"], result[1]["metric"]["instance"]);

  // Escaped label value arrives as the original string.
  result = Query(client, "gpuslice_vgpu_memory_used_bytes{gpu=\"1\"," + instance + "}");
  ASSERT_EQ(result.size(), 1u);
  EXPECT_EQ(result[0]["metric"]["vgpu"], weird);
  EXPECT_EQ(ValueOf(result[0]), 7);

  result = Query(client, "gpuslice_vgpu_allocation_denials_total{" + instance + "}");
  ASSERT_EQ(result.size(), 1u);
  EXPECT_EQ(ValueOf(result[0]), 3);

  // Histogram: all ten observations in (0.0003, 0.0005], so the median
  // interpolates to the bucket's middle.
  result = Query(client, "gpuslice_vgpu_lc_latency_seconds_count{vgpu=\"lc\"," + instance + "}");
  ASSERT_EQ(result.size(), 1u);
  EXPECT_EQ(ValueOf(result[0]), 10);
  result =
      Query(client, "histogram_quantile(0.5, gpuslice_vgpu_lc_latency_seconds_bucket{vgpu=\"lc\"," + instance + "})");
  ASSERT_EQ(result.size(), 1u);
  EXPECT_NEAR(ValueOf(result[0]), 0.0004, 1e-9);

  // The collector ran on every scrape.
  result = Query(client, "gpuslice_vgpu_processes{vgpu=\"train\"," + instance + "}");
  ASSERT_EQ(result.size(), 1u);
  EXPECT_GE(ValueOf(result[0]), 1);

  // Each vGPU's share of its GPU's energy, joined per node and GPU: the
  // attributed and the idle energy add up to the GPU's whole.
  result = Query(client, "gpuslice_vgpu_energy_joules_total{" + instance +
                             "} / on(instance, gpu) group_left gpuslice_gpu_energy_joules_total");
  ASSERT_EQ(result.size(), 2u);
  for (const nlohmann::json& r : result) {
    EXPECT_DOUBLE_EQ(ValueOf(r), r["metric"]["vgpu"] == "train" ? 0.6 : 0.2) << r.dump();
  }
  result = Query(client, "sum by (gpu) (gpuslice_vgpu_energy_joules_total{" + instance +
                             "}) + on(gpu) gpuslice_gpu_idle_energy_joules_total{" + instance + "}");
  ASSERT_EQ(result.size(), 1u);
  EXPECT_DOUBLE_EQ(ValueOf(result[0]), 10000);
  result = Query(client, "gpuslice_vgpu_gpu_seconds_total{vgpu=\"lc\"," + instance + "}");
  ASSERT_EQ(result.size(), 1u);
  EXPECT_EQ(ValueOf(result[0]), 10);
  // The power cap in force: the user's cap times the controller's budget.
  result = Query(client, "gpuslice_vgpu_power_cap_watts{" + instance + "} * on(instance, gpu, vgpu) " +
                             "gpuslice_vgpu_power_budget_ratio");
  ASSERT_EQ(result.size(), 1u);
  EXPECT_DOUBLE_EQ(ValueOf(result[0]), 150);
  // An unhealthy GPU, and the XID that made it so.
  result = Query(client, "gpuslice_gpu_healthy{" + instance + "} == 0");
  ASSERT_EQ(result.size(), 1u);
  EXPECT_EQ(result[0]["metric"]["gpu"], "1");
  result = Query(client, "gpuslice_gpu_xid_errors_total{" + instance + "}");
  ASSERT_EQ(result.size(), 1u);
  EXPECT_EQ(result[0]["metric"]["xid"], "79");

  // The scrape itself was healthy (a format error would show here).
  result = Query(client, "up{job=\"gpuslice\"}");
  ASSERT_EQ(result.size(), 2u);
  EXPECT_EQ(ValueOf(result[0]), 1);
  EXPECT_EQ(ValueOf(result[1]), 1);
  auto targets = client.Get("/api/v1/targets");
  ASSERT_TRUE(targets);
  const nlohmann::json t = nlohmann::json::parse(targets->body, nullptr, false);
  ASSERT_FALSE(t.is_discarded());
  ASSERT_EQ(t["data"]["activeTargets"].size(), 2u);
  for (const nlohmann::json& target : t["data"]["activeTargets"]) EXPECT_EQ(target["lastError"], "");

  // Every query of the Grafana dashboard parses and evaluates (a bad
  // vector match, for one, fails only at evaluation).
  const auto queries = DashboardQueries();
  ASSERT_GE(queries.size(), 10u) << "cannot read the dashboard's queries";
  for (const auto& [title, expr] : queries) {
    const nlohmann::json answer = Answer(client, expr);
    ASSERT_TRUE(answer.is_object()) << title << ": no answer to " << expr;
    EXPECT_EQ(answer.value("status", ""), "success") << title << ": " << expr << "\n" << answer.dump();
    if (answer.value("status", "") == "success" && expr.find("gpuslice_gpu_memory_total_bytes") != std::string::npos) {
      // Memory committed per GPU: 8 GiB of limits on an 80 GiB GPU, per node.
      const nlohmann::json& r = answer["data"]["result"];
      ASSERT_EQ(r.size(), 2u) << title << ": " << expr;
      if (expr.find("limit_bytes") != std::string::npos) {
        EXPECT_DOUBLE_EQ(ValueOf(r[0]), 0.1);
      }
    }
  }
}

}  // namespace
}  // namespace gpuslice::metrics
