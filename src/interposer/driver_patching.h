// driver_patching.h — how this library sees the driver's channel groups:
// the real driver's ioctl imports are patched to go through rm's hook
// (rm/ioctl_hook.h), once at the first cuInit of a process in a vGPU, and
// the libraries the driver loads later (as it starts contexts) are patched
// too, 100 ms and 2 s after the compute thread starts.
//
// PatchDriver: the first cuInit or context creation (hooks_context.cc),
// any thread; idempotent. LibraryWatch: the compute thread only. Both are
// slow paths: they read ELF tables and may allocate.
#ifndef GPUSLICE_INTERPOSER_DRIVER_PATCHING_H_
#define GPUSLICE_INTERPOSER_DRIVER_PATCHING_H_

#include <cstdint>

namespace gpuslice::interposer {

// Patches the real driver's ioctl imports so TSGs are seen. Idempotent.
void PatchDriver();

// The library's exported ioctl, what the patched imports call
// (hooks_ioctl.cc).
const void* ExportedIoctl();

// The compute thread's schedule for libraries loaded after the driver.
class LibraryWatch {
 public:
  explicit LibraryWatch(uint64_t started_ms) : started_ms_(started_ms) {}
  // Patches what was loaded since, at 100 ms and at 2 s after the start
  // (then also logs, at info, whether the hook sees the driver's ioctls).
  void Tick(uint64_t now_ms);

 private:
  uint64_t started_ms_;
  bool watched_early_ = false;
  bool watched_late_ = false;
};

}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_DRIVER_PATCHING_H_
