#include "policy/timeslice_policy.h"

#include <algorithm>

namespace gpuslice::policy {

std::vector<uint64_t> ComputeTimeslices(const std::vector<VgpuOnGpu>& vgpus, const TimeslicePolicyConfig& config) {
  uint32_t lc_count = 0;
  uint32_t be_count = 0;
  uint64_t be_weight = 0;
  uint32_t top_lc_rank = 0;
  uint32_t top_lc_count = 0;  // LC vGPUs of the highest LC level here
  for (const VgpuOnGpu& v : vgpus) {
    if (v.priority == core::Priority::kLatencyCritical) {
      ++lc_count;
      if (top_lc_count == 0 || v.rank > top_lc_rank) {
        top_lc_rank = v.rank;
        top_lc_count = 0;
      }
      top_lc_count += v.rank == top_lc_rank;
    } else {
      ++be_count;
      be_weight += std::max<uint32_t>(v.share_pct, 1);
    }
  }
  const bool has_lc = lc_count > 0;
  const uint64_t period = has_lc ? config.be_period_with_lc_us : config.be_period_us;
  const uint64_t floor = has_lc ? config.be_min_slice_with_lc_us : config.be_min_slice_us;
  std::vector<uint64_t> slices;
  slices.reserve(vgpus.size());
  for (const VgpuOnGpu& v : vgpus) {
    if (v.priority == core::Priority::kLatencyCritical && v.rank < top_lc_rank) {
      // A lower LC level beside a higher one is to it what a BE is.
      slices.push_back(config.be_slice_beside_lc_us);
    } else if (v.priority == core::Priority::kLatencyCritical) {
      slices.push_back(top_lc_count == 1 ? config.lc_slice_us : config.lc_shared_slice_us);
    } else if (has_lc && be_count == 1) {
      slices.push_back(config.be_slice_beside_lc_us);
    } else {
      const uint64_t share = std::max<uint32_t>(v.share_pct, 1);
      slices.push_back(std::max(floor, period * share / be_weight));
    }
  }
  return slices;
}

std::vector<uint64_t> ComputeTimeslicesBesideLc(const std::vector<VgpuOnGpu>& vgpus,
                                                const TimeslicePolicyConfig& config) {
  std::vector<VgpuOnGpu> with_lc = vgpus;
  bool has_lc = false;
  for (const VgpuOnGpu& v : vgpus) has_lc |= v.priority == core::Priority::kLatencyCritical;
  if (!has_lc) with_lc.push_back({"", core::Priority::kLatencyCritical, 100});
  std::vector<uint64_t> slices = ComputeTimeslices(with_lc, config);
  slices.resize(vgpus.size());
  for (size_t i = 0; i < vgpus.size(); ++i) {
    if (vgpus[i].priority == core::Priority::kLatencyCritical) slices[i] = 0;
  }
  return slices;
}

}  // namespace gpuslice::policy
