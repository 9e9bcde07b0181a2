// compute_thread.h — this process's background thread for compute, and its
// schedule.
//
// One thread per process, started lazily by the first context creation
// inside a vGPU (hooks_context.cc), never at load time. Each tick (1 ms while
// the process is paced, 250 µs while it holds a GPU turn, else 20 ms, and
// 20 ms while paced with nothing queued, cut short by its next launch: the
// pacer says) it runs its jobs in order, each in its own file:
//   - GPU turns (pacer.h): heartbeat, whether to pace, drains, hand-over;
//   - a latency-critical process's activity (lc_activity.h);
//   - the timeslices (timeslice_applier.h), one comparison unless something
//     changed or a read-back is due;
//   - the optional observers (observers.h; none unless built with
//     GPUSLICE_EXPERIMENTAL_HOLDER);
//   - libraries the driver loaded since it started, patched so their
//     channel groups are seen too (driver_patching.h), 100 ms and 2 s in.
// This file only starts the thread, runs the jobs and handles fork. Nothing
// here runs per launch.
//
// PrepareCompute and StartComputeThread are thread-safe and idempotent;
// they take process-local mutexes, and StartComputeThread allocates the
// thread (slow path). The thread blocks in nanosleep, a futex wait (pacer.h)
// and RM ioctls only. In a forked child (which has no thread) everything
// starts afresh with the child's own first context.
#ifndef GPUSLICE_INTERPOSER_COMPUTE_THREAD_H_
#define GPUSLICE_INTERPOSER_COMPUTE_THREAD_H_

namespace gpuslice::interposer {

class VgpuRuntime;

// Patches the real driver's ioctl imports so TSGs are seen (first cuInit of
// a process in a vGPU; driver_patching.h). Idempotent.
void PrepareCompute(VgpuRuntime* runtime);

// Starts the thread if the process is in a vGPU and it is not running yet.
void StartComputeThread(VgpuRuntime* runtime);

}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_COMPUTE_THREAD_H_
