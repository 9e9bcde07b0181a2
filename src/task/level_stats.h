// level_stats.h — one level's task metrics: counts since the start, the
// recent latencies (for p50/p99), and whether the level is under SLO
// pressure.
//
// Pressure compares the recent p99 of latency / SLO (each task against its
// own SLO) with two thresholds: on at kPressureOn, off again below
// kPressureOff. Why a gap: a level hovering at the threshold would otherwise
// flip the hold of lower levels on and off at every task. Why 80%: the hold
// and the hint need a few milliseconds to drain other work, so they must
// begin before the SLO is missed, not after.
//
// Not thread-safe: the scheduler guards each LevelStats with its lock.
// Record() allocates nothing once the window is full.
#ifndef GPUSLICE_TASK_LEVEL_STATS_H_
#define GPUSLICE_TASK_LEVEL_STATS_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace gpuslice::task {

inline constexpr size_t kLatencyWindow = 1024;     // tasks behind p50/p99
inline constexpr size_t kPressureMinSamples = 20;  // fewer: no pressure yet
inline constexpr double kPressureOn = 0.8;
inline constexpr double kPressureOff = 0.6;

class LevelStats {
 public:
  // One finished task: its latency, its SLO (0: none), whether it returned.
  // Returns whether it missed its SLO (without one, never).
  bool Record(uint64_t latency_ns, uint64_t slo_ns, bool ok);

  uint64_t count() const { return count_; }
  uint64_t failed() const { return failed_; }
  uint64_t slo_misses() const { return slo_misses_; }
  bool pressure() const { return pressure_; }

  // The q-quantile (nearest rank) of the window's latencies; nullopt if empty.
  std::optional<uint64_t> LatencyQuantileNs(double q) const;

 private:
  uint64_t count_ = 0, failed_ = 0, slo_misses_ = 0;
  std::vector<uint64_t> latencies_;  // a ring of kLatencyWindow
  std::vector<double> slo_ratios_;   // a ring, of tasks with an SLO only
  size_t next_latency_ = 0, next_ratio_ = 0;
  bool pressure_ = false;
};

// The q-quantile by nearest rank of `values` (reordered); `values` non-empty.
template <typename T>
T NearestRank(std::vector<T>& values, double q);

}  // namespace gpuslice::task

#endif  // GPUSLICE_TASK_LEVEL_STATS_H_
