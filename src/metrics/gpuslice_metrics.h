// gpuslice_metrics.h — every metric gpuslice exports, registered in one
// place so that names, labels, types and buckets match docs/metrics.md
// (tests/metrics/docs_consistency_test.cc checks both ways).
//
// The daemon calls RegisterGpusliceMetrics once at start-up, on its main
// thread, then sets values from its collector (collect on scrape, see
// registry.h) or wherever events happen. The returned pointers live as long
// as the registry. Allocates; does not block.
#ifndef GPUSLICE_METRICS_GPUSLICE_METRICS_H_
#define GPUSLICE_METRICS_GPUSLICE_METRICS_H_

#include <vector>

#include "core/status.h"
#include "metrics/registry.h"

namespace gpuslice::metrics {

// Label conventions: `gpu` is the GPU's index as nvidia-smi numbers it ("0"),
// the same value as DCGM exporter's `gpu` label so dashboards can join them;
// `vgpu` is the vGPU's name.
struct GpusliceMetrics {
  // Per vGPU and GPU.                                          labels
  Family<Gauge>* vgpu_memory_used_bytes;             // gpu, vgpu
  Family<Gauge>* vgpu_memory_limit_bytes;            // gpu, vgpu
  Family<Gauge>* vgpu_compute_share_target_ratio;    // gpu, vgpu
  Family<Gauge>* vgpu_compute_share_measured_ratio;  // gpu, vgpu
  // Per vGPU.
  Family<Counter>* vgpu_allocation_denials_total;      // vgpu
  Family<Histogram>* vgpu_lc_latency_seconds;          // vgpu
  Family<Histogram>* vgpu_task_latency_seconds;        // vgpu, level
  Family<Counter>* vgpu_tasks_total;                   // vgpu, level
  Family<Counter>* vgpu_task_failures_total;           // vgpu, level
  Family<Counter>* vgpu_task_slo_misses_total;         // vgpu, level
  Family<Counter>* vgpu_timeslice_applications_total;  // vgpu
  Family<Counter>* vgpu_timeslice_failures_total;      // vgpu
  Family<Counter>* vgpu_hold_budget_spent_total;       // vgpu
  Family<Gauge>* vgpu_processes;                       // vgpu
  Family<Counter>* vgpu_violations_total;              // vgpu, kind
  Family<Counter>* vgpu_gpu_seconds_total;             // gpu, vgpu
  Family<Counter>* vgpu_energy_joules_total;           // gpu, vgpu
  Family<Gauge>* vgpu_suspended;                         // vgpu
  Family<Counter>* vgpu_suspended_seconds_total;         // vgpu
  Family<Counter>* vgpu_suspend_bytes_moved_total;       // vgpu
  Family<Gauge>* vgpu_last_suspend_duration_seconds;     // vgpu
  Family<Gauge>* vgpu_last_resume_duration_seconds;      // vgpu
  Family<Gauge>* vgpu_power_cap_watts;                 // gpu, vgpu
  Family<Gauge>* vgpu_power_budget_ratio;              // gpu, vgpu
  // Per GPU.
  Family<Gauge>* gpu_memory_total_bytes;          // gpu
  Family<Counter>* gpu_energy_joules_total;       // gpu
  Family<Counter>* gpu_idle_energy_joules_total;  // gpu
  Family<Gauge>* gpu_healthy;                     // gpu
  Family<Counter>* gpu_xid_errors_total;          // gpu, xid
  // The daemon.
  Family<Gauge>* daemon_up;                        // (none)
  Family<Gauge>* daemon_start_time_seconds;        // (none)
  Family<Counter>* daemon_reaped_processes_total;  // (none)
};

// Bucket bounds of gpuslice_vgpu_lc_latency_seconds (and of
// gpuslice_vgpu_task_latency_seconds), in seconds: the
// ledger's own (core::kLcLatencyBucketBoundsNs, 25 µs to 1 s, where the
// choice is explained), so that the daemon mirrors each vGPU's histogram
// exactly.
const std::vector<double>& LcLatencyBuckets();

// Registers every family above. Fails only if `registry` already holds one
// of these names.
StatusOr<GpusliceMetrics> RegisterGpusliceMetrics(Registry& registry);

}  // namespace gpuslice::metrics

#endif  // GPUSLICE_METRICS_GPUSLICE_METRICS_H_
