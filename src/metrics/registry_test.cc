#include "metrics/registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace gpuslice::metrics {
namespace {

TEST(RegistryTest, RendersHelpTypeAndLabelledSeries) {
  Registry r;
  auto used = r.AddGauge("gpuslice_vgpu_memory_used_bytes", "Device memory in use.", {"gpu", "vgpu"});
  ASSERT_TRUE(used.ok()) << used.status().message();
  auto up = r.AddGauge("gpuslice_daemon_up", "1 while the daemon runs.");
  ASSERT_TRUE(up.ok());
  (*used)->WithLabels({"0", "train"}).Set(4294967296);
  (*used)->WithLabels({"0", "a\"b\\c\nd"}).Set(1.5);
  (*up)->WithLabels({}).Set(1);
  EXPECT_EQ(r.Render(),
            "# HELP gpuslice_vgpu_memory_used_bytes Device memory in use.\n"
            "# TYPE gpuslice_vgpu_memory_used_bytes gauge\n"
            "gpuslice_vgpu_memory_used_bytes{gpu=\"0\",vgpu=\"a\\\"b\\\\c\\nd\"} 1.5\n"
            "gpuslice_vgpu_memory_used_bytes{gpu=\"0\",vgpu=\"train\"} 4294967296\n"
            "# HELP gpuslice_daemon_up 1 while the daemon runs.\n"
            "# TYPE gpuslice_daemon_up gauge\n"
            "gpuslice_daemon_up 1\n");
}

TEST(RegistryTest, CountersOnlyGoUpAndMirrorWithSet) {
  Registry r;
  auto c = r.AddCounter("gpuslice_vgpu_allocation_denials_total", "Denied.", {"vgpu"});
  ASSERT_TRUE(c.ok());
  Counter& x = (*c)->WithLabels({"x"});
  x.Increment();
  x.Increment(2);
  x.Increment(-5);  // ignored
  EXPECT_EQ(x.Value(), 3);
  x.Set(10);
  EXPECT_EQ(x.Value(), 10);
  EXPECT_NE(r.Render().find("# TYPE gpuslice_vgpu_allocation_denials_total counter\n"
                            "gpuslice_vgpu_allocation_denials_total{vgpu=\"x\"} 10\n"),
            std::string::npos);
}

TEST(RegistryTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  Registry r;
  auto h = r.AddHistogram("gpuslice_vgpu_lc_latency_seconds", "LC latency.", {"vgpu"}, {0.001, 0.01, 0.1});
  ASSERT_TRUE(h.ok()) << h.status().message();
  Histogram& s = (*h)->WithLabels({"lc"});
  for (double v : {0.0005, 0.001, 0.005, 0.05, 0.5}) s.Observe(v);
  EXPECT_EQ(r.Render(),
            "# HELP gpuslice_vgpu_lc_latency_seconds LC latency.\n"
            "# TYPE gpuslice_vgpu_lc_latency_seconds histogram\n"
            "gpuslice_vgpu_lc_latency_seconds_bucket{vgpu=\"lc\",le=\"0.001\"} 2\n"
            "gpuslice_vgpu_lc_latency_seconds_bucket{vgpu=\"lc\",le=\"0.01\"} 3\n"
            "gpuslice_vgpu_lc_latency_seconds_bucket{vgpu=\"lc\",le=\"0.1\"} 4\n"
            "gpuslice_vgpu_lc_latency_seconds_bucket{vgpu=\"lc\",le=\"+Inf\"} 5\n"
            "gpuslice_vgpu_lc_latency_seconds_sum{vgpu=\"lc\"} 0.5565\n"
            "gpuslice_vgpu_lc_latency_seconds_count{vgpu=\"lc\"} 5\n");
  // Mirroring from shared state: per-bucket counts, one per bound plus +Inf.
  EXPECT_FALSE(s.Set({1, 2}, 1.0));
  EXPECT_TRUE(s.Set({1, 0, 0, 3}, 7.5));
  Histogram::Snapshot snap = s.Take();
  EXPECT_EQ(snap.cumulative, (std::vector<uint64_t>{1, 1, 1, 4}));
  EXPECT_EQ(snap.sum, 7.5);
  s.Observe(std::nan(""));  // NaN counts in +Inf, not in the first bucket
  EXPECT_EQ(s.Take().cumulative, (std::vector<uint64_t>{1, 1, 1, 5}));
}

TEST(RegistryTest, RejectsBadNamesDuplicatesAndBuckets) {
  Registry r;
  EXPECT_EQ(r.AddGauge("bad-name", "h").status().message(),
            "metric name \"bad-name\" is not valid; use [a-zA-Z_:][a-zA-Z0-9_:]*");
  EXPECT_EQ(r.AddGauge("g", "h", {"__x"}).status().message(),
            "g: label name \"__x\" is not valid; use [a-zA-Z_][a-zA-Z0-9_]*, not starting with __");
  EXPECT_FALSE(r.AddGauge("g", "h", {"a", "a"}).ok());
  EXPECT_EQ(r.AddCounter("events", "h").status().message(),
            "counter \"events\" must end in _total (Prometheus naming)");
  ASSERT_TRUE(r.AddGauge("g", "h").ok());
  EXPECT_EQ(r.AddGauge("g", "h").status().message(), "metric \"g\" is already registered");
  ASSERT_TRUE(r.AddHistogram("lat_seconds", "h", {}, {1, 2}).ok());
  EXPECT_FALSE(r.AddGauge("lat_seconds_count", "h").ok());  // collides with the histogram's series
  EXPECT_FALSE(r.AddHistogram("h1", "h", {"le"}, {1}).ok());
  EXPECT_FALSE(r.AddHistogram("h2", "h", {}, {}).ok());
  EXPECT_FALSE(r.AddHistogram("h3", "h", {}, {2, 1}).ok());
  EXPECT_FALSE(r.AddHistogram("h4", "h", {}, {1, std::numeric_limits<double>::infinity()}).ok());
}

TEST(RegistryTest, CollectorsRunBeforeEachRenderAndClearDropsGoneSeries) {
  Registry r;
  auto procs = r.AddGauge("gpuslice_vgpu_processes", "Processes.", {"vgpu"});
  ASSERT_TRUE(procs.ok());
  std::vector<std::pair<std::string, int>> state = {{"a", 2}, {"b", 1}};
  int runs = 0;
  r.AddCollector([&] {
    ++runs;
    (*procs)->Clear();
    for (const auto& [name, n] : state) (*procs)->WithLabels({name}).Set(n);
  });
  EXPECT_NE(r.Render().find("gpuslice_vgpu_processes{vgpu=\"b\"} 1\n"), std::string::npos);
  state = {{"a", 3}};  // vGPU b was deleted
  const std::string second = r.Render();
  EXPECT_EQ(runs, 2);
  EXPECT_NE(second.find("gpuslice_vgpu_processes{vgpu=\"a\"} 3\n"), std::string::npos);
  EXPECT_EQ(second.find("vgpu=\"b\""), std::string::npos);
}

TEST(RegistryTest, ConcurrentUpdatesAndScrapesLoseNothing) {
  Registry r;
  auto c = r.AddCounter("gpuslice_daemon_reaped_processes_total", "Reaped.");
  auto h = r.AddHistogram("x_seconds", "h", {"vgpu"}, {1});
  ASSERT_TRUE(c.ok() && h.ok());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        (*c)->WithLabels({}).Increment();
        (*h)->WithLabels({std::to_string(t % 2)}).Observe(0.5);
      }
    });
  }
  std::thread scraper([&] {
    for (int i = 0; i < 200; ++i) EXPECT_FALSE(r.Render().empty());
  });
  for (auto& t : threads) t.join();
  scraper.join();
  EXPECT_EQ((*c)->WithLabels({}).Value(), kThreads * kPerThread);
  EXPECT_EQ((*h)->WithLabels({"0"}).Take().cumulative.back() + (*h)->WithLabels({"1"}).Take().cumulative.back(),
            uint64_t{kThreads * kPerThread});
}

TEST(RegistryDeathTest, WrongLabelCountIsAProgrammingError) {
  Registry r;
  auto g = r.AddGauge("g", "h", {"gpu", "vgpu"});
  ASSERT_TRUE(g.ok());
  EXPECT_DEATH((*g)->WithLabels({"0"}), "g takes 2 label values, given 1");
}

}  // namespace
}  // namespace gpuslice::metrics
