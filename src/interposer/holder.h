// holder.h — EXPERIMENTAL, built only with -DGPUSLICE_EXPERIMENTAL_HOLDER=ON:
// a latency-critical process keeps its channel group on the GPU with
// pre-preemption hints and request residency.
//
// The GPU round-robins between busy channel groups (TSGs); a best-effort
// (BE) TSG beside a latency-critical (LC) one keeps its slice (50 µs), and
// each switch costs ~180 µs (docs/gpu-facts.md). An LC kernel that arrives while
// the BE runs therefore waits slice + switch. A *holder* is a 1-thread
// kernel (holder_kernel.ptx) that this library launches in the LC's own
// context, on a stream of its own: while it runs, the LC TSG is busy, so the
// GPU switches to it and, with the LC's long slice, stays there.
//
//   - Hint (pre-preemption), GPUSLICE_LC_HOLDER=hint:
//     gpuslice_hint_begin()/gpuslice_hint(usec) launch a holder while the
//     request is still being prepared, so the switch happens during the
//     preparation. The process's next kernel or graph launch releases it,
//     *after* that launch is submitted.
//   - Residency, GPUSLICE_LC_HOLDER=span (during request spans) or =always
//     (whenever this LC vGPU shares its GPU): every launch makes sure a
//     holder covers the next linger (GPUSLICE_LC_LINGER_US, 2000), so the
//     gaps between an eager request's kernels do not hand the GPU back to
//     BE. span_end releases it. Values combine: "hint,span".
//
// Why it is an experiment: on an H100 every way of holding measured slower
// than not holding (docs/benchmarks.md, "Pre-preemption and residency"). So
// it is not built by default, and even when built it is off unless
// GPUSLICE_LC_HOLDER asks. The mechanism stays, bounded and tested, for
// other GPUs and drivers to be measured with (bench/gpu/compute, group
// `holderexp`).
//
// Without the build option every function below is an empty inline and
// nothing of the holder is compiled. Only the task API (task_api.cc) and the
// observer hook points (observers.h: launches, the compute tick, teardown,
// fork, cuCtxSynchronize) name it; the launch path reaches it only through
// observers.h.
//
// Why release *after* submitting (docs/gpu-facts.md): a holder released only once
// the LC's kernel had started never saw it start (the TSG does not serve its
// other channels while one waits behind a spinning kernel), and a holder
// that exits before the LC's kernel is queued leaves the TSG idle, so the GPU
// switches away again. Every holder also exits by itself once its bound has
// passed (%globaltimer), so a release that never comes costs at most the
// bound and never hangs the application; cuCtxSynchronize releases holders
// first, so a synchronising application does not wait for one.
//
// Contract of the kernel, which the fake driver models for CI:
//   gpuslice_holder(const volatile uint32_t* release_word,
//                   uint32_t armed_value, uint64_t bound_ns)
// exits when *release_word != armed_value or bound_ns after it started.
//
// Hot path: AfterLaunch() is one relaxed load unless a hint or residency is
// active. Then it adds one store to host memory (a release) or, at most once
// per half linger, one real cuLaunchKernel; no lock, no allocation, no
// syscall. The first holder in a context loads the PTX module (JIT, a few ms:
// a slow path, logged).
#ifndef GPUSLICE_INTERPOSER_HOLDER_H_
#define GPUSLICE_INTERPOSER_HOLDER_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>

namespace gpuslice::interposer::holder {

#if GPUSLICE_EXPERIMENTAL_HOLDER

// Bits of g_watch: what the launch hooks must do after each launch.
inline constexpr uint32_t kReleaseOnLaunch = 1;  // a hint's holder waits for the next launch
inline constexpr uint32_t kResidencySpan = 2;    // a request span is open
inline constexpr uint32_t kResidencyAlways = 4;  // GPUSLICE_LC_HOLDER=always, GPU shared
extern std::atomic<uint32_t> g_watch;

// Pre-preemption: a holder in the calling thread's current context, exiting
// at the next launch, at Release(), or after bound_ns.
// Does nothing unless GPUSLICE_LC_HOLDER asks for hints, a capture is open,
// or the thread has no context.
void Hint(uint64_t bound_ns);
// Residency for a request span, process-wide and nesting across threads.
void SpanBegin();
void SpanEnd();
// Every holder of this process exits (they poll every ~0.3 µs).
void Release();

void OnLaunch();
inline void AfterLaunch() {
  if (__builtin_expect(g_watch.load(std::memory_order_relaxed) != 0, 0)) OnLaunch();
}

// The compute thread's periodic check: always-residency applies while this
// vGPU is latency-critical and another vGPU is on its GPU.
void Tick(bool latency_critical, bool gpu_shared);

// A context or device is going away: release its holders, forget its state.
void ForgetContext(CUcontext context);
void ForgetDevice(CUdevice device);
// In a forked child: the parent's CUDA state is not valid.
void AfterFork();

#else  // !GPUSLICE_EXPERIMENTAL_HOLDER: not built; every call compiles to nothing.

inline void Hint(uint64_t) {}
inline void SpanBegin() {}
inline void SpanEnd() {}
inline void Release() {}
inline void Tick(bool, bool) {}
inline void ForgetContext(CUcontext) {}
inline void ForgetDevice(CUdevice) {}
inline void AfterFork() {}

#endif  // GPUSLICE_EXPERIMENTAL_HOLDER

}  // namespace gpuslice::interposer::holder

#endif  // GPUSLICE_INTERPOSER_HOLDER_H_
