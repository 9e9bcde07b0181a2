// hooks_graphs.cc — memory that CUDA graphs allocate when they run.
//
// A graph's memory nodes (cuGraphAddMemAllocNode, or cuMemAllocAsync captured
// from a stream) allocate nothing until the graph is launched, then take
// memory from the device's graph pool, which keeps it reserved until
// cuDeviceGraphMemTrim. So:
//   instantiate  sum the graph's allocation nodes, remember it per executable
//                (every entry point: legacy, _v2, WithFlags, WithParams)
//   launch       charge what the graph pool may grow by (the sum, less what
//                the pool holds unused) first, refusing with OUT_OF_MEMORY if
//                it does not fit; launch; settle to the pool's real
//                reservation, which is what stays charged
//   trim         settle again
// Graphs without memory nodes cost one relaxed load per launch. Launches
// also pass the GPU-turn gate (pacer.h).
#include <cuda.h>

#include <atomic>
#include <vector>

#include "interposer/charge.h"
#include "interposer/driver_table.h"
#include "interposer/export.h"
#include "interposer/pacer.h"
#include "interposer/pool_charge.h"
#include "interposer/vgpu_runtime.h"
#include "port/log.h"

// cuda.h declares the per-thread-stream variants only when
// CUDA_API_PER_THREAD_DEFAULT_STREAM renames the plain ones, and the legacy
// instantiations (CUDA 10 and 11, which the driver still exports and older
// programs still call) only under __CUDA_API_VERSION_INTERNAL: it maps
// cuGraphInstantiate to WithFlags.
#undef cuGraphInstantiate
extern "C" {
decltype(cuGraphLaunch) cuGraphLaunch_ptsz;
decltype(cuGraphUpload) cuGraphUpload_ptsz;
decltype(cuGraphInstantiateWithParams) cuGraphInstantiateWithParams_ptsz;
CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log, size_t size);
CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log,
                                       size_t size);
}

namespace gpuslice::interposer {
namespace {

// Set once any graph with memory nodes exists, so launches of all other
// graphs skip the table lookup.
std::atomic<bool> g_graphs_allocate{false};

// What the graph's memory-allocation nodes take per launch, and the device
// they take it on (their pool's location; the first node's, should a graph
// allocate on several).
uint64_t GraphAllocationBytes(CUgraph graph, CUdevice* device) {
  size_t count = 0;
  if (GPUSLICE_REAL(cuGraphGetNodes)(graph, nullptr, &count) != CUDA_SUCCESS || count == 0) return 0;
  std::vector<CUgraphNode> nodes(count);  // instantiation is a slow path
  if (GPUSLICE_REAL(cuGraphGetNodes)(graph, nodes.data(), &count) != CUDA_SUCCESS) return 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < count; ++i) {
    CUgraphNodeType type;
    if (GPUSLICE_REAL(cuGraphNodeGetType)(nodes[i], &type) != CUDA_SUCCESS || type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      continue;
    }
    CUDA_MEM_ALLOC_NODE_PARAMS params{};
    if (GPUSLICE_REAL(cuGraphMemAllocNodeGetParams)(nodes[i], &params) != CUDA_SUCCESS) continue;
    if (bytes == 0) *device = params.poolProps.location.id;
    bytes += params.bytesize;
  }
  return bytes;
}

// False when the exec allocates memory but cannot be recorded (the table
// is full): its launches would then go uncharged, so the caller destroys it
// and refuses the instantiation.
bool RememberExec(CUgraphExec exec, CUgraph graph) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr) return true;
  CUdevice dev = 0;
  const uint64_t bytes = GraphAllocationBytes(graph, &dev);
  if (bytes == 0) return true;
  // The device rides in `device` (the ledger slot is derived at launch).
  if (!rt->allocations().Insert(reinterpret_cast<uint64_t>(exec), AllocationKind::kGraphExec,
                                AllocationRecord{bytes, static_cast<uint32_t>(dev), 0})) {
    port::Log(port::LogLevel::kWarn,
              "refused a graph instantiation that allocates %llu bytes: this process's allocation table is full "
              "(too many live objects for gpuslice to track); free some first",
              static_cast<unsigned long long>(bytes));
    return false;
  }
  g_graphs_allocate.store(true, std::memory_order_release);
  return true;
}

