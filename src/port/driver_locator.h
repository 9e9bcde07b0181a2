// driver_locator.h — finding the real NVIDIA libraries by absolute path.
//
// When gpuslice's library is itself named libcuda.so.1 and found first on
// LD_LIBRARY_PATH, dlopen("libcuda.so.1") would find us again; so the real
// driver is always opened by absolute path. The order:
//   1. $GPUSLICE_REAL_DRIVER (set by `gpuslice run`; tests point it at the fake)
//   2. the directories NVIDIA's installers and container toolkits use
// Any candidate that is the calling library itself (same device and inode) is
// skipped. Thread-safe; makes syscalls (stat): slow paths only.
#ifndef GPUSLICE_PORT_DRIVER_LOCATOR_H_
#define GPUSLICE_PORT_DRIVER_LOCATOR_H_

#include <string>

namespace gpuslice::port {

// Returns the absolute path of the real libcuda.so.1, or "" when none exists.
// `self` is any address inside the caller's own shared object (or nullptr).
std::string LocateRealCudaDriver(const void* self);
// The same for libnvidia-ml.so.1 ($GPUSLICE_REAL_NVML first).
std::string LocateRealNvml(const void* self);

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_DRIVER_LOCATOR_H_
