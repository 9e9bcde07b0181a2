// Modules, functions and kernel launches (launch.h). A module is any image;
// a function is any name in it. Launches count, or become kernel nodes on a
// capturing stream; gpuslice's holder kernel is also modelled (holders.h).
#include "launch.h"

#include <cuda.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "contexts.h"
#include "graphs.h"
#include "holders.h"
#include "state.h"
#include "streams.h"

struct CUfunc_st {
  CUmodule module;
  bool holder;  // gpuslice's holder kernel (holders.h)
};

struct CUmod_st {
  std::map<std::string, std::unique_ptr<CUfunc_st>> functions;
};

namespace fake_cuda {
namespace {

std::atomic<uint64_t> g_launches{0};

struct Modules {
  std::map<CUmodule, std::unique_ptr<CUmod_st>> modules;
  std::map<CUfunction, CUmodule> functions;
};

Modules& GetModules(const Locked&) {
  static auto* modules = new Modules;
  return *modules;
}

CUresult LoadModule(CUmodule* module, const void* image) {
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Locked locked;
  int device = 0;
  if (CUresult r = CurrentDevice(locked, &device); r != CUDA_SUCCESS) return r;
  auto m = std::make_unique<CUmod_st>();
  *module = m.get();
  GetModules(locked).modules.emplace(*module, std::move(m));
  return CUDA_SUCCESS;
}

CUresult LaunchOn(CUfunction f, CUstream stream, void** params) {
  bool holder = false;
  {
    Locked locked;
    if (GetModules(locked).functions.count(f) == 0) return CUDA_ERROR_INVALID_HANDLE;
    int device = 0;
    if (CUresult r = StreamDevice(locked, stream, &device); r != CUDA_SUCCESS) return r;
    if (CUgraph graph = CapturingGraph(locked, stream)) {
      AddCapturedKernel(locked, graph);
      return CUDA_SUCCESS;
    }
    holder = f->holder;
  }
  AddLaunches(1);
  if (holder) LaunchHolder(params);
  return CUDA_SUCCESS;
}

}  // namespace

void AddLaunches(uint64_t count) { g_launches.fetch_add(count, std::memory_order_relaxed); }
uint64_t LaunchCount() { return g_launches.load(std::memory_order_relaxed); }
void ResetLaunchCount() { g_launches.store(0, std::memory_order_relaxed); }

}  // namespace fake_cuda

using fake_cuda::Enter;

extern "C" {

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::LoadModule(module, image);
}

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int /*num_options*/,
                            CUjit_option* /*options*/, void** /*values*/) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::LoadModule(module, image);
}

CUresult cuModuleUnload(CUmodule module) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  auto& modules = fake_cuda::GetModules(locked);
  auto it = modules.modules.find(module);
  if (it == modules.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  for (const auto& [name, function] : it->second->functions) {
    modules.functions.erase(function.get());
  }
  modules.modules.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (function == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  auto& modules = fake_cuda::GetModules(locked);
  auto it = modules.modules.find(module);
  if (it == modules.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  auto& slot = it->second->functions[name];  // the same name gives the same handle
  if (slot == nullptr) {
    slot = std::make_unique<CUfunc_st>(CUfunc_st{module, std::string(name) == fake_cuda::kHolderKernelName});
    modules.functions.emplace(slot.get(), module);
  }
  *function = slot.get();
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int, unsigned int, unsigned int, unsigned int,
                        unsigned int, unsigned int, unsigned int, CUstream stream, void** params, void**) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::LaunchOn(f, stream, params);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int, unsigned int, unsigned int, unsigned int,
                             unsigned int, unsigned int, unsigned int, CUstream stream, void** params,
                             void**) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::LaunchOn(f, stream, params);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void**) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return fake_cuda::LaunchOn(f, config->hStream, params);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void**) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return fake_cuda::LaunchOn(f, config->hStream, params);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int, unsigned int, unsigned int,
                                   unsigned int, unsigned int, unsigned int, unsigned int,
                                   CUstream stream, void** params) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::LaunchOn(f, stream, params);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int, unsigned int, unsigned int,
                                        unsigned int, unsigned int, unsigned int, unsigned int,
                                        CUstream stream, void** params) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::LaunchOn(f, stream, params);
}

}  // extern "C"