template <typename RealLaunch>
CUresult LaunchCharged(CUgraphExec exec, CUstream stream, RealLaunch launch) {
  if (!g_graphs_allocate.load(std::memory_order_relaxed)) return launch(exec, stream);
  VgpuRuntime* rt = VgpuRuntime::Get();
  AllocationRecord rec;
  if (rt == nullptr || !rt->allocations().Find(reinterpret_cast<uint64_t>(exec), AllocationKind::kGraphExec, &rec)) {
    return launch(exec, stream);
  }
  const int device = static_cast<int>(rec.device);
  const int slot = rt->MemorySlot(device);
  if (slot == VgpuRuntime::kOutside) return CUDA_ERROR_OUT_OF_MEMORY;
  if (slot == VgpuRuntime::kUncapped) return launch(exec, stream);
  PoolAccount* account = rt->pools().FindOrAdd(GraphPoolKey(device), slot);
  if (account == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;  // every pool account taken: untracked would escape
  // What the pool holds but does not use may serve this launch (a graph that
  // frees its memory leaves it reserved for the next launch): charge only
  // what the pool may have to grow by.
  SettlePool(*rt, *account, 0, /*may_reclaim=*/false);
  cuuint64_t used = 0, reserved = 0;
  GPUSLICE_REAL(cuDeviceGetGraphMemAttribute)(device, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used);
  GPUSLICE_REAL(cuDeviceGetGraphMemAttribute)(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved);
  const uint64_t growth = used + rec.bytes > reserved ? used + rec.bytes - reserved : 0;
  if (growth > 0 && !ChargeOrRefuse(*rt, slot, growth)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult r = launch(exec, stream);
  SettlePool(*rt, *account, growth, /*may_reclaim=*/false);
  return r;
}

template <typename RealInstantiate, typename... Args>
CUresult InstantiateRemembered(CUgraphExec* exec, CUgraph graph, RealInstantiate instantiate, Args... args) {
  const CUresult r = instantiate(exec, graph, args...);
  if (r == CUDA_SUCCESS && exec != nullptr && !RememberExec(*exec, graph)) {
    GPUSLICE_REAL(cuGraphExecDestroy)(*exec);
    *exec = nullptr;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

}  // namespace
}  // namespace gpuslice::interposer

namespace gi = gpuslice::interposer;
using gpuslice::interposer::AllocationKind;
using gpuslice::interposer::AllocationRecord;
using gpuslice::interposer::VgpuRuntime;

GPUSLICE_EXPORT CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log,
                                            size_t size) {
  return gi::InstantiateRemembered(exec, graph, GPUSLICE_REAL(cuGraphInstantiate), error_node, log, size);
}

GPUSLICE_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log,
                                               size_t size) {
  return gi::InstantiateRemembered(exec, graph, GPUSLICE_REAL(cuGraphInstantiate_v2), error_node, log, size);
}

GPUSLICE_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  return gi::InstantiateRemembered(exec, graph, GPUSLICE_REAL(cuGraphInstantiateWithFlags), flags);
}

GPUSLICE_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return gi::InstantiateRemembered(exec, graph, GPUSLICE_REAL(cuGraphInstantiateWithParams), params);
}

GPUSLICE_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return gi::InstantiateRemembered(exec, graph, GPUSLICE_REAL(cuGraphInstantiateWithParams_ptsz), params);
}

GPUSLICE_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt != nullptr) {
    AllocationRecord rec;
    rt->allocations().Erase(reinterpret_cast<uint64_t>(exec), AllocationKind::kGraphExec, &rec);
  }
  return GPUSLICE_REAL(cuGraphExecDestroy)(exec);
}

// A graph launch is one turn-paced launch (pacer.h), whatever it holds.
GPUSLICE_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  return gi::pacer::Paced(stream, false,
                          [&] { return gi::LaunchCharged(exec, stream, GPUSLICE_REAL(cuGraphLaunch)); });
}

GPUSLICE_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  return gi::pacer::Paced(stream, true,
                          [&] { return gi::LaunchCharged(exec, stream, GPUSLICE_REAL(cuGraphLaunch_ptsz)); });
}

GPUSLICE_EXPORT CUresult cuGraphUpload(CUgraphExec exec, CUstream stream) {
  return gi::LaunchCharged(exec, stream, GPUSLICE_REAL(cuGraphUpload));
}

GPUSLICE_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream stream) {
  return gi::LaunchCharged(exec, stream, GPUSLICE_REAL(cuGraphUpload_ptsz));
}

GPUSLICE_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device) {
  const CUresult r = GPUSLICE_REAL(cuDeviceGraphMemTrim)(device);
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (r == CUDA_SUCCESS && rt != nullptr) {
    if (gi::PoolAccount* a = rt->pools().Find(gi::GraphPoolKey(device))) gi::SettlePool(*rt, *a, 0, false);
  }
  return r;
}
