// gpu_usage_meter.h — measured GPU time and energy per vGPU, accumulated over
// every measurement interval since the daemon started: nothing is sampled
// and dropped.
//
// GPU time: each interval brings, per vGPU, the GPU-seconds its processes
// ran in it. The sampler (utilization_sampler.h) integrates every NVML
// per-process utilisation sample of the interval over the time it covers,
// not only the newest (docs/design.md, "GPU time and energy", says how exact
// that is).
//
// Energy: each interval's device energy (the change of NVML's cumulative
// counter, or where there is none, power times time) is split in two:
//   - idle: the GPU's idle power times the part of the interval in which
//     nothing ran, its own line. The idle power is the lowest power of an
//     interval in which nothing ran, learnt as the daemon goes. Until one is
//     seen (a standalone `gpuslice run` opens NVML only once its job runs;
//     a daemon may start on a busy GPU), it is the intercept at no GPU time
//     of a straight line fitted to the last minute's power against busy
//     fraction, where those fractions spread by at least kFitSpread; else the
//     lowest power of any interval, an upper bound;
//   - the rest, split between the vGPUs by their GPU time in the interval
//     (processes of no vGPU under the name ""). A vGPU that keeps the GPU
//     busy pays for all of it, static power included: nobody else could
//     have used it.
// So the vGPUs' energy plus the idle energy is exactly the device's.
//
// Recent: the same figures over the last few seconds (top's MEASURED and
// WATTS, the power-cap controller), from the intervals of the last minute.
//
// Thread-safe: one writer (the housekeeping thread, Add) and readers (the
// metrics collector, Totals; gRPC handlers and the power-cap controller,
// Recent) under one mutex. Allocates.
#ifndef GPUSLICE_DAEMON_GPU_USAGE_METER_H_
#define GPUSLICE_DAEMON_GPU_USAGE_METER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "port/mutex.h"

namespace gpuslice::daemon {

class GpuUsageMeter {
 public:
  struct Interval {
    uint32_t gpu_index = 0;
    uint64_t start_us = 0;  // the interval, on NVML's clock (CPU time, µs)
    uint64_t end_us = 0;
    std::map<std::string, double> gpu_seconds;  // per vGPU ("" = processes of no vGPU)
    // The device's cumulative energy counter at end_us, mJ (NVML's
    // nvmlDeviceGetTotalEnergyConsumption), or else its power, mW.
    std::optional<uint64_t> energy_mj;
    std::optional<uint32_t> power_mw;
  };
  void Add(const Interval& interval);

  struct Totals {
    std::map<std::pair<uint32_t, std::string>, double> gpu_seconds;  // (GPU, vGPU)
    std::map<std::pair<uint32_t, std::string>, double> joules;
    std::map<uint32_t, double> idle_joules;    // per GPU
    std::map<uint32_t, double> device_joules;  // per GPU: idle + every vGPU's
    std::map<uint32_t, double> idle_watts;     // the idle power in use, per GPU
    std::map<uint32_t, double> seconds;         // per GPU: the time measured
    std::map<uint32_t, double> energy_seconds;  // per GPU: the part of it with a known energy
  };
  Totals totals() const;

  // The intervals that ended within `window_us` of each GPU's newest one.
  struct Window {
    std::map<uint32_t, double> seconds;  // per GPU: the time they cover
    std::map<std::pair<uint32_t, std::string>, double> gpu_seconds;  // (GPU, vGPU)
    std::map<std::pair<uint32_t, std::string>, double> joules;       // (GPU, vGPU), where energy was known
  };
  Window Recent(uint64_t window_us) const;

 private:
  struct Record {
    uint32_t gpu_index;
    uint64_t end_us;
    double seconds;
    std::map<std::string, double> gpu_seconds;
    std::map<std::string, double> joules;
  };
  // Longest window Recent can answer: older records are dropped.
  static constexpr uint64_t kHistoryUs = 60'000'000;
  // The busy fractions an idle-power fit needs: a line through points
  // bunched at one fraction says nothing of its intercept.
  static constexpr double kFitSpread = 0.2;
  static constexpr size_t kFitPoints = 60;  // a minute of passes
  struct Gpu {
    std::optional<uint64_t> last_energy_mj;
    std::optional<double> idle_watts;    // lowest power of an interval with nothing running
    std::optional<double> lowest_watts;  // lowest power of any interval
    std::deque<std::pair<double, double>> fit_points;  // (busy fraction, watts), oldest first
  };
  // The idle power to use now (see the top of this file).
  static double IdleWatts(const Gpu& g);
  mutable port::Mutex mu_;
  std::map<uint32_t, Gpu> gpus_ GUARDED_BY(mu_);
  Totals totals_ GUARDED_BY(mu_);
  std::deque<Record> recent_ GUARDED_BY(mu_);  // oldest first
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_GPU_USAGE_METER_H_
