// docs/metrics.md, the code that registers the metrics, and the Grafana
// dashboard must name the same series: a renamed metric silently empties
// dashboards and alerts, so each direction is checked here.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "metrics/gpuslice_metrics.h"

namespace gpuslice::metrics {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Trim(std::string s) {
  const auto b = s.find_first_not_of(" `");
  const auto e = s.find_last_not_of(" `");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

struct Documented {
  std::string type;
  std::string labels;  // "gpu, vgpu"
};

// The rows of docs/metrics.md's series table: | `name` | type | labels | meaning |
std::map<std::string, Documented> DocumentedMetrics() {
  std::map<std::string, Documented> out;
  std::istringstream in(ReadFile(GPUSLICE_SOURCE_DIR "/docs/metrics.md"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `gpuslice_", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream row(line.substr(1));
    std::string cell;
    while (std::getline(row, cell, '|')) cells.push_back(Trim(cell));
    EXPECT_GE(cells.size(), 4u) << line;
    if (cells.size() >= 3) out[cells[0]] = {cells[1], cells[2]};
  }
  return out;
}

// Every gpuslice_* metric name in a PromQL expression. (Not std::regex: GCC
// 12 reports false maybe-uninitialized errors in it under ASan.)
std::vector<std::string> MetricNames(const std::string& expr) {
  static constexpr char kNameChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:";
  std::vector<std::string> out;
  for (size_t at = expr.find("gpuslice_"); at != std::string::npos; at = expr.find("gpuslice_", at)) {
    const size_t end = std::min(expr.find_first_not_of(kNameChars, at), expr.size());
    out.push_back(expr.substr(at, end - at));
    at = end;
  }
  return out;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

TEST(DocsConsistencyTest, EveryRegisteredMetricIsDocumentedAndEveryDocumentedOneRegistered) {
  const std::map<std::string, Documented> docs = DocumentedMetrics();
  ASSERT_EQ(docs.size(), 32u) << "docs/metrics.md's series table changed shape";
  Registry registry;
  ASSERT_TRUE(RegisterGpusliceMetrics(registry).ok());
  std::set<std::string> registered;
  for (const Registry::FamilyInfo& f : registry.Families()) {
    registered.insert(f.name);
    auto it = docs.find(f.name);
    ASSERT_NE(it, docs.end()) << f.name << " is registered but not in docs/metrics.md";
    EXPECT_EQ(it->second.type, f.type) << f.name;
    EXPECT_EQ(it->second.labels, Join(f.label_names)) << f.name;
  }
  for (const auto& [name, doc] : docs) {
    EXPECT_TRUE(registered.count(name)) << name << " is in docs/metrics.md but not registered";
  }
}

// The bounds docs/metrics.md lists for the LC latency histogram: the numbers
// between "bucket bounds, in seconds, are" and "plus +Inf".
std::vector<double> DocumentedLcLatencyBounds() {
  std::string text = ReadFile(GPUSLICE_SOURCE_DIR "/docs/metrics.md");
  std::replace(text.begin(), text.end(), '\n', ' ');
  const std::string open = "bucket bounds, in seconds, are ";
  const size_t begin = text.find(open);
  const size_t end = text.find("plus +Inf", begin);
  if (begin == std::string::npos || end == std::string::npos) return {};
  std::vector<double> out;
  std::istringstream words(text.substr(begin + open.size(), end - begin - open.size()));
  std::string word;
  while (words >> word) {
    while (!word.empty() && (word.back() == ',' || word.back() == '.')) word.pop_back();
    if (word.empty() || word == "and") continue;
    out.push_back(std::stod(word));
  }
  return out;
}

TEST(DocsConsistencyTest, TheLcLatencyBucketsAreTheDocumentedOnes) {
  EXPECT_EQ(DocumentedLcLatencyBounds(), LcLatencyBuckets())
      << "docs/metrics.md's bucket bounds of gpuslice_vgpu_lc_latency_seconds differ from the code's "
         "(core::kLcLatencyBucketBoundsNs)";
}

TEST(DocsConsistencyTest, DashboardIsValidAndQueriesOnlyDocumentedMetrics) {
  const std::map<std::string, Documented> docs = DocumentedMetrics();
  const nlohmann::json dash =
      nlohmann::json::parse(ReadFile(GPUSLICE_SOURCE_DIR "/deploy/grafana/gpuslice-dashboard.json"), nullptr, false);
  ASSERT_FALSE(dash.is_discarded()) << "deploy/grafana/gpuslice-dashboard.json is not valid JSON";
  EXPECT_EQ(dash.value("uid", ""), "gpuslice-node");
  EXPECT_FALSE(dash.value("title", "").empty());
  ASSERT_TRUE(dash["panels"].is_array());
  ASSERT_FALSE(dash["panels"].empty());

  std::set<std::string> queried;  // base names (histogram suffixes removed)
  std::set<int> ids;
  std::vector<nlohmann::json> boxes;
  for (const nlohmann::json& panel : dash["panels"]) {
    const std::string title = panel.value("title", "");
    EXPECT_FALSE(title.empty());
    EXPECT_TRUE(ids.insert(panel.value("id", -1)).second) << "duplicate panel id in " << title;
    const nlohmann::json& g = panel["gridPos"];
    ASSERT_TRUE(g.is_object()) << title;
    EXPECT_LE(g.value("x", 0) + g.value("w", 0), 24) << title << " is wider than the 24-column grid";
    for (const nlohmann::json& other : boxes) {
      const bool overlap = g["x"] < other["x"].get<int>() + other["w"].get<int>() &&
                           other["x"] < g["x"].get<int>() + g["w"].get<int>() &&
                           g["y"] < other["y"].get<int>() + other["h"].get<int>() &&
                           other["y"] < g["y"].get<int>() + g["h"].get<int>();
      EXPECT_FALSE(overlap) << title << " overlaps another panel";
    }
    boxes.push_back(g);
    ASSERT_TRUE(panel["targets"].is_array() && !panel["targets"].empty()) << title;
    for (const nlohmann::json& target : panel["targets"]) {
      const std::string expr = target.value("expr", "");
      EXPECT_FALSE(expr.empty()) << title;
      for (const std::string& token : MetricNames(expr)) {
        std::string name = token;
        if (!docs.count(name)) {
          for (const char* suffix : {"_bucket", "_sum", "_count"}) {
            const std::string s(suffix);
            if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
              const std::string base = name.substr(0, name.size() - s.size());
              if (docs.count(base) && docs.at(base).type == "histogram") name = base;
            }
          }
        }
        EXPECT_TRUE(docs.count(name)) << title << " queries " << token << ", not in docs/metrics.md";
        queried.insert(name);
      }
    }
  }
  // What the dashboard is for (issue 4).
  for (const char* wanted :
       {"gpuslice_vgpu_memory_used_bytes", "gpuslice_vgpu_memory_limit_bytes", "gpuslice_vgpu_allocation_denials_total",
        "gpuslice_vgpu_compute_share_target_ratio", "gpuslice_vgpu_compute_share_measured_ratio",
        "gpuslice_vgpu_lc_latency_seconds", "gpuslice_vgpu_timeslice_failures_total", "gpuslice_daemon_up"}) {
    EXPECT_TRUE(queried.count(wanted)) << "the dashboard has no panel for " << wanted;
  }
}

}  // namespace
}  // namespace gpuslice::metrics
