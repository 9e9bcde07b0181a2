// contexts.h — the fake's contexts: a context is only the device it was made
// for. Each thread has its own stack of current contexts, as with the real
// driver; the top is the current one.
//
// Allocations are not owned by contexts here: destroying a context or
// resetting a primary context frees nothing (a simplification; the real
// driver frees the context's memory).
//
// Thread-safe through Locked (state.h); creating a context allocates.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_CONTEXTS_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_CONTEXTS_H_

#include <cuda.h>

#include "state.h"

namespace fake_cuda {

// Device of the calling thread's current context; CUDA_ERROR_INVALID_CONTEXT
// when the thread has none (or it was destroyed).
CUresult CurrentDevice(const Locked&, int* device);

// The calling thread's current context, or nullptr.
CUcontext CurrentContext(const Locked&);

}  // namespace fake_cuda

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_CONTEXTS_H_
