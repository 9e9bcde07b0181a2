// launch.h — the fake's kernel-launch counter. A launch does nothing but
// count; graphs add their kernel nodes when launched.
//
// Thread-safe and lock-free; never allocates.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_LAUNCH_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_LAUNCH_H_

#include <cstdint>

namespace fake_cuda {

void AddLaunches(uint64_t count);
uint64_t LaunchCount();
void ResetLaunchCount();

}  // namespace fake_cuda

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_LAUNCH_H_
