#include "task/level_stats.h"

#include <algorithm>
#include <cmath>

namespace gpuslice::task {

namespace {
template <typename T>
void Push(std::vector<T>& ring, size_t& next, T value) {
  if (ring.size() < kLatencyWindow) {
    ring.push_back(value);
  } else {
    ring[next] = value;
  }
  next = (next + 1) % kLatencyWindow;
}
}  // namespace

template <typename T>
T NearestRank(std::vector<T>& values, double q) {
  q = std::clamp(q, 0.0, 1.0);
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  rank = std::clamp<size_t>(rank, 1, values.size());
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(rank - 1), values.end());
  return values[rank - 1];
}
template uint64_t NearestRank(std::vector<uint64_t>&, double);
template double NearestRank(std::vector<double>&, double);

bool LevelStats::Record(uint64_t latency_ns, uint64_t slo_ns, bool ok) {
  ++count_;
  if (!ok) ++failed_;
  Push(latencies_, next_latency_, latency_ns);
  if (slo_ns == 0) return false;
  const bool missed = latency_ns > slo_ns;
  if (missed) ++slo_misses_;
  Push(slo_ratios_, next_ratio_, static_cast<double>(latency_ns) / static_cast<double>(slo_ns));
  if (slo_ratios_.size() < kPressureMinSamples) return missed;
  std::vector<double> ratios = slo_ratios_;
  const double p99 = NearestRank(ratios, 0.99);
  if (p99 >= kPressureOn) {
    pressure_ = true;
  } else if (p99 < kPressureOff) {
    pressure_ = false;
  }
  return missed;
}

std::optional<uint64_t> LevelStats::LatencyQuantileNs(double q) const {
  if (latencies_.empty()) return std::nullopt;
  std::vector<uint64_t> copy = latencies_;
  return NearestRank(copy, q);
}

}  // namespace gpuslice::task
