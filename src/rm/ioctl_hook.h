// ioctl_hook.h — watches the real CUDA driver's RM ioctls.
//
// Two ways in, one observer:
//   - InstallIoctlHook() patches the real libcuda's imports of `ioctl`
//     (got_patch.h), which works in both load modes;
//   - in LD_PRELOAD mode the library also exports `ioctl`
//     (interposer/hooks_ioctl.cc), which sees every ioctl libcuda makes
//     however it looks the function up (measured on driver 580: the GOT
//     patch alone saw libcuda's RM allocations but not its channel groups).
// Either way the original ioctl runs first, untouched, and the registry
// (tsg_registry.h) then learns of channel groups allocated and freed. The
// exception: the RM controls that change how the process's channel groups
// are scheduled, which is gpuslice's to set. A SET_TIMESLICE on one of its
// compute groups passes with the vGPU's slice (SliceAdvisor, below) in
// place of the caller's, whoever the caller; SET_INTERLEAVE_LEVEL,
// MAKE_REALTIME and a slice for any other group, made by the application
// rather than the driver's own libraries, are answered
// NV_ERR_INSUFFICIENT_PERMISSIONS without reaching the driver. (A process
// that makes the system call itself is not seen here: docs/design.md,
// "Threat model".) DriverIoctl() calls the
// original directly, for gpuslice's own controls, so they are never observed
// as libcuda's.
//
// Called by the interposer: InstallIoctlHook from the first cuInit (before
// any context exists), ScopedDeviceHint around context creation. HookedIoctl
// runs on libcuda's threads: no lock, no allocation; it preserves errno.
#ifndef GPUSLICE_RM_IOCTL_HOOK_H_
#define GPUSLICE_RM_IOCTL_HOOK_H_

#include <cstdint>

#include "rm/rm_ioctl.h"
#include "rm/tsg_registry.h"

namespace gpuslice::rm {

using IoctlFn = int (*)(int, unsigned long, ...);

// Patches the object behind the dlopen `handle`; idempotent. Returns false
// (after logging why) when libcuda's ioctls cannot be watched: timeslices
// then stay at the driver's defaults. `resolve` as in PatchImport.
// `exported_hook` is the library's own exported ioctl (LD_PRELOAD mode), to
// which libcuda's import may already be bound; such a slot already reports
// here and is left as it is.
bool InstallIoctlHook(void* handle, void* (*resolve)(const char*), const void* exported_hook);

// The body of an exported ioctl: calls `next` (the ioctl after ours in the
// lookup order; the raw system call when null), then observes the result.
// `caller` is the exported ioctl's return address: a scheduling control
// (above) from outside the NVIDIA driver's libraries is refused.
int ObservedIoctl(IoctlFn next, int fd, unsigned long request, void* arg, const void* caller);
bool IoctlHookInstalled();

// Also patches every other loaded NVIDIA user-space library (libcuda*,
// libnvidia-*) that imports ioctl, in case the driver makes RM calls from a
// helper library it loaded itself. Idempotent per object; returns the number
// of slots newly patched. Call after InstallIoctlHook succeeded.
int WatchNvidiaLibraries(void* (*resolve)(const char*));

// What the driver's own SET_TIMESLICE on a compute channel group of CUDA
// device `device` (-1: unknown) should pass on instead of its value, or 0 to
// let it stand. libcuda 580 sets its new compute group's slice while it
// makes a context, after gpuslice may have set it (docs/gpu-facts.md);
// passed on unchanged it would run at the driver's default until the next
// read-back. Set once by the interposer before any context exists; called
// on the thread making the context. No lock, no allocation.
using SliceAdvisor = uint64_t (*)(int device);
void SetSliceAdvisor(SliceAdvisor advisor);

// Called on the driver's thread, inside its ioctl, right after a channel
// group was made or freed: the interposer publishes the groups for the
// daemon's slice audit at once (interposer/timeslice_applier.h), so that a
// tenant cannot stop that by stopping the compute thread first. Set once
// by the interposer; no lock, no allocation.
using GroupsChanged = void (*)();
void SetGroupsObserver(GroupsChanged observer);

// The channel groups seen so far.
TsgRegistry& Registry();

// The ioctl libcuda would have called; valid once installed.
RmIoctl& DriverIoctl();

// What the hook has seen, for diagnostics: every ioctl, and the RM
// allocations among them (any class).
struct IoctlHookStats {
  uint64_t ioctls;
  uint64_t rm_allocs;
};
IoctlHookStats HookStats();

// While alive, channel groups allocated by this thread are attributed to CUDA
// device `device` (the context being created).
class ScopedDeviceHint {
 public:
  explicit ScopedDeviceHint(int device);
  ~ScopedDeviceHint();
  ScopedDeviceHint(const ScopedDeviceHint&) = delete;
  ScopedDeviceHint& operator=(const ScopedDeviceHint&) = delete;

 private:
  int previous_;
};

}  // namespace gpuslice::rm

#endif  // GPUSLICE_RM_IOCTL_HOOK_H_
