// task_api.cc — the exported task API (include/gpuslice/gpuslice.h): request
// spans, task metrics (core/task_metrics.h) and pre-preemption hints: the
// pacer's best-effort hold (pacer.h)
// plus, only in a library built with -DGPUSLICE_EXPERIMENTAL_HOLDER=ON and
// when GPUSLICE_LC_HOLDER asks, a holder kernel (holder.h). A library built
// without it says once, at the first hint or span, that GPUSLICE_LC_HOLDER is
// ignored.
//
// A thread's span is thread-local (start time, nesting depth); the hold it
// places lives on the GPUs' boards, bounded by core::kMaxHoldNs, and is
// renewed by every span_begin. One thread's span_end releases the vGPU's
// hold even if another thread still has a span open: the other thread's
// next span_begin holds again (simple, and never holds too long).
#include "gpuslice/gpuslice.h"

#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <cstdint>

#include "core/lc_latency.h"
#include "core/pacing_board.h"
#include "core/task_metrics.h"
#include "interposer/export.h"
#include "interposer/holder.h"
#include "interposer/pacer.h"
#include "interposer/vgpu_runtime.h"
#include "port/clock.h"
#include "port/log.h"

namespace gi = gpuslice::interposer;
namespace core = gpuslice::core;

namespace {

thread_local uint64_t t_span_start_ns = 0;
thread_local int t_span_depth = 0;

// A hint's holder lasts the hint plus this, so that a request submitted a
// little late still finds the GPU; hint_begin's, without a duration, this.
constexpr uint64_t kHintSlackNs = 1'000'000;
constexpr uint64_t kHintBeginBoundNs = 5'000'000;

// An LC process asks for holders (GPUSLICE_LC_HOLDER) that this library was
// built without: say so once, rather than let an experiment measure nothing.
void NoteHolderRequest() {
#if !GPUSLICE_EXPERIMENTAL_HOLDER
  static std::atomic<bool> checked{false};
  if (checked.load(std::memory_order_relaxed) || checked.exchange(true)) return;
  const char* v = getenv("GPUSLICE_LC_HOLDER");
  if (v == nullptr || *v == '\0' || __builtin_strcmp(v, "off") == 0) return;
  gpuslice::port::Log(gpuslice::port::LogLevel::kWarn,
                      "GPUSLICE_LC_HOLDER=%s is ignored: this gpuslice was built without "
                      "GPUSLICE_EXPERIMENTAL_HOLDER, so it has no holder kernel", v);
#endif
}

// Holds best-effort launches for `for_ns` and, when `holder_ns` > 0, starts a
// holder that keeps the GPU for this process until its next launch.
int Hold(uint64_t for_ns, uint64_t holder_ns) {
  gi::VgpuRuntime* rt = gi::VgpuRuntime::Get();
  if (rt == nullptr) return GPUSLICE_NOT_IN_VGPU;
  if (!rt->latency_critical()) return GPUSLICE_NOT_LATENCY_CRITICAL;
  NoteHolderRequest();
  gi::pacer::HoldBestEffort(gpuslice::port::MonotonicNanos() + for_ns);
  if (holder_ns > 0) gi::holder::Hint(holder_ns);
  return GPUSLICE_OK;
}

}  // namespace

GPUSLICE_EXPORT int gpuslice_span_begin(void) {
  gi::VgpuRuntime* rt = gi::VgpuRuntime::Get();
  if (rt == nullptr) return GPUSLICE_NOT_IN_VGPU;
  if (t_span_depth++ > 0) return GPUSLICE_OK;
  t_span_start_ns = gpuslice::port::MonotonicNanos();
  const int held = Hold(core::kMaxHoldNs, 0);
  if (held == GPUSLICE_OK) gi::holder::SpanBegin();
  return held;
}

GPUSLICE_EXPORT int gpuslice_span_end(void) {
  gi::VgpuRuntime* rt = gi::VgpuRuntime::Get();
  if (rt == nullptr) return GPUSLICE_NOT_IN_VGPU;
  if (t_span_depth == 0) return GPUSLICE_NO_SPAN_OPEN;
  if (--t_span_depth > 0) return GPUSLICE_OK;
  core::RecordLcLatency(rt->ledger_region(), gpuslice::port::MonotonicNanos() - t_span_start_ns);
  if (!rt->latency_critical()) return GPUSLICE_NOT_LATENCY_CRITICAL;
  gi::holder::SpanEnd();
  gi::pacer::ReleaseBestEffort();
  return GPUSLICE_OK;
}

GPUSLICE_EXPORT int gpuslice_hint_begin(void) { return Hold(core::kMaxHoldNs, kHintBeginBoundNs); }

GPUSLICE_EXPORT int gpuslice_hint(unsigned int usec) {
  if (usec == 0) return GPUSLICE_BAD_ARGUMENT;
  const uint64_t ns = static_cast<uint64_t>(usec) * 1000;
  return Hold(ns, (ns < core::kMaxHoldNs ? ns : core::kMaxHoldNs) + kHintSlackNs);
}

GPUSLICE_EXPORT int gpuslice_hint_end(void) {
  gi::VgpuRuntime* rt = gi::VgpuRuntime::Get();
  if (rt == nullptr) return GPUSLICE_NOT_IN_VGPU;
  if (!rt->latency_critical()) return GPUSLICE_NOT_LATENCY_CRITICAL;
  // An open span on this thread keeps holding.
  if (t_span_depth == 0) {
    gi::holder::Release();
    gi::pacer::ReleaseBestEffort();
  }
  return GPUSLICE_OK;
}

GPUSLICE_EXPORT int gpuslice_task_record(const char* level, unsigned long long latency_ns, int flags) {
  gi::VgpuRuntime* rt = gi::VgpuRuntime::Get();
  if (rt == nullptr) return GPUSLICE_NOT_IN_VGPU;
  if (level == nullptr || (flags & ~(GPUSLICE_TASK_FAILED | GPUSLICE_TASK_SLO_MISS)) != 0) {
    return GPUSLICE_BAD_ARGUMENT;
  }
  // One byte past the longest name, so a longer one is refused, not cut.
  const std::string_view name(level, strnlen(level, core::kTaskLevelNameBytes));
  static_assert(core::kTaskFailed == GPUSLICE_TASK_FAILED && core::kTaskSloMiss == GPUSLICE_TASK_SLO_MISS);
  return core::RecordTask(rt->ledger_region(), name, latency_ns, static_cast<uint32_t>(flags)) ? GPUSLICE_OK
                                                                                               : GPUSLICE_BAD_ARGUMENT;
}
