#include "k8s/allocator.h"

#include <algorithm>
#include <functional>

namespace gpuslice::k8s {
namespace {

constexpr double kEpsilon = 1e-9;
constexpr double kTopologyWeight = 0.6;
constexpr double kNodeWeight = 0.3;           // PlacePod: the whole node's packing, beside the chosen GPUs' score
constexpr double kUnknownLinkQuality = 0.05;  // below "system": an unpublished link is the worst bet
// Above this many candidate sets, multi-GPU choice is greedy (grow each
// start GPU by its best-linked neighbour) rather than exhaustive.
constexpr uint64_t kMaxExhaustiveSets = 4096;

const GpuState* Find(const std::vector<GpuState>& gpus, uint32_t index) {
  for (const GpuState& g : gpus) {
    if (g.index == index) return &g;
  }
  return nullptr;
}

double PairQuality(const NodeTopology* topology, uint32_t a, uint32_t b) {
  if (topology == nullptr) return kUnknownLinkQuality;
  const auto link = topology->LinkBetween(a, b);
  return link ? LinkQuality(link->type, link->nvlinks) : kUnknownLinkQuality;
}

double WorstLink(const NodeTopology* topology, const std::vector<uint32_t>& chosen) {
  double worst = 1.0;
  for (size_t i = 0; i < chosen.size(); ++i) {
    for (size_t j = i + 1; j < chosen.size(); ++j) worst = std::min(worst, PairQuality(topology, chosen[i], chosen[j]));
  }
  return worst;
}

uint64_t Combinations(uint64_t n, uint64_t k) {
  uint64_t c = 1;
  for (uint64_t i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;
    if (c > kMaxExhaustiveSets) return c;
  }
  return c;
}

std::string Describe(const GpuState& g) {
  if (!g.healthy) return "GPU " + std::to_string(g.index) + " unhealthy";
  return "GPU " + std::to_string(g.index) + " " + std::to_string(g.vcore_free()) + " vcore/" +
         std::to_string(g.vmemory_free()) + " vmemory free";
}

}  // namespace

StatusOr<PackingPolicy> ParsePackingPolicy(std::string_view text) {
  if (text == "binpack") return PackingPolicy::kBinpack;
  if (text == "spread") return PackingPolicy::kSpread;
  return Status::Error("unknown packing policy \"" + std::string(text) + "\"; use binpack or spread");
}

Status FitsOn(const GpuState& gpu, const ContainerRequest& request) {
  const std::string name = "GPU " + std::to_string(gpu.index);
  if (!gpu.healthy) return Status::Error(name + " is unhealthy");
  if (gpu.vcore_free() < request.VcorePerGpu()) {
    return Status::Error(name + " has " + std::to_string(gpu.vcore_free()) + " vcore free, the container needs " +
                         std::to_string(request.VcorePerGpu()));
  }
  if (gpu.vmemory_free() < request.VmemoryUnitsPerGpu()) {
    return Status::Error(name + " has " + std::to_string(gpu.vmemory_free()) +
                         " vmemory units free, the container needs " + std::to_string(request.VmemoryUnitsPerGpu()));
  }
  return Status::Ok();
}

Status CheckPlacement(const std::vector<GpuState>& gpus, const std::vector<uint32_t>& chosen,
                      const ContainerRequest& request) {
  if (chosen.size() != request.GpuCount()) {
    return Status::Error("container " + request.name + " needs " + std::to_string(request.GpuCount()) + " GPU(s) but " +
                         std::to_string(chosen.size()) + " were chosen");
  }
  for (size_t i = 0; i < chosen.size(); ++i) {
    for (size_t j = i + 1; j < chosen.size(); ++j) {
      if (chosen[i] == chosen[j]) return Status::Error("GPU " + std::to_string(chosen[i]) + " is chosen twice");
    }
    const GpuState* g = Find(gpus, chosen[i]);
    if (g == nullptr) return Status::Error("the node has no GPU " + std::to_string(chosen[i]));
    if (Status s = FitsOn(*g, request); !s.ok()) return s;
  }
  return Status::Ok();
}

double ScorePlacement(const std::vector<GpuState>& gpus, const NodeTopology* topology,
                      const std::vector<uint32_t>& chosen, const ContainerRequest& request, PackingPolicy policy) {
  if (chosen.empty()) return 0;
  double fullness = 0;
  for (uint32_t index : chosen) {
    const GpuState* g = Find(gpus, index);
    if (g == nullptr) continue;
    const double vcore = std::min(1.0, (g->vcore_used + request.VcorePerGpu()) / 100.0);
    const double memory = g->vmemory_total == 0
                              ? vcore
                              : std::min(1.0, static_cast<double>(g->vmemory_used + request.VmemoryUnitsPerGpu()) /
                                                  static_cast<double>(g->vmemory_total));
    fullness += 0.5 * vcore + 0.5 * memory;
  }
  fullness /= static_cast<double>(chosen.size());
  const double packing = policy == PackingPolicy::kBinpack ? fullness : 1.0 - fullness;
  if (chosen.size() == 1) return packing;
  return kTopologyWeight * WorstLink(topology, chosen) + (1.0 - kTopologyWeight) * packing;
}

StatusOr<Placement> ChooseGpus(const std::vector<GpuState>& gpus, const NodeTopology* topology,
                               const ContainerRequest& request, PackingPolicy policy) {
  std::vector<uint32_t> eligible;
  for (const GpuState& g : gpus) {
    if (FitsOn(g, request).ok()) eligible.push_back(g.index);
  }
  std::sort(eligible.begin(), eligible.end());
  const uint32_t k = request.GpuCount();
  if (eligible.size() < k) {
    std::string have;
    for (const GpuState& g : gpus) have += (have.empty() ? "" : ", ") + Describe(g);
    if (have.empty()) have = "no GPUs";
    return Status::Error("container " + request.name + " needs " + std::to_string(k) + " GPU(s) with " +
                         std::to_string(request.VcorePerGpu()) + " vcore and " +
                         std::to_string(request.VmemoryUnitsPerGpu()) + " vmemory units free; the node has " + have);
  }

  Placement best;
  best.score = -1;
  auto consider = [&](std::vector<uint32_t> set) {
    std::sort(set.begin(), set.end());
    const double score = ScorePlacement(gpus, topology, set, request, policy);
    if (score > best.score + kEpsilon || (std::abs(score - best.score) <= kEpsilon && set < best.gpus)) {
      best.score = score;
      best.gpus = std::move(set);
    }
  };

  if (Combinations(eligible.size(), k) <= kMaxExhaustiveSets) {
    std::vector<uint32_t> set;
    std::function<void(size_t)> walk = [&](size_t from) {
      if (set.size() == k) {
        consider(set);
        return;
      }
      for (size_t i = from; i + (k - set.size()) <= eligible.size(); ++i) {
        set.push_back(eligible[i]);
        walk(i + 1);
        set.pop_back();
      }
    };
    walk(0);
  } else {
    for (uint32_t start : eligible) {
      std::vector<uint32_t> set = {start};
      while (set.size() < k) {
        uint32_t pick = 0;
        double pick_quality = -1;
        for (uint32_t candidate : eligible) {
          if (std::find(set.begin(), set.end(), candidate) != set.end()) continue;
          double quality = 1.0;
          for (uint32_t member : set) quality = std::min(quality, PairQuality(topology, member, candidate));
          if (quality > pick_quality + kEpsilon) {
            pick_quality = quality;
            pick = candidate;
          }
        }
        set.push_back(pick);
      }
      consider(set);
    }
  }
  best.score = std::clamp(best.score, 0.0, 1.0);
  return best;
}

void ApplyPlacement(std::vector<GpuState>& gpus, const std::vector<uint32_t>& chosen, const ContainerRequest& request,
                    int sign) {
  for (GpuState& g : gpus) {
    if (std::find(chosen.begin(), chosen.end(), g.index) == chosen.end()) continue;
    if (sign >= 0) {
      g.vcore_used += request.VcorePerGpu();
      g.vmemory_used += request.VmemoryUnitsPerGpu();
    } else {
      g.vcore_used -= std::min(g.vcore_used, request.VcorePerGpu());
      g.vmemory_used -= std::min(g.vmemory_used, request.VmemoryUnitsPerGpu());
    }
  }
}

StatusOr<PodPlacement> PlacePod(std::vector<GpuState> gpus, const NodeTopology* topology, const PodRequest& pod,
                                PackingPolicy policy) {
  PodPlacement out;
  for (const ContainerRequest& c : pod.containers) {
    auto placement = ChooseGpus(gpus, topology, c, policy);
    if (!placement.ok()) return placement.status();
    ApplyPlacement(gpus, placement->gpus, c);
    out.gpus[c.name] = placement->gpus;
    out.score += placement->score;
  }
  if (!pod.containers.empty()) out.score /= static_cast<double>(pod.containers.size());
  // The node as a whole counts too: with spread, of two nodes that each have
  // an empty GPU, the emptier node should win; with binpack, the fuller.
  double fullness = 0;
  size_t healthy = 0;
  for (const GpuState& g : gpus) {
    if (!g.healthy) continue;
    const double vcore = std::min(1.0, g.vcore_used / 100.0);
    const double memory =
        g.vmemory_total == 0
            ? vcore
            : std::min(1.0, static_cast<double>(g.vmemory_used) / static_cast<double>(g.vmemory_total));
    fullness += 0.5 * vcore + 0.5 * memory;
    ++healthy;
  }
  if (healthy > 0) fullness /= static_cast<double>(healthy);
  const double node_packing = policy == PackingPolicy::kBinpack ? fullness : 1.0 - fullness;
  out.score = (1.0 - kNodeWeight) * out.score + kNodeWeight * node_packing;
  return out;
}

}  // namespace gpuslice::k8s
