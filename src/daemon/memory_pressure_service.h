// memory_pressure_service.h — the daemon's side of memory overcommit: every
// pass, it reads every vGPU, asks the policy (node/memory_pressure.h) what to
// suspend, resume or refuse, and does it.
//
// A process whose allocation finds its GPU full waits for this
// (core/memory_wait.h). Passes run every `interval` on the service's own
// thread, since a suspend blocks for seconds (0.46 s per GiB on an H100,
// docs/benchmarks.md) and must not stall the housekeeping thread's reaping
// and sampling. NVML (the GPUs' free memory) is asked only when some
// request waits or some vGPU the policy suspended may be resumed.
//
// Thread-safe: Pass may be called from any one thread at a time (the
// service's own, or a test's with `start_thread` false).
#ifndef GPUSLICE_DAEMON_MEMORY_PRESSURE_SERVICE_H_
#define GPUSLICE_DAEMON_MEMORY_PRESSURE_SERVICE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "node/memory_pressure.h"
#include "node/vgpu_manager.h"
#include "port/mutex.h"

namespace gpuslice::daemon {

class MemoryPressureService {
 public:
  // Free memory by GPU UUID ("GPU-..."); a GPU it cannot tell is left out.
  using FreeMemory = std::function<std::map<std::string, uint64_t>()>;

  MemoryPressureService(node::VgpuManager* manager, FreeMemory free_memory, node::MemoryPressureOptions options,
                        std::chrono::milliseconds interval, bool start_thread = true);
  ~MemoryPressureService();  // stops and joins the thread

  // One pass; returns what it did (for tests and logs).
  node::MemoryPressurePolicy::Decision Pass();

 private:
  void Loop();

  node::VgpuManager* const manager_;
  const FreeMemory free_memory_;
  const std::chrono::milliseconds interval_;
  // Even with no request, the views are read this often, so a vGPU an
  // earlier daemon suspended for memory is found and resumed.
  static constexpr std::chrono::seconds kFullPassInterval{1};
  node::MemoryPressurePolicy policy_;  // the pass's only
  node::MemoryPressurePolicy::Clock::time_point next_full_pass_{};
  port::Mutex mu_;
  port::CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_MEMORY_PRESSURE_SERVICE_H_
