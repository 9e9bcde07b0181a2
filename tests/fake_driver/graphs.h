// graphs.h — CUDA graphs, modelled only as far as memory nodes need.
//
// A graph is a list of nodes; only memory alloc/free nodes carry meaning.
// Each alloc node gets a fixed device address when it is added. Graph memory
// comes from a per-device graph pool: launching an executable graph makes
// sure the pool has reserved room for all of its alloc nodes (growing in
// 2 MiB steps, taken from the device's physical memory, OOM when they do not
// fit); allocations freed inside the graph return to the pool at once, the
// others stay live (and `used`) until cuMemFree/cuMemFreeAsync or a free node
// of a later launch. Reserved memory stays until cuDeviceGraphMemTrim.
// Relaunching an exec whose earlier allocations are still live fails with
// CUDA_ERROR_INVALID_VALUE unless it was instantiated with
// CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, as documented.
//
// Thread-safe through Locked (state.h). Allocates.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_GRAPHS_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_GRAPHS_H_

#include <cuda.h>

#include <cstdint>

#include "allocations.h"
#include "state.h"

namespace fake_cuda {

// A new empty graph, owned by the caller (a capturing stream, then the user).
CUgraph NewGraph(const Locked&);
void DestroyGraph(const Locked&, CUgraph graph);

// What cuMemAllocAsync, cuMemFreeAsync and cuLaunchKernel become on a
// capturing stream: nodes of the capture graph. No memory is taken.
CUresult AddCapturedAlloc(const Locked&, CUgraph graph, int device, uint64_t bytes,
                          CUdeviceptr* dptr);
CUresult AddCapturedFree(const Locked&, CUgraph graph, CUdeviceptr dptr);
void AddCapturedKernel(const Locked&, CUgraph graph);

// Returns a live graph allocation (kGraph) to its device's graph pool, as
// cuMemFree / cuMemFreeAsync outside any graph do.
void FreeGraphAllocation(const Locked&, const Allocation& allocation);

}  // namespace fake_cuda

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_GRAPHS_H_
