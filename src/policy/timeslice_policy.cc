#include "policy/timeslice_policy.h"

#include <algorithm>

namespace gpuslice::policy {

std::vector<uint64_t> ComputeTimeslices(const std::vector<VgpuOnGpu>& vgpus, const TimeslicePolicyConfig& config) {
  bool has_lc = false;
  uint64_t be_weight = 0;
  for (const VgpuOnGpu& v : vgpus) {
    if (v.priority == core::Priority::kLatencyCritical) has_lc = true;
    else be_weight += std::max<uint32_t>(v.share_pct, 1);
  }
  const uint64_t period = has_lc ? config.be_period_with_lc_us : config.be_period_us;
  const uint64_t floor = has_lc ? config.be_min_slice_with_lc_us : config.be_min_slice_us;
  std::vector<uint64_t> slices;
  slices.reserve(vgpus.size());
  for (const VgpuOnGpu& v : vgpus) {
    if (v.priority == core::Priority::kLatencyCritical) {
      slices.push_back(config.lc_slice_us);
      continue;
    }
    const uint64_t share = std::max<uint32_t>(v.share_pct, 1);
    slices.push_back(std::max(floor, period * share / be_weight));
  }
  return slices;
}

}  // namespace gpuslice::policy
