#include "k8s/lc_slo.h"

#include "core/vgpu_layout.h"

namespace gpuslice::k8s {

uint64_t PredictedLcP99Us(uint64_t alone_p99_us, bool shared) {
  // Beside BE work the LC waits at most the BE's slice beside LC and one
  // switch (docs/plan.md); alone, nothing.
  return shared ? alone_p99_us + core::kDefaultSliceBesideLcUs + kLcSwitchUs : alone_p99_us;
}

bool PlacementMeetsLcSlo(const PodRequest& pod, const std::vector<GpuState>& before, const PodPlacement& placement) {
  if (pod.lc_slo_p99_us == 0) return true;
  for (const auto& [container, gpus] : placement.gpus) {
    for (uint32_t index : gpus) {
      bool shared = false;
      for (const GpuState& g : before) {
        if (g.index == index) shared = g.vcore_used > 0;
      }
      // Containers of the pod itself placed on one GPU share it too.
      for (const auto& [other, other_gpus] : placement.gpus) {
        if (other == container) continue;
        for (uint32_t o : other_gpus) shared |= o == index;
      }
      if (PredictedLcP99Us(pod.lc_alone_p99_us, shared) > pod.lc_slo_p99_us) return false;
    }
  }
  return true;
}

}  // namespace gpuslice::k8s
