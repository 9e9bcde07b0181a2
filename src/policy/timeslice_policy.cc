#include "policy/timeslice_policy.h"

#include <algorithm>
#include <optional>

namespace gpuslice::policy {
namespace {
// The highest LC level among `vgpus` ("the LC"), or nullopt without LC.
std::optional<uint32_t> TopLcRank(const std::vector<VgpuOnGpu>& vgpus) {
  std::optional<uint32_t> top;
  for (const VgpuOnGpu& v : vgpus) {
    if (v.priority == core::Priority::kLatencyCritical) top = std::max(top.value_or(v.rank), v.rank);
  }
  return top;
}

// The slices of ComputeTimeslices, with the best-effort contenders beside
// an LC counted as those on the GPU, `self` (whatever its on_gpu; npos:
// none) and `other_processes`. Without an LC every BE vGPU counts: a lone
// busy group keeps the GPU whatever its slice, and the slices' ratios are
// the shares (docs/benchmarks.md, "Shares by slices or by turns"), which an
// arriving vGPU would upset until the next schedule.
std::vector<uint64_t> SlicesCounting(const std::vector<VgpuOnGpu>& vgpus, const TimeslicePolicyConfig& config,
                                     uint32_t other_processes, size_t self) {
  // The highest LC level present is "the LC"; BE vGPUs are sliced against
  // it as before levels existed. LC vGPUs of lower levels get the floor of
  // a slice beside an LC: short, so the LC waits little for them, and yet
  // longer than a switch, so that next to a BE at the tiny slice both make
  // progress (two busy channel groups at 50 us beside an LC made none on an
  // H100: docs/benchmarks.md, "Priority levels").
  const std::optional<uint32_t> top_lc = TopLcRank(vgpus);
  const bool has_lc = top_lc.has_value();
  const uint32_t top_lc_rank = top_lc.value_or(0);
  uint32_t top_count = 0;
  uint32_t be_count = has_lc ? other_processes : 0;
  uint64_t be_weight = 0;
  for (size_t i = 0; i < vgpus.size(); ++i) {
    const VgpuOnGpu& v = vgpus[i];
    if (v.priority == core::Priority::kLatencyCritical) {
      top_count += v.rank == top_lc_rank;
    } else if (v.on_gpu || i == self || !has_lc) {
      ++be_count;
      be_weight += std::max<uint32_t>(v.share_pct, 1);
    }
  }
  const uint64_t period = has_lc ? config.be_period_with_lc_us : config.be_period_us;
  const uint64_t floor = has_lc ? config.be_min_slice_with_lc_us : config.be_min_slice_us;
  std::vector<uint64_t> slices;
  slices.reserve(vgpus.size());
  for (const VgpuOnGpu& v : vgpus) {
    if (v.priority == core::Priority::kLatencyCritical && v.rank < top_lc_rank) {
      slices.push_back(config.be_min_slice_with_lc_us);
    } else if (v.priority == core::Priority::kLatencyCritical) {
      slices.push_back(top_count == 1 ? config.lc_slice_us : config.lc_shared_slice_us);
    } else if (has_lc && be_count == 1) {
      slices.push_back(config.be_slice_beside_lc_us);
    } else {
      const uint64_t share = std::max<uint32_t>(v.share_pct, 1);
      slices.push_back(std::max(floor, period * share / std::max<uint64_t>(be_weight, share)));
    }
  }
  return slices;
}
}  // namespace

const char* ShareModeName(ShareMode mode) { return mode == ShareMode::kTurns ? "turns" : "slices"; }
const char* TurnStyleName(TurnStyle style) { return style == TurnStyle::kExclusive ? "exclusive" : "backfill"; }

std::vector<uint64_t> ComputeTimeslices(const std::vector<VgpuOnGpu>& vgpus, const TimeslicePolicyConfig& config,
                                        uint32_t other_processes) {
  std::vector<uint64_t> slices = SlicesCounting(vgpus, config, other_processes, std::string::npos);
  for (size_t i = 0; i < vgpus.size(); ++i) {
    if (!vgpus[i].on_gpu && vgpus[i].priority != core::Priority::kLatencyCritical) {
      slices[i] = SlicesCounting(vgpus, config, other_processes, i)[i];
    }
  }
  return slices;
}

std::vector<uint64_t> ComputeTimeslicesBesideLc(const std::vector<VgpuOnGpu>& vgpus,
                                                const TimeslicePolicyConfig& config, uint32_t other_processes) {
  std::vector<VgpuOnGpu> with_lc = vgpus;
  const std::optional<uint32_t> top_lc = TopLcRank(vgpus);
  const uint32_t top_lc_rank = top_lc.value_or(0);
  if (!top_lc) with_lc.push_back({"", core::Priority::kLatencyCritical, 100});
  std::vector<uint64_t> slices = ComputeTimeslices(with_lc, config, other_processes);
  slices.resize(vgpus.size());
  // The top LC level gets what it would with another LC vGPU of its level
  // beside: the shared slice, which its processes take while several of them
  // are on the GPU (each has its own channel group). A lower LC level
  // is sliced as BE beside it (a 0 would read as "the default beside-LC
  // slice", the tiny one).
  for (size_t i = 0; i < vgpus.size(); ++i) {
    if (vgpus[i].priority == core::Priority::kLatencyCritical && vgpus[i].rank == top_lc_rank) {
      slices[i] = config.lc_shared_slice_us;
    }
  }
  return slices;
}

std::vector<bool> AloneBesideLc(const std::vector<VgpuOnGpu>& vgpus, uint32_t other_processes) {
  uint32_t on_gpu = other_processes;
  for (const VgpuOnGpu& v : vgpus) on_gpu += v.priority != core::Priority::kLatencyCritical && v.on_gpu;
  std::vector<bool> alone;
  alone.reserve(vgpus.size());
  for (const VgpuOnGpu& v : vgpus) {
    alone.push_back(v.priority != core::Priority::kLatencyCritical && on_gpu + (v.on_gpu ? 0 : 1) == 1);
  }
  return alone;
}

}  // namespace gpuslice::policy
