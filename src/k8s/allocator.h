// allocator.h — which GPUs of one node a container should get.
//
// Shared by the scheduler extender (filter, prioritize and bind, per node)
// and the device plugin (GetPreferredAllocation and Allocate, when no bind
// recorded a choice). Both see a node as a list of GpuState.
//
// The choice among GPU sets that fit:
//   - one GPU: by packing alone. Binpack puts the container where the GPU
//     will be fullest afterwards (keeping whole GPUs free for big requests);
//     spread where it will be emptiest (less interference).
//   - several GPUs: 60% link quality, 40% packing. Link quality is the worst
//     link within the set (topology.h's LinkQuality): a collective runs at
//     the speed of its slowest hop, so a set with one PCIe hop is a PCIe set.
// Scores are in [0, 1]; ties go to the lowest GPU indices, so the choice is
// deterministic and the extender and the plugin agree.
//
// Pure functions; thread-safe; they allocate.
#ifndef GPUSLICE_K8S_ALLOCATOR_H_
#define GPUSLICE_K8S_ALLOCATOR_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "k8s/pod_request.h"
#include "k8s/topology.h"

namespace gpuslice::k8s {

enum class PackingPolicy { kBinpack, kSpread };
StatusOr<PackingPolicy> ParsePackingPolicy(std::string_view text);

struct GpuState {
  uint32_t index = 0;
  bool healthy = true;
  uint32_t vcore_used = 0;
  uint64_t vmemory_used = 0;   // units
  uint64_t vmemory_total = 0;  // units

  uint32_t vcore_free() const { return vcore_used >= 100 ? 0 : 100 - vcore_used; }
  uint64_t vmemory_free() const { return vmemory_used >= vmemory_total ? 0 : vmemory_total - vmemory_used; }
};

// Ok, or why this GPU cannot take its share of the container.
Status FitsOn(const GpuState& gpu, const ContainerRequest& request);
// Ok when `gpus` (indices) are the right number, distinct, known and fit.
Status CheckPlacement(const std::vector<GpuState>& gpus, const std::vector<uint32_t>& chosen,
                      const ContainerRequest& request);

struct Placement {
  std::vector<uint32_t> gpus;  // ascending
  double score = 0;            // [0, 1]
};

// The best GPU set for the container, or why none fits (naming each GPU's
// free vcore and vmemory). `topology` may be null: every link counts as unknown.
StatusOr<Placement> ChooseGpus(const std::vector<GpuState>& gpus, const NodeTopology* topology,
                               const ContainerRequest& request, PackingPolicy policy);

// The score ChooseGpus gives a set (for one that is already decided).
double ScorePlacement(const std::vector<GpuState>& gpus, const NodeTopology* topology,
                      const std::vector<uint32_t>& chosen, const ContainerRequest& request, PackingPolicy policy);

// Adds the container's use to the chosen GPUs (or, with sign -1, takes it back).
void ApplyPlacement(std::vector<GpuState>& gpus, const std::vector<uint32_t>& chosen, const ContainerRequest& request,
                    int sign = 1);

struct PodPlacement {
  std::map<std::string, std::vector<uint32_t>> gpus;  // container name -> indices
  double score = 0;                                   // [0, 1]
};
// Places every gpuslice container of the pod, in admission order, each
// seeing the GPUs as the previous ones left them. The score, which the
// extender ranks nodes by, is 70% the containers' mean placement score and
// 30% the packing policy applied to the whole node afterwards (binpack: the
// fuller node, spread: the emptier), so that nodes whose chosen GPUs tie
// are still told apart.
StatusOr<PodPlacement> PlacePod(std::vector<GpuState> gpus, const NodeTopology* topology, const PodRequest& pod,
                                PackingPolicy policy);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_ALLOCATOR_H_
