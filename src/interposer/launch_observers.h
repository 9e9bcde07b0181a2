// launch_observers.h — the launch path's hook point for optional observers:
// work that must learn of every kernel or graph launch, paced or not, once
// it has been submitted, without gating it. pacer::Paced (pacer.h) calls
// AfterEveryLaunch() after each launch; it is the only way the launch path
// reaches such an observer.
//
// The one observer today is the experimental holder (holder.h), built only
// with -DGPUSLICE_EXPERIMENTAL_HOLDER=ON: it releases a hint's holder after
// the next launch. Without the option AfterEveryLaunch() is empty and the
// holder is not even named, so nothing of it is on the launch path. (A
// latency-critical process's activity, lc_activity.h, is noted by Paced
// itself on its unpaced branch, the only one an LC process takes.)
//
// Called from the application's launching thread on every launch: inline;
// no lock, no allocation, no syscall (each observer's header says its cost).
#ifndef GPUSLICE_INTERPOSER_LAUNCH_OBSERVERS_H_
#define GPUSLICE_INTERPOSER_LAUNCH_OBSERVERS_H_

#if GPUSLICE_EXPERIMENTAL_HOLDER
#include "interposer/holder.h"
#endif

namespace gpuslice::interposer {

inline void AfterEveryLaunch() {
#if GPUSLICE_EXPERIMENTAL_HOLDER
  holder::AfterLaunch();
#endif
}

}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_LAUNCH_OBSERVERS_H_
