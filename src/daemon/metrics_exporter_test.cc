#include "daemon/metrics_exporter.h"

#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/lc_latency.h"
#include "metrics/text_format.h"

namespace gpuslice::daemon {
namespace {

constexpr uint64_t kUs = 1000;

// The lines of `text` that belong to one vGPU's series of `family`.
std::vector<std::string> SeriesLines(const std::string& text, const std::string& family, const std::string& vgpu) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(family + "_", 0) == 0 && line.find("{vgpu=\"" + vgpu + "\"") != std::string::npos) {
      out.push_back(line);
    }
  }
  return out;
}

node::VgpuView View(const std::string& name, core::Priority priority) {
  node::VgpuView v;
  v.name = name;
  v.priority = priority;
  return v;
}

TEST(MetricsExporterTest, TheLedgersLcLatencyBecomesAPrometheusHistogram) {
  metrics::Registry registry;
  auto m = metrics::RegisterGpusliceMetrics(registry);
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto ledger = std::make_unique<core::Ledger>();
  for (int i = 0; i < 990; ++i) core::RecordLcLatency(ledger.get(), 80 * kUs);
  for (int i = 0; i < 10; ++i) core::RecordLcLatency(ledger.get(), 6000 * kUs);
  node::VgpuView lat = View("lat", core::Priority::kLatencyCritical);
  lat.lc_latency.lifetime = core::TakeLcLatencySnapshot(*ledger);
  // A BE vGPU that recorded once (it was LC before a resize) keeps its series.
  node::VgpuView was_lc = View("was-lc", core::Priority::kBestEffort);
  was_lc.lc_latency.lifetime.buckets[0] = was_lc.lc_latency.lifetime.count = 1;
  const std::vector<node::VgpuView> views = {lat, View("idle-lc", core::Priority::kLatencyCritical),
                                       View("quiet", core::Priority::kBestEffort), was_lc};
  FillVgpuMetrics(*m, node::NodeDevices{}, views);
  const std::string text = registry.Render();
  const std::string family = "gpuslice_vgpu_lc_latency_seconds";

  // Cumulative, one line per bound as the text format writes numbers, then
  // +Inf, _sum and _count.
  std::vector<std::string> expected;
  const auto bucket = [&](const std::string& le, int n) {
    expected.push_back(family + "_bucket{vgpu=\"lat\",le=\"" + le + "\"} " + std::to_string(n));
  };
  for (uint32_t i = 0; i + 1 < core::kLcLatencyBuckets; ++i) {
    const uint64_t bound = core::kLcLatencyBucketBoundsNs[i];
    int below = 0;  // requests of at most `bound`
    if (bound >= 80 * kUs) below += 990;
    if (bound >= 6000 * kUs) below += 10;
    bucket(metrics::FormatValue(core::LcLatencyBucketBoundSeconds(i)), below);
  }
  bucket("+Inf", 1000);
  expected.push_back(family + "_sum{vgpu=\"lat\"} 0.1392");
  expected.push_back(family + "_count{vgpu=\"lat\"} 1000");
  EXPECT_EQ(SeriesLines(text, family, "lat"), expected) << text;

  // An LC vGPU with no request yet: zeros, so dashboards show it exists.
  const std::vector<std::string> idle = SeriesLines(text, family, "idle-lc");
  ASSERT_EQ(idle.size(), core::kLcLatencyBuckets + 2) << text;
  EXPECT_EQ(idle.back(), family + "_count{vgpu=\"idle-lc\"} 0");
  EXPECT_TRUE(SeriesLines(text, family, "quiet").empty()) << text;
  ASSERT_EQ(SeriesLines(text, family, "was-lc").size(), core::kLcLatencyBuckets + 2) << text;
  EXPECT_EQ(SeriesLines(text, family, "was-lc").back(), family + "_count{vgpu=\"was-lc\"} 1");

  // A vGPU gone is a series gone.
  FillVgpuMetrics(*m, node::NodeDevices{}, {views[1]});
  const std::string after = registry.Render();
  EXPECT_TRUE(SeriesLines(after, family, "lat").empty()) << after;
  EXPECT_FALSE(SeriesLines(after, family, "idle-lc").empty()) << after;
}

}  // namespace
}  // namespace gpuslice::daemon
