// metrics_exporter.h — the daemon's Prometheus series (docs/metrics.md),
// filled from the vGPUs' mapped state on every scrape.
//
// Registers gpuslice's metric families on the registry and one collector,
// which lists the manager's vGPUs (collect on scrape: the ledgers are the
// truth, so nothing is mirrored in between). The collector runs on the
// metrics server's thread and takes the manager's mutex for the listing.
// The reaped-processes counter is incremented by the housekeeping thread.
#ifndef GPUSLICE_DAEMON_METRICS_EXPORTER_H_
#define GPUSLICE_DAEMON_METRICS_EXPORTER_H_

#include <cstdint>
#include <string>

#include "core/status.h"
#include "daemon/gpu_health.h"
#include "daemon/gpu_usage_meter.h"
#include "node/vgpu_manager.h"
#include "metrics/gpuslice_metrics.h"
#include "metrics/registry.h"

namespace gpuslice::daemon {

class MetricsExporter {
 public:
  // Registers the families and the collector. `manager` must outlive the
  // registry's last Render().
  static StatusOr<MetricsExporter> Create(metrics::Registry* registry, node::VgpuManager* manager,
                                          int64_t start_time_unix_seconds, const GpuUsageMeter* meter = nullptr,
                                          const GpuHealth* health = nullptr);

  // Dead processes reclaimed by this daemon.
  void CountReaped(uint32_t n) { metrics_.daemon_reaped_processes_total->WithLabels({}).Increment(n); }
  // A memory-audit violation acted on (node_audit.h).
  void CountViolation(const std::string& vgpu, const std::string& kind) {
    metrics_.vgpu_violations_total->WithLabels({vgpu, kind}).Increment(1);
  }

 private:
  explicit MetricsExporter(metrics::GpusliceMetrics m) : metrics_(m) {}
  metrics::GpusliceMetrics metrics_;
};

// One collection pass, exposed for tests: sets every series from `views`.
void FillVgpuMetrics(const metrics::GpusliceMetrics& m, const node::NodeDevices& devices, const std::vector<node::VgpuView>& views);
// ... and the GPU time and energy series from the meter's totals.
void FillUsageMetrics(const metrics::GpusliceMetrics& m, const GpuUsageMeter::Totals& totals);
// ... and each GPU's health and XID counts (every GPU of `devices` has a
// gpuslice_gpu_healthy series).
void FillHealthMetrics(const metrics::GpusliceMetrics& m, const node::NodeDevices& devices,
                       const std::map<uint32_t, GpuHealth::State>& health);

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_METRICS_EXPORTER_H_
