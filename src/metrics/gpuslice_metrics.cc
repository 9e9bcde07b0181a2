#include "metrics/gpuslice_metrics.h"

#include "core/vgpu_layout.h"

namespace gpuslice::metrics {
namespace {

template <typename T>
Status Take(StatusOr<Family<T>*> family, Family<T>** out) {
  if (!family.ok()) return family.status();
  *out = *family;
  return Status::Ok();
}

}  // namespace

const std::vector<double>& LcLatencyBuckets() {
  static const std::vector<double> kBuckets = [] {
    std::vector<double> bounds;
    for (uint64_t ns : core::kLcLatencyBucketBoundsNs) bounds.push_back(static_cast<double>(ns) / 1e9);
    return bounds;
  }();
  return kBuckets;
}

StatusOr<GpusliceMetrics> RegisterGpusliceMetrics(Registry& r) {
  GpusliceMetrics m{};
  const std::vector<std::string> gv = {"gpu", "vgpu"};
  const std::vector<std::string> v = {"vgpu"};
  const Status statuses[] = {
      Take(r.AddGauge("gpuslice_vgpu_memory_used_bytes",
                      "Device memory held by the vGPU's processes on this GPU, in bytes.", gv),
           &m.vgpu_memory_used_bytes),
      Take(r.AddGauge("gpuslice_vgpu_memory_limit_bytes", "The vGPU's device memory limit on this GPU, in bytes.", gv),
           &m.vgpu_memory_limit_bytes),
      Take(r.AddGauge("gpuslice_vgpu_compute_share_target_ratio",
                      "Compute share the vGPU is set to on this GPU (--compute / 100).", gv),
           &m.vgpu_compute_share_target_ratio),
      Take(r.AddGauge("gpuslice_vgpu_compute_share_measured_ratio",
                      "Fraction of this GPU's time the vGPU's work ran, over the last measurement window.", gv),
           &m.vgpu_compute_share_measured_ratio),
      Take(r.AddCounter("gpuslice_vgpu_allocation_denials_total",
                        "Allocations refused because they would exceed the vGPU's memory limit.", v),
           &m.vgpu_allocation_denials_total),
      Take(r.AddHistogram("gpuslice_vgpu_lc_latency_seconds",
                          "Latency of the latency-critical vGPU's GPU work, from submission to completion.", v,
                          LcLatencyBuckets()),
           &m.vgpu_lc_latency_seconds),
      Take(r.AddHistogram("gpuslice_vgpu_task_latency_seconds",
                          "Latency of the task API's tasks of one level in the vGPU, from submission to completion.",
                          {"vgpu", "level"}, LcLatencyBuckets()),
           &m.vgpu_task_latency_seconds),
      Take(r.AddCounter("gpuslice_vgpu_tasks_total", "Tasks of one level the vGPU's task schedulers finished.",
                        {"vgpu", "level"}),
           &m.vgpu_tasks_total),
      Take(r.AddCounter("gpuslice_vgpu_task_failures_total",
                        "Tasks of one level in the vGPU that ended with an exception.", {"vgpu", "level"}),
           &m.vgpu_task_failures_total),
      Take(r.AddCounter("gpuslice_vgpu_task_slo_misses_total",
                        "Tasks of one level in the vGPU that took longer than their SLO.", {"vgpu", "level"}),
           &m.vgpu_task_slo_misses_total),
      Take(r.AddCounter("gpuslice_vgpu_timeslice_applications_total",
                        "Hardware timeslices set on the vGPU's channel groups.", v),
           &m.vgpu_timeslice_applications_total),
      Take(r.AddCounter("gpuslice_vgpu_timeslice_failures_total",
                        "Hardware timeslices the driver refused to set on the vGPU's channel groups.", v),
           &m.vgpu_timeslice_failures_total),
      Take(r.AddCounter("gpuslice_vgpu_hold_budget_spent_total",
                        "Seconds in which latency-critical holds kept one of the vGPU's processes waiting for its "
                        "whole hold budget (GPUSLICE_HOLD_BUDGET).",
                        v),
           &m.vgpu_hold_budget_spent_total),
      Take(r.AddGauge("gpuslice_vgpu_processes", "Live processes attached to the vGPU.", v), &m.vgpu_processes),
      Take(r.AddCounter(
               "gpuslice_vgpu_violations_total",
               "Audit violations acted on: GPU memory the vGPU's accounting did not show (unaccounted, over_limit, "
               "unmanaged), a channel group's timeslice raised past its vGPU's again (raised_slice), a process whose "
               "groups cannot be audited (hidden_groups), or a capped vGPU seen using more than its compute cap "
               "(over_cap).",
               {"vgpu", "kind"}),
           &m.vgpu_violations_total),
      Take(r.AddCounter("gpuslice_vgpu_gpu_seconds_total",
                        "Seconds of GPU time the vGPU's processes ran on this GPU, integrated from every NVML sample.",
                        gv),
           &m.vgpu_gpu_seconds_total),
      Take(r.AddCounter("gpuslice_vgpu_energy_joules_total",
                        "The GPU's energy above its idle draw, split between vGPUs by their GPU time, in joules.", gv),
           &m.vgpu_energy_joules_total),
      Take(r.AddGauge("gpuslice_vgpu_suspended",
                      "1 while the vGPU is not running: suspended, or being suspended or resumed.", v),
           &m.vgpu_suspended),
      Take(r.AddCounter("gpuslice_vgpu_suspended_seconds_total",
                        "Seconds the vGPU's processes spent suspended (checkpointed to host memory).", v),
           &m.vgpu_suspended_seconds_total),
      Take(r.AddCounter("gpuslice_vgpu_suspend_bytes_moved_total",
                        "Device memory bytes checkpointed to host memory plus restored, by suspends and resumes.", v),
           &m.vgpu_suspend_bytes_moved_total),
      Take(r.AddGauge("gpuslice_vgpu_last_suspend_duration_seconds",
                      "How long the vGPU's last suspend took (lock and checkpoint of every process).", v),
           &m.vgpu_last_suspend_duration_seconds),
      Take(r.AddGauge("gpuslice_vgpu_last_resume_duration_seconds",
                      "How long the vGPU's last resume took (restore and unlock of every process).", v),
           &m.vgpu_last_resume_duration_seconds),
      Take(r.AddGauge("gpuslice_vgpu_power_cap_watts", "The vGPU's power cap on this GPU, in watts (set vGPUs only).",
                      gv),
           &m.vgpu_power_cap_watts),
      Take(r.AddGauge(
               "gpuslice_vgpu_power_budget_ratio",
               "The GPU-time budget a power-capped vGPU is held to on this GPU, 0..1: its effective compute cap.", gv),
           &m.vgpu_power_budget_ratio),
      Take(r.AddGauge("gpuslice_gpu_memory_total_bytes", "The GPU's total device memory, in bytes.", {"gpu"}),
           &m.gpu_memory_total_bytes),
      Take(r.AddCounter("gpuslice_gpu_energy_joules_total", "The GPU's energy since the daemon started, in joules.",
                        {"gpu"}),
           &m.gpu_energy_joules_total),
      Take(r.AddCounter("gpuslice_gpu_idle_energy_joules_total",
                        "The GPU's idle power times the time nothing ran on it, in joules.", {"gpu"}),
           &m.gpu_idle_energy_joules_total),
      Take(r.AddGauge("gpuslice_gpu_healthy",
                      "1 while the GPU is healthy, 0 after a critical XID error until it recovers.", {"gpu"}),
           &m.gpu_healthy),
      Take(r.AddCounter("gpuslice_gpu_xid_errors_total",
                        "XID errors NVML reported for the GPU since the daemon started, by XID.", {"gpu", "xid"}),
           &m.gpu_xid_errors_total),
      Take(r.AddGauge("gpuslice_daemon_up", "1 while the gpuslice daemon is running and serving."), &m.daemon_up),
      Take(r.AddGauge("gpuslice_daemon_start_time_seconds", "When the daemon started, in seconds since the epoch."),
           &m.daemon_start_time_seconds),
      Take(
          r.AddCounter("gpuslice_daemon_reaped_processes_total", "Dead processes whose vGPU accounting was reclaimed."),
          &m.daemon_reaped_processes_total),
  };
  for (const Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return m;
}

}  // namespace gpuslice::metrics
