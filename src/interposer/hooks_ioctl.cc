// hooks_ioctl.cc — the library's exported `ioctl`.
//
// In LD_PRELOAD mode this definition comes first in the process's lookup
// order, so every ioctl the real libcuda makes reaches it, however libcuda
// found the function. On driver 580 that mattered: patching libcuda's own
// import (rm/got_patch.h, still done for the LD_LIBRARY_PATH mode) saw its
// RM allocations but none of its channel groups. The call is forwarded to
// the next ioctl in lookup order (libc's) untouched, and then observed
// (rm/ioctl_hook.h); errno is preserved. The one exception is the RM
// controls that reschedule the process's channel groups, rewritten or
// refused there (the driver's told apart by the return address).
//
// Every ioctl of the process passes here: the added cost is one atomic load,
// an indirect call and two compares for all but NV_ESC_RM_ALLOC/FREE and
// RM controls (one more load for those). No lock, no allocation once the
// next ioctl is known (resolved on the first call).
#include <dlfcn.h>

#include <atomic>
#include <cstdarg>

#include "interposer/driver_patching.h"
#include "interposer/export.h"
#include "interposer/real_dlsym.h"
#include "rm/ioctl_hook.h"

namespace {

std::atomic<void*> g_next_ioctl{nullptr};

gpuslice::rm::IoctlFn NextIoctl() {
  void* next = g_next_ioctl.load(std::memory_order_acquire);
  if (__builtin_expect(next == nullptr, 0)) {
    next = gpuslice::interposer::RealDlsym(RTLD_NEXT, "ioctl");
    g_next_ioctl.store(next, std::memory_order_release);
  }
  return reinterpret_cast<gpuslice::rm::IoctlFn>(next);
}

}  // namespace

// The definition, under a hidden name: `&ioctl` taken inside this library
// would be whichever ioctl comes first in the process (libc's, in the
// LD_LIBRARY_PATH mode), not this one.
extern "C" __attribute__((visibility("hidden"))) int gpuslice_ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return gpuslice::rm::ObservedIoctl(NextIoctl(), fd, request, arg, __builtin_return_address(0));
}

GPUSLICE_EXPORT int ioctl(int fd, unsigned long request, ...) __attribute__((alias("gpuslice_ioctl")));

namespace gpuslice::interposer {
const void* ExportedIoctl() { return reinterpret_cast<const void*>(&gpuslice_ioctl); }
}  // namespace gpuslice::interposer
