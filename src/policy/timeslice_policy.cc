#include "policy/timeslice_policy.h"

#include <algorithm>

namespace gpuslice::policy {

std::vector<uint64_t> ComputeTimeslices(const std::vector<VgpuOnGpu>& vgpus, const TimeslicePolicyConfig& config) {
  // The highest LC level present is "the LC"; everything else (BE, and LC of
  // lower levels) is to it what a BE is, and is sliced as BE is.
  bool has_lc = false;
  uint32_t top_lc_rank = 0;
  for (const VgpuOnGpu& v : vgpus) {
    if (v.priority != core::Priority::kLatencyCritical) continue;
    top_lc_rank = has_lc ? std::max(top_lc_rank, v.rank) : v.rank;
    has_lc = true;
  }
  const auto is_top = [&](const VgpuOnGpu& v) {
    return v.priority == core::Priority::kLatencyCritical && v.rank == top_lc_rank;
  };
  uint32_t top_count = 0;
  uint32_t others = 0;
  uint64_t others_weight = 0;
  for (const VgpuOnGpu& v : vgpus) {
    if (is_top(v)) {
      ++top_count;
    } else {
      ++others;
      others_weight += std::max<uint32_t>(v.share_pct, 1);
    }
  }
  const uint64_t period = has_lc ? config.be_period_with_lc_us : config.be_period_us;
  const uint64_t floor = has_lc ? config.be_min_slice_with_lc_us : config.be_min_slice_us;
  std::vector<uint64_t> slices;
  slices.reserve(vgpus.size());
  for (const VgpuOnGpu& v : vgpus) {
    if (is_top(v)) {
      slices.push_back(top_count == 1 ? config.lc_slice_us : config.lc_shared_slice_us);
    } else if (has_lc && others == 1) {
      slices.push_back(config.be_slice_beside_lc_us);
    } else {
      // Never two busy channel groups at the tiny slice: a switch costs more
      // than it (docs/gpu-facts.md), and two of them beside an LC made no
      // progress at all (docs/benchmarks.md, "Priority levels").
      const uint64_t share = std::max<uint32_t>(v.share_pct, 1);
      slices.push_back(std::max(floor, period * share / others_weight));
    }
  }
  return slices;
}

std::vector<uint64_t> ComputeTimeslicesBesideLc(const std::vector<VgpuOnGpu>& vgpus,
                                                const TimeslicePolicyConfig& config) {
  std::vector<VgpuOnGpu> with_lc = vgpus;
  bool has_lc = false;
  uint32_t top_lc_rank = 0;
  for (const VgpuOnGpu& v : vgpus) {
    if (v.priority != core::Priority::kLatencyCritical) continue;
    top_lc_rank = has_lc ? std::max(top_lc_rank, v.rank) : v.rank;
    has_lc = true;
  }
  if (!has_lc) with_lc.push_back({"", core::Priority::kLatencyCritical, 100});
  std::vector<uint64_t> slices = ComputeTimeslices(with_lc, config);
  slices.resize(vgpus.size());
  // The top LC level has none; a lower LC level is sliced as BE beside it
  // (a 0 would read as "the default beside-LC slice", the tiny one).
  for (size_t i = 0; i < vgpus.size(); ++i) {
    if (vgpus[i].priority == core::Priority::kLatencyCritical && vgpus[i].rank == top_lc_rank) slices[i] = 0;
  }
  return slices;
}

}  // namespace gpuslice::policy
