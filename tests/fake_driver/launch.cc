// Modules, functions and kernel launches (launch.h). A module is any image;
// a function is any name in it. Launches count, or become kernel nodes on a
// capturing stream; gpuslice's holder kernel is also modelled (holders.h).
// With FAKE_KERNEL_US kernels take time; with FAKE_GPU_RECORD launches are
// recorded across processes.
#include "launch.h"

#include <cuda.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
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
std::atomic<uint64_t> g_work_done_at{0};  // FAKE_KERNEL_US: this process's timeline

uint64_t KernelNs() {
  static const uint64_t ns = [] {
    const char* v = getenv("FAKE_KERNEL_US");
    char* end = nullptr;
    const unsigned long long us = v != nullptr ? strtoull(v, &end, 10) : 0;
    return v != nullptr && *v != 0 && *end == 0 && us <= 1'000'000 ? static_cast<uint64_t>(us) * 1000 : 0;
  }();
  return ns;
}

// FAKE_LAUNCH_STALL=EVERY:US (launch.h): the stall of every EVERY-th launch.
struct Stall {
  uint64_t every = 0;
  uint64_t ns = 0;
};
Stall LaunchStall() {
  static const Stall stall = [] {
    Stall s;
    const char* v = getenv("FAKE_LAUNCH_STALL");
    unsigned long long every = 0, us = 0;
    if (v != nullptr && sscanf(v, "%llu:%llu", &every, &us) == 2 && us <= 1'000'000) s = {every, us * 1000};
    return s;
  }();
  return stall;
}
std::atomic<uint64_t> g_stall_count{0};

GpuRecord* Record() {
  static GpuRecord* const record = []() -> GpuRecord* {
    const char* path = getenv("FAKE_GPU_RECORD");
    if (path == nullptr || *path == 0) return nullptr;
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return nullptr;
    struct stat st {};
    void* map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && (st.st_size >= static_cast<off_t>(sizeof(GpuRecord)) ||
                                ftruncate(fd, sizeof(GpuRecord)) == 0)) {
      map = mmap(nullptr, sizeof(GpuRecord), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd);
    return map == MAP_FAILED ? nullptr : static_cast<GpuRecord*>(map);
  }();
  return record;
}

// Queues one kernel on this process's timeline (blocking while
// kQueuedKernels wait); returns when it will be done.
uint64_t Enqueue(uint64_t kernel_ns) {
  for (;;) {
    const uint64_t now = NowNs();
    uint64_t done_at = g_work_done_at.load(std::memory_order_acquire);
    if (kernel_ns == 0) return done_at > now ? done_at : now;
    if (done_at > now + kQueuedKernels * kernel_ns) {  // the queue is full
      WaitUntilNs(done_at - kQueuedKernels * kernel_ns);
      continue;
    }
    const uint64_t done = (done_at > now ? done_at : now) + kernel_ns;
    if (g_work_done_at.compare_exchange_weak(done_at, done, std::memory_order_acq_rel)) return done;
  }
}

void RecordLaunch(uint64_t done_at) {
  GpuRecord* r = Record();
  if (r == nullptr) return;
  while (__atomic_exchange_n(&r->lock, 1, __ATOMIC_ACQUIRE) != 0) sched_yield();
  const uint64_t pid = static_cast<uint64_t>(getpid());
  ++r->launches;
  if (r->last_pid != 0 && r->last_pid != pid) {
    ++r->hand_changes;
    if (r->last_done_ns > NowNs()) ++r->overlaps;
  }
  if (r->last_pid != pid || done_at > r->last_done_ns) r->last_done_ns = done_at;
  r->last_pid = pid;
  __atomic_store_n(&r->lock, 0, __ATOMIC_RELEASE);
}

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
  if (const Stall stall = LaunchStall();
      !holder && stall.every != 0 &&
      g_stall_count.fetch_add(1, std::memory_order_relaxed) % stall.every == stall.every - 1) {
    WaitUntilNs(NowNs() + stall.ns);  // a thread descheduled between the gate and the GPU
  }
  const uint64_t done_at = Enqueue(holder ? 0 : KernelNs());
  AddLaunches(1);
  RecordLaunch(done_at);
  if (holder) LaunchHolder(params);
  return CUDA_SUCCESS;
}

}  // namespace

void AddLaunches(uint64_t count) { g_launches.fetch_add(count, std::memory_order_relaxed); }
uint64_t LaunchCount() { return g_launches.load(std::memory_order_relaxed); }
void ResetLaunchCount() { g_launches.store(0, std::memory_order_relaxed); }

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t WorkDoneAtNs() { return g_work_done_at.load(std::memory_order_acquire); }

void WaitUntilNs(uint64_t at_ns) {
  for (uint64_t now = NowNs(); now < at_ns; now = NowNs()) {
    const uint64_t left = at_ns - now;
    timespec ts{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
    nanosleep(&ts, nullptr);
  }
}

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
