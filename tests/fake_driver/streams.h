// streams.h — the fake's streams and events. Work completes the moment it is
// submitted, so a stream is only its device and its capture state; the
// synchronising calls (cuStreamSynchronize, cuEventSynchronize) matter for
// what they do to memory pools (pools.h). With FAKE_KERNEL_US (launch.h)
// kernels take time on one timeline per process: an event completes, and
// those calls return, once the work launched before it is done, and
// cuStreamQuery says CUDA_ERROR_NOT_READY until all of it is.
//
// Capture: between cuStreamBeginCapture and cuStreamEndCapture, a stream
// records into a graph (graphs.h); stream-ordered allocations, frees and
// kernel launches on it become graph nodes instead of running.
//
// Thread-safe through Locked (state.h); creating streams and events
// allocates.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_STREAMS_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_STREAMS_H_

#include <cuda.h>

#include "state.h"

namespace fake_cuda {

// Device that work on `stream` runs on: a created stream's own device, or the
// current context's for the NULL, legacy and per-thread streams.
// CUDA_ERROR_INVALID_HANDLE for an unknown stream.
CUresult StreamDevice(const Locked&, CUstream stream, int* device);

// The graph `stream` is capturing into, or nullptr when it is not capturing.
CUgraph CapturingGraph(const Locked&, CUstream stream);

}  // namespace fake_cuda

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_STREAMS_H_
