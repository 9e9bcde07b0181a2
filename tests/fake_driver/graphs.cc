// Graph entry points (graphs.h): graphs and their nodes, instantiation and
// launch, and the per-device graph memory pool.
#include "graphs.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "fake_gpus.h"
#include "launch.h"
#include "physical.h"
#include "streams.h"

struct CUgraphNode_st {
  CUgraph graph = nullptr;
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  // Memory nodes: the device and address allocated or freed.
  int device = 0;
  CUdeviceptr dptr = 0;
  uint64_t requested_bytes = 0;  // alloc nodes: as asked for
  uint64_t bytes = 0;            // alloc nodes: as committed
  CUmemPoolProps pool_props{};
};

struct CUgraph_st {
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
  // Graphs with memory nodes may have only one executable at a time.
  CUgraphExec exec = nullptr;
};

struct CUgraphExec_st {
  struct Alloc {
    int device;
    CUdeviceptr dptr;
    uint64_t bytes;
    bool freed_in_graph;
  };
  CUgraph graph = nullptr;  // null once the graph is destroyed
  std::vector<Alloc> allocs;
  std::vector<CUdeviceptr> other_frees;  // free nodes of allocations made elsewhere
  uint64_t kernel_nodes = 0;
  bool auto_free_on_launch = false;
};

