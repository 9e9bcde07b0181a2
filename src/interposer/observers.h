// observers.h — the hook points for optional observers: work that must learn
// of launches, of the compute thread's tick, of context teardown and of
// fork, without the paths that call them knowing who listens.
//
// The one observer today is the experimental holder (holder.h), built only
// with -DGPUSLICE_EXPERIMENTAL_HOLDER=ON. This header and the task API
// (task_api.cc, which is the holder's user-facing side) are the only places
// that name it. Without the option every function here is an empty inline,
// so nothing of the holder is compiled and nothing is left on the launch
// path, not even a branch. (A latency-critical process's activity,
// lc_activity.h, is not an observer: pacer::Paced notes it itself.)
//
// Callers:
//   - AfterEveryLaunch: pacer::Paced (pacer.h), on the application's
//     launching thread, after each kernel or graph launch is submitted;
//     inline, no lock, no allocation, no syscall (each observer's header
//     says its cost);
//   - OnComputeTick: the compute thread (compute_thread.cc), every tick;
//   - OnContextGone/OnDeviceGone: the teardown hooks (hooks_launch.cc,
//     hooks_memory.cc), before the driver's call;
//   - BeforeContextSynchronize: cuCtxSynchronize (hooks_sync.cc), before the
//     driver's call: a synchronising application must not wait for a
//     holder's bound;
//   - AfterFork: the compute thread's fork handler, in the child.
#ifndef GPUSLICE_INTERPOSER_OBSERVERS_H_
#define GPUSLICE_INTERPOSER_OBSERVERS_H_

#include <cuda.h>

#if GPUSLICE_EXPERIMENTAL_HOLDER
#include "interposer/holder.h"
#endif

namespace gpuslice::interposer {

#if GPUSLICE_EXPERIMENTAL_HOLDER

inline void AfterEveryLaunch() { holder::AfterLaunch(); }
// `latency_critical`: this vGPU is; `paced`: some device of this process is
// (another vGPU shares its GPU).
inline void OnComputeTick(bool latency_critical, bool paced) { holder::Tick(latency_critical, paced); }
inline void OnContextGone(CUcontext context) { holder::ForgetContext(context); }
inline void OnDeviceGone(CUdevice device) { holder::ForgetDevice(device); }
inline void BeforeContextSynchronize() { holder::Release(); }
inline void ObserversAfterFork() { holder::AfterFork(); }

#else  // !GPUSLICE_EXPERIMENTAL_HOLDER: no observer.

inline void AfterEveryLaunch() {}
inline void OnComputeTick(bool, bool) {}
inline void OnContextGone(CUcontext) {}
inline void OnDeviceGone(CUdevice) {}
inline void BeforeContextSynchronize() {}
inline void ObserversAfterFork() {}

#endif  // GPUSLICE_EXPERIMENTAL_HOLDER

}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_OBSERVERS_H_
