#include "daemon/metrics_exporter.h"

#include <iterator>
#include <string>
#include <vector>

namespace gpuslice::daemon {

void FillVgpuMetrics(const metrics::GpusliceMetrics& m, const node::NodeDevices& devices,
                     const std::vector<node::VgpuView>& views) {
  // vGPUs come and go: start every per-vGPU family afresh.
  m.vgpu_memory_used_bytes->Clear();
  m.vgpu_memory_limit_bytes->Clear();
  m.vgpu_compute_share_target_ratio->Clear();
  m.vgpu_compute_share_measured_ratio->Clear();
  m.vgpu_allocation_denials_total->Clear();
  m.vgpu_lc_latency_seconds->Clear();
  m.vgpu_task_latency_seconds->Clear();
  m.vgpu_tasks_total->Clear();
  m.vgpu_task_failures_total->Clear();
  m.vgpu_task_slo_misses_total->Clear();
  m.vgpu_timeslice_applications_total->Clear();
  m.vgpu_timeslice_failures_total->Clear();
  m.vgpu_hold_budget_spent_total->Clear();
  m.vgpu_processes->Clear();
  m.vgpu_suspended->Clear();
  m.vgpu_suspended_seconds_total->Clear();
  m.vgpu_suspend_bytes_moved_total->Clear();
  m.vgpu_last_suspend_duration_seconds->Clear();
  m.vgpu_last_resume_duration_seconds->Clear();
  m.vgpu_power_cap_watts->Clear();
  m.vgpu_power_budget_ratio->Clear();
  m.gpu_memory_total_bytes->Clear();
  for (const auto& g : devices.gpus) {
    m.gpu_memory_total_bytes->WithLabels({std::to_string(g.index)}).Set(static_cast<double>(g.memory_total_bytes));
  }
  for (const auto& v : views) {
    for (const auto& d : v.devices) {
      // A GPU the node no longer has is labelled by UUID rather than dropped.
      const metrics::LabelValues labels = {d.gpu_index ? std::to_string(*d.gpu_index) : d.gpu_uuid, v.name};
      m.vgpu_memory_used_bytes->WithLabels(labels).Set(static_cast<double>(d.memory_used_bytes));
      const uint64_t limit = d.memory_limit_bytes == core::kUnlimited ? d.memory_total_bytes : d.memory_limit_bytes;
      m.vgpu_memory_limit_bytes->WithLabels(labels).Set(static_cast<double>(limit));
      m.vgpu_compute_share_target_ratio->WithLabels(labels).Set(d.compute_share_pct / 100.0);
      if (d.compute_measured_ratio) {
        m.vgpu_compute_share_measured_ratio->WithLabels(labels).Set(*d.compute_measured_ratio);
      }
      if (v.power_cap_watts) {
        // The budget in force: the compute cap the pacer enforces now,
        // min(user's cap, power budget); 0 in the limits is no cap at all.
        m.vgpu_power_cap_watts->WithLabels(labels).Set(*v.power_cap_watts);
        const uint32_t effective = d.effective_compute_cap_pct == 0 ? 100 : d.effective_compute_cap_pct;
        m.vgpu_power_budget_ratio->WithLabels(labels).Set(effective / 100.0);
      }
    }
    const metrics::LabelValues vgpu = {v.name};
    m.vgpu_allocation_denials_total->WithLabels(vgpu).Set(static_cast<double>(v.denied_allocations));
    m.vgpu_timeslice_applications_total->WithLabels(vgpu).Set(static_cast<double>(v.timeslice_applications));
    m.vgpu_timeslice_failures_total->WithLabels(vgpu).Set(static_cast<double>(v.timeslice_failures));
    m.vgpu_hold_budget_spent_total->WithLabels(vgpu).Set(static_cast<double>(v.hold_budget_spent));
    m.vgpu_processes->WithLabels(vgpu).Set(static_cast<double>(v.processes.size()));
    // Suspend (node/suspend_record.h): kept in the vGPU's directory, so
    // these survive daemon restarts as counters should.
    m.vgpu_suspended->WithLabels(vgpu).Set(v.suspend_state == "running" ? 0 : 1);
    m.vgpu_suspended_seconds_total->WithLabels(vgpu).Set(v.suspended_seconds_total);
    m.vgpu_suspend_bytes_moved_total->WithLabels(vgpu).Set(static_cast<double>(v.suspend_bytes_moved_total));
    if (v.suspends > 0) m.vgpu_last_suspend_duration_seconds->WithLabels(vgpu).Set(v.last_suspend_seconds);
    if (v.resumes > 0) m.vgpu_last_resume_duration_seconds->WithLabels(vgpu).Set(v.last_resume_seconds);
    // LC vGPUs, and any that ever recorded (one turned BE keeps its history
    // rather than seeming reset); a BE vGPU's empty histogram would be
    // 23 series of zeros.
    const core::LcLatencySnapshot& lc = v.lc_latency.lifetime;
    if (v.priority == core::Priority::kLatencyCritical || lc.count > 0) {
      // The family's bounds are the ledger's (metrics::LcLatencyBuckets), so
      // the per-bucket counts mirror one to one.
      m.vgpu_lc_latency_seconds->WithLabels(vgpu).Set(
          std::vector<uint64_t>(std::begin(lc.buckets), std::end(lc.buckets)), static_cast<double>(lc.sum_ns) / 1e9);
    }
    // The task API's levels, as the vGPU's processes recorded them in its
    // ledger (core/task_metrics.h); only levels that ran a task.
    for (const node::TaskLevelView& t : v.task_levels) {
      const metrics::LabelValues level = {v.name, t.level};
      const core::LcLatencySnapshot& l = t.latency.lifetime;
      m.vgpu_task_latency_seconds->WithLabels(level).Set(
          std::vector<uint64_t>(std::begin(l.buckets), std::end(l.buckets)), static_cast<double>(l.sum_ns) / 1e9);
      m.vgpu_tasks_total->WithLabels(level).Set(static_cast<double>(l.count));
      m.vgpu_task_failures_total->WithLabels(level).Set(static_cast<double>(t.failed));
      m.vgpu_task_slo_misses_total->WithLabels(level).Set(static_cast<double>(t.slo_misses));
    }
  }
}

void FillUsageMetrics(const metrics::GpusliceMetrics& m, const GpuUsageMeter::Totals& totals) {
  // Cumulative since the daemon started, kept for vGPUs that are gone too:
  // their GPU time and energy were spent.
  for (const auto& [where, s] : totals.gpu_seconds) {
    m.vgpu_gpu_seconds_total->WithLabels({std::to_string(where.first), where.second}).Set(s);
  }
  for (const auto& [where, j] : totals.joules) {
    m.vgpu_energy_joules_total->WithLabels({std::to_string(where.first), where.second}).Set(j);
  }
  for (const auto& [gpu, j] : totals.device_joules) m.gpu_energy_joules_total->WithLabels({std::to_string(gpu)}).Set(j);
  for (const auto& [gpu, j] : totals.idle_joules) {
    m.gpu_idle_energy_joules_total->WithLabels({std::to_string(gpu)}).Set(j);
  }
}

void FillHealthMetrics(const metrics::GpusliceMetrics& m, const node::NodeDevices& devices,
                       const std::map<uint32_t, GpuHealth::State>& health) {
  for (const auto& g : devices.gpus) {
    auto it = health.find(g.index);
    m.gpu_healthy->WithLabels({std::to_string(g.index)}).Set(it == health.end() || it->second.healthy ? 1 : 0);
  }
  for (const auto& [gpu, s] : health) {
    for (const auto& [xid, n] : s.xid_counts) {
      m.gpu_xid_errors_total->WithLabels({std::to_string(gpu), std::to_string(xid)}).Set(static_cast<double>(n));
    }
  }
}

StatusOr<MetricsExporter> MetricsExporter::Create(metrics::Registry* registry, node::VgpuManager* manager,
                                                  int64_t start_time_unix_seconds, const GpuUsageMeter* meter,
                                                  const GpuHealth* health) {
  auto m = metrics::RegisterGpusliceMetrics(*registry);
  if (!m.ok()) return m.status();
  const metrics::GpusliceMetrics families = m.value();
  families.daemon_up->WithLabels({}).Set(1);
  families.daemon_start_time_seconds->WithLabels({}).Set(static_cast<double>(start_time_unix_seconds));
  families.daemon_reaped_processes_total->WithLabels({});  // exported as 0 from the start
  registry->AddCollector([families, manager, meter, health] {
    std::vector<node::VgpuView> views;
    if (manager->List("", &views).ok()) FillVgpuMetrics(families, manager->devices(), views);
    if (meter != nullptr) FillUsageMetrics(families, meter->totals());
    if (health != nullptr) FillHealthMetrics(families, manager->devices(), health->Snapshot());
  });
  return MetricsExporter(families);
}

}  // namespace gpuslice::daemon