namespace fake_cuda {
namespace {

// Graph pools are VMM-backed in the real driver; grow them in its 2 MiB steps.
constexpr uint64_t kGraphPoolGranularity = uint64_t{2} << 20;

struct GraphPool {
  uint64_t reserved = 0;
  uint64_t used = 0;
  uint64_t reserved_high = 0;
  uint64_t used_high = 0;
};

struct Graphs {
  std::map<CUgraph, std::unique_ptr<CUgraph_st>> graphs;
  std::map<CUgraphNode, CUgraph> nodes;
  std::map<CUgraphExec, std::unique_ptr<CUgraphExec_st>> execs;
  std::array<GraphPool, fake_gpus::kMaxGpus> pools{};
};

Graphs& GetGraphs(const Locked&) {
  static auto* graphs = new Graphs;
  return *graphs;
}

CUgraph_st* FindGraph(const Locked& locked, CUgraph graph) {
  auto& graphs = GetGraphs(locked).graphs;
  auto it = graphs.find(graph);
  return it == graphs.end() ? nullptr : it->second.get();
}

CUgraphNode_st* FindNode(const Locked& locked, CUgraphNode node) {
  auto& nodes = GetGraphs(locked).nodes;
  return nodes.count(node) != 0 ? node : nullptr;
}

CUgraphExec_st* FindExec(const Locked& locked, CUgraphExec exec) {
  auto& execs = GetGraphs(locked).execs;
  auto it = execs.find(exec);
  return it == execs.end() ? nullptr : it->second.get();
}

CUgraphNode AddNode(const Locked& locked, CUgraph graph, CUgraphNode_st node) {
  node.graph = graph;
  auto owned = std::make_unique<CUgraphNode_st>(node);
  CUgraphNode handle = owned.get();
  graph->nodes.push_back(std::move(owned));
  GetGraphs(locked).nodes.emplace(handle, graph);
  return handle;
}

CUgraphNode AddAllocNode(const Locked& locked, CUgraph graph, const CUmemPoolProps& props,
                         uint64_t bytes) {
  CUgraphNode_st node;
  node.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  node.device = props.location.id;
  node.requested_bytes = bytes;
  node.bytes = RoundUp(bytes, 512);
  node.pool_props = props;
  node.dptr = NewDeviceAddress(locked, node.device, node.bytes, 512);
  return AddNode(locked, graph, node);
}

// A free node may free an allocation of its own graph, or a graph
// allocation that is live now.
bool FreeableInGraph(const Locked& locked, const CUgraph_st& graph, CUdeviceptr dptr) {
  for (const auto& node : graph.nodes) {
    if (node->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && node->dptr == dptr) return true;
  }
  const Allocation* live = FindAllocationAt(locked, dptr);
  return live != nullptr && live->kind == AllocationKind::kGraph;
}

CUresult AddFreeNode(const Locked& locked, CUgraph graph, CUdeviceptr dptr, CUgraphNode* out) {
  if (!FreeableInGraph(locked, *graph, dptr)) return CUDA_ERROR_INVALID_VALUE;
  CUgraphNode_st node;
  node.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  node.dptr = dptr;
  CUgraphNode handle = AddNode(locked, graph, node);
  if (out != nullptr) *out = handle;
  return CUDA_SUCCESS;
}

CUresult CheckDependencies(const CUgraphNode* dependencies, size_t count) {
  return count > 0 && dependencies == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult AddKernelNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* dependencies,
                       size_t count, const void* params) {
  if (out == nullptr || params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckDependencies(dependencies, count); r != CUDA_SUCCESS) return r;
  Locked locked;
  if (FindGraph(locked, graph) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUgraphNode_st node;
  node.type = CU_GRAPH_NODE_TYPE_KERNEL;
  *out = AddNode(locked, graph, node);
  return CUDA_SUCCESS;
}

bool HasMemoryNodes(const CUgraph_st& graph) {
  return std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const auto& node) {
    return node->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || node->type == CU_GRAPH_NODE_TYPE_MEM_FREE;
  });
}

// Grows the graph pools so that each device has room for all of `exec`'s
// allocations at once (the fake does not model reuse within a graph).
// All-or-nothing: on OOM nothing stays taken.
CUresult ReserveForExec(const Locked& locked, const CUgraphExec_st& exec) {
  std::array<uint64_t, fake_gpus::kMaxGpus> need{};
  for (const auto& alloc : exec.allocs) need[alloc.device] += alloc.bytes;
  std::array<uint64_t, fake_gpus::kMaxGpus> grow{};
  auto& pools = GetGraphs(locked).pools;
  for (int d = 0; d < fake_gpus::kMaxGpus; ++d) {
    const uint64_t available = pools[d].reserved - pools[d].used;
    if (need[d] <= available) continue;
    grow[d] = RoundUp(need[d] - available, kGraphPoolGranularity);
    if (!TakePhysical(locked, d, grow[d])) {
      for (int taken = 0; taken < d; ++taken) ReturnPhysical(locked, taken, grow[taken]);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  for (int d = 0; d < fake_gpus::kMaxGpus; ++d) {
    pools[d].reserved += grow[d];
    pools[d].reserved_high = std::max(pools[d].reserved_high, pools[d].reserved);
  }
  return CUDA_SUCCESS;
}

CUresult Launch(CUgraphExec handle, CUstream stream) {
  Locked locked;
  CUgraphExec_st* exec = FindExec(locked, handle);
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int stream_device = 0;
  if (CUresult r = StreamDevice(locked, stream, &stream_device); r != CUDA_SUCCESS) return r;
  // Launching a graph into a capture would nest it as a child graph; the
  // fake does not model that rather than get its memory wrong.
  if (CapturingGraph(locked, stream) != nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  for (const auto& alloc : exec->allocs) {
    if (alloc.freed_in_graph) continue;
    const Allocation* live = FindAllocationAt(locked, alloc.dptr);
    if (live == nullptr) continue;
    if (!exec->auto_free_on_launch) return CUDA_ERROR_INVALID_VALUE;
    FreeGraphAllocation(locked, *live);
  }
  if (CUresult r = ReserveForExec(locked, *exec); r != CUDA_SUCCESS) return r;
  auto& pools = GetGraphs(locked).pools;
  for (const auto& alloc : exec->allocs) {
    if (alloc.freed_in_graph) continue;
    GraphPool& pool = pools[alloc.device];
    pool.used += alloc.bytes;
    pool.used_high = std::max(pool.used_high, pool.used);
    AddAllocation(locked, {AllocationKind::kGraph, alloc.device, alloc.dptr, alloc.bytes, nullptr});
  }
  for (CUdeviceptr dptr : exec->other_frees) {
    const Allocation* live = FindAllocationAt(locked, dptr);
    if (live != nullptr && live->kind == AllocationKind::kGraph) {
      FreeGraphAllocation(locked, *live);
    }
  }
  AddLaunches(exec->kernel_nodes);
  return CUDA_SUCCESS;
}

CUresult Upload(CUgraphExec handle, CUstream stream) {
  Locked locked;
  CUgraphExec_st* exec = FindExec(locked, handle);
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int stream_device = 0;
  if (CUresult r = StreamDevice(locked, stream, &stream_device); r != CUDA_SUCCESS) return r;
  return ReserveForExec(locked, *exec);
}

CUresult Instantiate(CUgraphExec* out, CUgraph graph_handle, cuuint64_t flags) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Locked locked;
  CUgraph_st* graph = FindGraph(locked, graph_handle);
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const bool memory = HasMemoryNodes(*graph);
  if (memory && graph->exec != nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto exec = std::make_unique<CUgraphExec_st>();
  exec->graph = graph_handle;
  exec->auto_free_on_launch = (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0;
  std::set<CUdeviceptr> freed;
  for (const auto& node : graph->nodes) {
    if (node->type == CU_GRAPH_NODE_TYPE_MEM_FREE) freed.insert(node->dptr);
    if (node->type == CU_GRAPH_NODE_TYPE_KERNEL) ++exec->kernel_nodes;
  }
  std::set<CUdeviceptr> own;
  for (const auto& node : graph->nodes) {
    if (node->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) continue;
    exec->allocs.push_back({node->device, node->dptr, node->bytes, freed.count(node->dptr) != 0});
    own.insert(node->dptr);
  }
  for (CUdeviceptr dptr : freed) {
    if (own.count(dptr) == 0) exec->other_frees.push_back(dptr);
  }
  *out = exec.get();
  if (memory) graph->exec = *out;
  GetGraphs(locked).execs.emplace(*out, std::move(exec));
  return CUDA_SUCCESS;
}

CUresult LegacyInstantiate(CUgraphExec* out, CUgraph graph, CUgraphNode* error_node, char* log,
                           size_t log_size) {
  if (error_node != nullptr) *error_node = nullptr;
  if (log != nullptr && log_size > 0) log[0] = '\0';
  return Instantiate(out, graph, 0);
}

CUresult InstantiateWithParams(CUgraphExec* out, CUgraph graph,
                               CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  params->hErrNode_out = nullptr;
  CUresult r = Instantiate(out, graph, params->flags);
  params->result_out =
      r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  if (r == CUDA_SUCCESS && (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0) {
    r = Upload(*out, params->hUploadStream);
  }
  return r;
}

}  // namespace

CUgraph NewGraph(const Locked& locked) {
  auto graph = std::make_unique<CUgraph_st>();
  CUgraph handle = graph.get();
  GetGraphs(locked).graphs.emplace(handle, std::move(graph));
  return handle;
}

void DestroyGraph(const Locked& locked, CUgraph handle) {
  Graphs& g = GetGraphs(locked);
  auto it = g.graphs.find(handle);
  if (it == g.graphs.end()) return;
  for (const auto& node : it->second->nodes) g.nodes.erase(node.get());
  if (CUgraphExec_st* exec = FindExec(locked, it->second->exec)) exec->graph = nullptr;
  g.graphs.erase(it);
}

CUresult AddCapturedAlloc(const Locked& locked, CUgraph graph, int device, uint64_t bytes,
                          CUdeviceptr* dptr) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  *dptr = AddAllocNode(locked, graph, props, bytes)->dptr;
  return CUDA_SUCCESS;
}

CUresult AddCapturedFree(const Locked& locked, CUgraph graph, CUdeviceptr dptr) {
  return AddFreeNode(locked, graph, dptr, nullptr);
}

void AddCapturedKernel(const Locked& locked, CUgraph graph) {
  CUgraphNode_st node;
  node.type = CU_GRAPH_NODE_TYPE_KERNEL;
  AddNode(locked, graph, node);
}

void FreeGraphAllocation(const Locked& locked, const Allocation& allocation) {
  GraphPool& pool = GetGraphs(locked).pools[allocation.device];
  pool.used -= allocation.size;
  RemoveAllocation(locked, allocation.base);
}

}  // namespace fake_cuda

using fake_cuda::Enter;

extern "C" {

CUresult cuGraphCreate(CUgraph* graph, unsigned int flags) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (graph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  *graph = fake_cuda::NewGraph(locked);
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph graph) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  if (fake_cuda::FindGraph(locked, graph) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::DestroyGraph(locked, graph);
  return CUDA_SUCCESS;
}

CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                                size_t count, CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (node == nullptr || params == nullptr || params->bytesize == 0 ||
      params->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = fake_cuda::CheckDependencies(dependencies, count); r != CUDA_SUCCESS) return r;
  if (!fake_cuda::ValidDevice(params->poolProps.location.id)) return CUDA_ERROR_INVALID_DEVICE;
  fake_cuda::Locked locked;
  if (fake_cuda::FindGraph(locked, graph) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *node = fake_cuda::AddAllocNode(locked, graph, params->poolProps, params->bytesize);
  params->dptr = (*node)->dptr;
  return CUDA_SUCCESS;
}

CUresult cuGraphAddMemFreeNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                               size_t count, CUdeviceptr dptr) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (node == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = fake_cuda::CheckDependencies(dependencies, count); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  if (fake_cuda::FindGraph(locked, graph) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return fake_cuda::AddFreeNode(locked, graph, dptr, node);
}

CUresult cuGraphAddKernelNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                              size_t count, const CUDA_KERNEL_NODE_PARAMS_v1* params) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::AddKernelNode(node, graph, dependencies, count, params);
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                                 size_t count, const CUDA_KERNEL_NODE_PARAMS* params) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::AddKernelNode(node, graph, dependencies, count, params);
}

CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  const CUgraph_st* g = fake_cuda::FindGraph(locked, graph);
  if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (nodes == nullptr) {
    *count = g->nodes.size();
    return CUDA_SUCCESS;
  }
  const size_t filled = std::min(*count, g->nodes.size());
  for (size_t i = 0; i < *count; ++i) nodes[i] = i < filled ? g->nodes[i].get() : nullptr;
  *count = filled;
  return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (type == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  const CUgraphNode_st* n = fake_cuda::FindNode(locked, node);
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *type = n->type;
  return CUDA_SUCCESS;
}

CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  const CUgraphNode_st* n = fake_cuda::FindNode(locked, node);
  if (n == nullptr || n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return CUDA_ERROR_INVALID_VALUE;
  *params = {};
  params->poolProps = n->pool_props;
  params->bytesize = n->requested_bytes;
  params->dptr = n->dptr;
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log,
                            size_t log_size) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::LegacyInstantiate(exec, graph, error_node, log, log_size);
}

CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log,
                               size_t log_size) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::LegacyInstantiate(exec, graph, error_node, log, log_size);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Instantiate(exec, graph, flags);
}

CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::InstantiateWithParams(exec, graph, params);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::InstantiateWithParams(exec, graph, params);
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  const CUgraphExec_st* e = fake_cuda::FindExec(locked, exec);
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // Live allocations outlive the exec, as in the real driver.
  if (CUgraph_st* g = fake_cuda::FindGraph(locked, e->graph); g != nullptr && g->exec == exec) {
    g->exec = nullptr;
  }
  fake_cuda::GetGraphs(locked).execs.erase(exec);
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Launch(exec, stream);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Launch(exec, stream);
}

CUresult cuGraphUpload(CUgraphExec exec, CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Upload(exec, stream);
}

CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Upload(exec, stream);
}

CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void* value) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!fake_cuda::ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  fake_cuda::Locked locked;
  const fake_cuda::GraphPool& pool = fake_cuda::GetGraphs(locked).pools[device];
  auto* out = static_cast<cuuint64_t*>(value);
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *out = pool.used; return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *out = pool.used_high; return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *out = pool.reserved; return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *out = pool.reserved_high; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void* value) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!fake_cuda::ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  // Only the high-water marks are settable, and only reset, by writing 0.
  if (*static_cast<const cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  fake_cuda::GraphPool& pool = fake_cuda::GetGraphs(locked).pools[device];
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: pool.used_high = pool.used; return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      pool.reserved_high = pool.reserved;
      return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuDeviceGraphMemTrim(CUdevice device) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (!fake_cuda::ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  fake_cuda::Locked locked;
  fake_cuda::GraphPool& pool = fake_cuda::GetGraphs(locked).pools[device];
  const uint64_t keep = fake_cuda::RoundUp(pool.used, fake_cuda::kGraphPoolGranularity);
  if (pool.reserved > keep) {
    fake_cuda::ReturnPhysical(locked, device, pool.reserved - keep);
    pool.reserved = keep;
  }
  return CUDA_SUCCESS;
}

}  // extern "C"
