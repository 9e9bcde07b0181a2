// arrays.h — what the rest of the fake needs of its CUDA arrays (arrays.cc).
//
// Thread-safe through Locked (state.h).
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_ARRAYS_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_ARRAYS_H_

#include <cuda.h>

#include "state.h"

namespace fake_cuda {

// Destroys every array and mipmapped array `ctx` owns, giving its memory
// back to the device: what destroying or resetting a context does to them.
void FreeContextArrays(const Locked&, CUcontext ctx);

}  // namespace fake_cuda

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_ARRAYS_H_
