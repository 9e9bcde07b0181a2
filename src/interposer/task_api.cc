// task_api.cc — the exported task API (include/gpuslice/gpuslice.h): request
// spans and pre-preemption hints, on top of the pacer's best-effort hold.
//
// A thread's span is thread-local (start time, nesting depth); the hold it
// places lives on the GPUs' boards, bounded by core::kMaxHoldNs, and is
// renewed by every span_begin. One thread's span_end releases the vGPU's
// hold even if another thread still has a span open: the other thread's
// next span_begin holds again (simple, and never holds too long).
#include "gpuslice/gpuslice.h"

#include <cstdint>

#include "core/lc_latency.h"
#include "core/pacing_board.h"
#include "interposer/export.h"
#include "interposer/pacer.h"
#include "interposer/vgpu_runtime.h"
#include "port/clock.h"

namespace gi = gpuslice::interposer;
namespace core = gpuslice::core;

namespace {

thread_local uint64_t t_span_start_ns = 0;
thread_local int t_span_depth = 0;

// The vGPU's priority on its first device (a vGPU has one class).
bool LatencyCritical(const gi::VgpuRuntime& rt) {
  const uint32_t p = std::atomic_ref<uint32_t>(const_cast<uint32_t&>(rt.limits().devices[0].priority))
                         .load(std::memory_order_relaxed);
  return p == static_cast<uint32_t>(core::Priority::kLatencyCritical);
}

int Hold(uint64_t for_ns) {
  gi::VgpuRuntime* rt = gi::VgpuRuntime::Get();
  if (rt == nullptr) return GPUSLICE_NOT_IN_VGPU;
  if (!LatencyCritical(*rt)) return GPUSLICE_NOT_LATENCY_CRITICAL;
  gi::pacer::HoldBestEffort(gpuslice::port::MonotonicNanos() + for_ns);
  return GPUSLICE_OK;
}

}  // namespace

GPUSLICE_EXPORT int gpuslice_span_begin(void) {
  gi::VgpuRuntime* rt = gi::VgpuRuntime::Get();
  if (rt == nullptr) return GPUSLICE_NOT_IN_VGPU;
  if (t_span_depth++ > 0) return GPUSLICE_OK;
  t_span_start_ns = gpuslice::port::MonotonicNanos();
  return Hold(core::kMaxHoldNs);
}

GPUSLICE_EXPORT int gpuslice_span_end(void) {
  gi::VgpuRuntime* rt = gi::VgpuRuntime::Get();
  if (rt == nullptr) return GPUSLICE_NOT_IN_VGPU;
  if (t_span_depth == 0) return GPUSLICE_NO_SPAN_OPEN;
  if (--t_span_depth > 0) return GPUSLICE_OK;
  core::RecordLcLatency(rt->ledger_region(), gpuslice::port::MonotonicNanos() - t_span_start_ns);
  if (!LatencyCritical(*rt)) return GPUSLICE_NOT_LATENCY_CRITICAL;
  gi::pacer::ReleaseBestEffort();
  return GPUSLICE_OK;
}

GPUSLICE_EXPORT int gpuslice_hint_begin(void) { return Hold(core::kMaxHoldNs); }

GPUSLICE_EXPORT int gpuslice_hint(unsigned int usec) {
  if (usec == 0) return GPUSLICE_BAD_ARGUMENT;
  return Hold(static_cast<uint64_t>(usec) * 1000);
}

GPUSLICE_EXPORT int gpuslice_hint_end(void) {
  gi::VgpuRuntime* rt = gi::VgpuRuntime::Get();
  if (rt == nullptr) return GPUSLICE_NOT_IN_VGPU;
  if (!LatencyCritical(*rt)) return GPUSLICE_NOT_LATENCY_CRITICAL;
  // An open span on this thread keeps holding.
  if (t_span_depth == 0) gi::pacer::ReleaseBestEffort();
  return GPUSLICE_OK;
}
