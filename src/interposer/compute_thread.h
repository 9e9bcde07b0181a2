// compute_thread.h — keeps this process's channel groups (TSGs) at the
// timeslice its vGPU's limits say.
//
// One background thread per process, started lazily by the first context
// creation inside a vGPU (hooks_context.cc), never at load time. Every 20 ms
// it reads two words: the limits' `generation` (bumped by ApplyNodeSchedule
// when any vGPU on our GPUs comes, goes or is resized) and the TSG registry's
// epoch (bumped when libcuda allocates or frees a TSG). Only when either
// moved does it act: each compute TSG gets its device's `timeslice_us`
// through an RM control (rm/timeslice_control.h), so a change reaches every
// process within ~20 ms plus one control per TSG, and new TSGs are covered
// when they appear. A slice of 0 restores the driver's default, read when
// the TSG was first seen. Nothing happens per launch.
//
// Successes and refusals are counted in the vGPU ledger
// (timeslice_applications / timeslice_failures); the first refusal is logged
// with the driver's status, and the process runs on with the driver's
// timeslices (fail open, loudly).
//
// StartComputeThread is thread-safe and idempotent; it allocates the thread
// (slow path). The thread itself blocks in nanosleep and RM ioctls only.
#ifndef GPUSLICE_INTERPOSER_COMPUTE_THREAD_H_
#define GPUSLICE_INTERPOSER_COMPUTE_THREAD_H_

namespace gpuslice::interposer {

class VgpuRuntime;

// Patches the real driver's ioctl imports so TSGs are seen (first cuInit of
// a process in a vGPU). Idempotent.
void PrepareCompute(VgpuRuntime* runtime);

// Starts the thread if the process is in a vGPU and it is not running yet.
void StartComputeThread(VgpuRuntime* runtime);

// The library's exported ioctl (hooks_ioctl.cc).
const void* ExportedIoctl();

// One pass of the thread's work, for the thread and for tests: applies the
// limits to every known compute TSG if anything changed since the last pass.
void ApplyTimeslicesOnce(VgpuRuntime* runtime);

}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_COMPUTE_THREAD_H_
