// timeslice_applier.h — keeps this process's channel groups (TSGs)
// at the timeslice its vGPU's limits say, and makes sure the driver keeps it.
//
// Each pass reads two words: the limits' `generation` (bumped by
// ApplyNodeSchedule when any vGPU on our GPUs comes, goes or is resized) and
// the TSG registry's epoch (bumped when libcuda allocates or frees a TSG),
// plus which of the vGPU's GPUs have a live latency-critical vGPU on their
// pacing board and, under backfill turns, whether this vGPU holds the turn
// there. Only when one of them moved, or a read-back is due, does it act:
// each compute TSG gets its device's `timeslice_us` through an RM control
// (rm/timeslice_control.h) — under backfill turns the holder's or the
// backfiller's slice instead (core/pacing_board.h) — shortened to the slice
// beside an LC while one is live (LC protection, whatever the node schedule
// says), but never under 1000 us while two or more of the vGPU's processes
// have work queued there, or are there in the first second beside a
// new LC, or while the node schedule counts the vGPU as the lone best-effort
// one there but another has work queued (two busy groups at the tiny slice
// starve each other). An LC
// vGPU's long slice is shortened to the shared LC slice (2048 us) while two
// or more of its processes (or contexts of this one) are on the GPU, so they do not hold each
// other off for seconds. Copy-engine TSGs are scheduled on runlists of their own: they get the
// slice beside an LC while one is live, an LC vGPU's get its slice, and
// otherwise they keep the driver's default, untouched until a first need. A
// slice of 0 restores the driver's default, read when the TSG was first
// seen. Every slice set is read back 0.5 s and 2 s later, then every 10 s,
// and set again if the driver put another value in its place.
//
// Successes and refusals are counted in the vGPU ledger
// (timeslice_applications / timeslice_failures); the first refusal is logged
// with the driver's status, and the process runs on with the driver's
// timeslices (fail open, loudly).
//
// Called by the compute thread every tick (compute_thread.h) and by tests.
// A pass takes a process-local mutex (never contended in production) and
// blocks in RM ioctls only; it allocates nothing.
#ifndef GPUSLICE_INTERPOSER_TIMESLICE_APPLIER_H_
#define GPUSLICE_INTERPOSER_TIMESLICE_APPLIER_H_

#include <cstdint>

namespace gpuslice::interposer {

class VgpuRuntime;

// One pass: applies the limits to every known TSG if anything
// changed since the last pass, and reads back the slices that are due.
void ApplyTimeslicesOnce(VgpuRuntime* runtime);

// In a forked child: what was applied to the parent's TSGs means nothing.
void ForgetAppliedTimeslices();

// The rm::SliceAdvisor (rm/ioctl_hook.h): the slice the driver's own
// SET_TIMESLICE on a compute group of CUDA device `device` passes on, so
// that a group never runs the driver's default beside an LC. What the last
// pass wanted for that device (0 where that is the driver's default); before
// any pass, the vGPU's slice beside an LC for a best-effort vGPU, its own
// for an LC one (0 while its limits name no slice). Lock-free; any thread.
uint64_t AdviseComputeSlice(int device);

// The rm::GroupsChanged observer (rm/ioctl_hook.h): publishes this
// process's channel groups in its ledger slot for the daemon's slice audit,
// on the thread that made or freed one. Each pass publishes them again.
// Skipped (the next pass publishes) while a pass is publishing; no
// allocation, no syscall.
void PublishChannelGroupsNow();

}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_TIMESLICE_APPLIER_H_
