// fake_rm_client.h — makes the fake CUDA driver allocate channel groups the
// way libcuda does, so gpuslice's RM layer can be tested end to end in CI.
//
// Compiled into the fake libcuda.so.1 (tests/fake_driver). When a context
// is created, it allocates one compute and three copy channel groups
// (KEPLER_CHANNEL_GROUP_A, engine types 1, 11, 12, 13, as the probe saw on
// an H200) with NV_ESC_RM_ALLOC ioctls on an RM control descriptor, and frees
// them with NV_ESC_RM_FREE when the context is destroyed. The ioctls go
// through the fake driver's own dynamic `ioctl` import, the import gpuslice
// patches in the real libcuda.
//
// With FAKE_RM_DRIVER_SLICE_US set, it then sets the compute group's slice
// to that value itself, as libcuda 580 does while it makes a context.
//
// Only when the fake RM device (libfake_rm.so) is preloaded: without it
// there is nothing to talk to and these calls do nothing. Called with the
// fake driver's lock held; allocates.
#ifndef GPUSLICE_TESTS_RM_FAKE_RM_CLIENT_H_
#define GPUSLICE_TESTS_RM_FAKE_RM_CLIENT_H_

#include <cstdint>

namespace fake_rm_client {

// Returns false when the driver's own SET_TIMESLICE (below) was refused:
// libcuda 580 then fails the context with CUDA_ERROR_DEVICES_UNAVAILABLE
// (docs/gpu-facts.md), and so does the fake.
bool ContextCreated(const void* context);
// fake_cuda_rm_handles (fake_cuda_api.h).
int Handles(int* fd, uint32_t* client, uint32_t* compute_group);
void ContextDestroyed(const void* context);

}  // namespace fake_rm_client

#endif  // GPUSLICE_TESTS_RM_FAKE_RM_CLIENT_H_
