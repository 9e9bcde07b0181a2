// contexts.h — the fake's contexts: a context is the device it was made for
// and the memory it owns. Each thread has its own stack of current contexts,
// as with the real driver; the top is the current one.
//
// Destroying a context, resetting a primary context, or releasing its last
// reference frees the plain, pitched and managed allocations and the arrays
// made in it, as the real driver does; pools, graph pools and VMM memory
// belong to the device and stay. The primary context's handle itself lives
// as long as the process (a simplification: it stays usable after a reset).
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
