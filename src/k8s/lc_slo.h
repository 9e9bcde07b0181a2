// lc_slo.h — whether a latency-critical pod's p99 SLO holds where the
// scheduler extender would place it, from the bound the capacity simulator
// validated on the GPU (docs/plan.md; docs/benchmarks.md, "Capacity
// simulator: predicted against measured").
//
// A pod declares, in annotations, its p99 SLO and its p99 measured alone
// (both µs; pod_request.h reads them). On a GPU no other container uses, it
// keeps its alone p99. On a GPU shared with others, gpuslice gives best-effort
// work beside an LC a 50 µs slice, so each LC request waits at most that slice
// and one context switch (175 µs, docs/gpu-facts.md): the simulator's worst
// case for a tiny or CUDA-graph LC beside any BE. Against the H100 matrix's
// run 2 it over-predicted the p99 by 4% to 40% and never under-predicted it,
// so it errs on the safe side. An eager LC's p99 is host jitter and is not
// predicted (docs/plan.md, limits).
//
// Pure functions; thread-safe; no allocation beyond the vectors passed in.
#ifndef GPUSLICE_K8S_LC_SLO_H_
#define GPUSLICE_K8S_LC_SLO_H_

#include <cstdint>
#include <vector>

#include "k8s/allocator.h"
#include "k8s/pod_request.h"

namespace gpuslice::k8s {

// A context switch away from a channel group with work queued (µs).
inline constexpr uint64_t kLcSwitchUs = 175;

// The p99 an LC with `alone_p99_us` is predicted to have on a GPU that it
// shares with other containers (`shared`) or has alone.
uint64_t PredictedLcP99Us(uint64_t alone_p99_us, bool shared);

// Whether `placement` (from PlacePod on `before`, the GPUs as they were
// before it) keeps the pod's SLO on every GPU it uses. True for a pod that
// declares no SLO.
bool PlacementMeetsLcSlo(const PodRequest& pod, const std::vector<GpuState>& before, const PodPlacement& placement);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_LC_SLO_H_
