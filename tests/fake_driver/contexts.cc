// Context entry points: primary contexts, cuCtxCreate (all table versions),
// the per-thread context stack, and cuCtxSynchronize.
#include "contexts.h"

#include <array>
#include <map>
#include <memory>
#include <vector>

#include "allocations.h"
#include "arrays.h"
#include "fake_gpus.h"
#include "fake_rm_client.h"  // tests/rm: channel groups through RM ioctls, as libcuda makes them
#include "holders.h"
#include "launch.h"
#include "physical.h"
#include "pools.h"

struct CUctx_st {
  int device;
  bool primary;
  uint64_t malloc_heap = 0;  // CU_LIMIT_MALLOC_HEAP_SIZE
};

namespace fake_cuda {
namespace {

struct Contexts {
  std::map<CUcontext, std::unique_ptr<CUctx_st>> live;
  // Primary contexts keep one handle per device for the process's life, as
  // the real driver does across release/retain.
  std::array<CUcontext, fake_gpus::kMaxGpus> primary{};
  std::array<int, fake_gpus::kMaxGpus> primary_refs{};
};

Contexts& GetContexts(const Locked&) {
  static auto* contexts = new Contexts;
  return *contexts;
}

// The calling thread's context stack; only the thread itself touches it.
std::vector<CUcontext>& Stack() {
  thread_local std::vector<CUcontext> stack;
  return stack;
}

const CUctx_st* Find(const Locked& locked, CUcontext ctx) {
  auto& live = GetContexts(locked).live;
  auto it = live.find(ctx);
  return it == live.end() ? nullptr : it->second.get();
}

// The device-side malloc heap every context starts with (the real default).
// Only a heap grown past it takes memory here: the fake does not count a
// context's own memory.
constexpr uint64_t kDefaultMallocHeap = uint64_t{8} << 20;

// Sets `ctx`'s malloc heap, taking or returning the difference.
CUresult SetMallocHeap(const Locked& locked, CUctx_st& ctx, uint64_t bytes) {
  const uint64_t was = ctx.malloc_heap > kDefaultMallocHeap ? ctx.malloc_heap - kDefaultMallocHeap : 0;
  const uint64_t will = bytes > kDefaultMallocHeap ? bytes - kDefaultMallocHeap : 0;
  if (will > was && !TakePhysical(locked, ctx.device, will - was)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (will < was) ReturnPhysical(locked, ctx.device, was - will);
  ctx.malloc_heap = bytes;
  return CUDA_SUCCESS;
}

// What the real driver frees with a context: the memory it owns (plain,
// pitched and managed allocations, arrays, a grown malloc heap). Pools,
// graph pools and VMM memory belong to the device and stay.
void FreeContextMemory(const Locked& locked, CUcontext ctx) {
  FreeContextAllocations(locked, ctx);
  FreeContextArrays(locked, ctx);
  SetMallocHeap(locked, *ctx, kDefaultMallocHeap);
}

CUresult Create(CUcontext* pctx, int device) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  Locked locked;
  auto ctx = std::make_unique<CUctx_st>(CUctx_st{device, false, kDefaultMallocHeap});
  CUcontext handle = ctx.get();
  GetContexts(locked).live.emplace(handle, std::move(ctx));
  if (!fake_rm_client::ContextCreated(handle)) {
    GetContexts(locked).live.erase(handle);
    return CUDA_ERROR_DEVICE_UNAVAILABLE;
  }
  Stack().push_back(handle);  // a new context becomes current, as documented
  *pctx = handle;
  return CUDA_SUCCESS;
}

CUresult Destroy(CUcontext ctx) {
  Locked locked;
  const CUctx_st* c = Find(locked, ctx);
  if (c == nullptr || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
  FreeContextMemory(locked, ctx);
  GetContexts(locked).live.erase(ctx);
  fake_rm_client::ContextDestroyed(ctx);
  auto& stack = Stack();
  if (!stack.empty() && stack.back() == ctx) stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult Push(CUcontext ctx) {
  Locked locked;
  if (Find(locked, ctx) == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  Stack().push_back(ctx);
  return CUDA_SUCCESS;
}

CUresult Pop(CUcontext* pctx) {
  auto& stack = Stack();
  if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr) *pctx = stack.back();
  stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult PrimaryRelease(CUdevice dev) {
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Locked locked;
  int& refs = GetContexts(locked).primary_refs[dev];
  if (refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  // The last release resets the context, as documented.
  if (--refs == 0) FreeContextMemory(locked, GetContexts(locked).primary[dev]);
  return CUDA_SUCCESS;
}

CUresult PrimaryReset(CUdevice dev) {
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Locked locked;
  GetContexts(locked).primary_refs[dev] = 0;
  if (CUcontext primary = GetContexts(locked).primary[dev]) FreeContextMemory(locked, primary);
  return CUDA_SUCCESS;
}

CUresult Synchronize(CUcontext ctx) {
  Locked locked;
  if (ctx == nullptr) {
    int device = 0;
    if (CUresult r = CurrentDevice(locked, &device); r != CUDA_SUCCESS) return r;
  } else if (Find(locked, ctx) == nullptr) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  ReleasePoolsAtSync(locked);
  return CUDA_SUCCESS;
}

CUresult SynchronizeContext(CUcontext ctx) {
  const CUresult r = Synchronize(ctx);
  if (r != CUDA_SUCCESS) return r;
  // Outside the driver lock, as a GPU wait would be: the kernels on this
  // process's timeline (FAKE_KERNEL_US, launch.h), then the holders.
  WaitUntilNs(WorkDoneAtNs());
  WaitForHolders();
  return r;
}

}  // namespace

CUcontext CurrentContext(const Locked& locked) {
  auto& stack = Stack();
  if (stack.empty() || Find(locked, stack.back()) == nullptr) return nullptr;
  return stack.back();
}

CUresult CurrentDevice(const Locked& locked, int* device) {
  CUcontext ctx = CurrentContext(locked);
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *device = Find(locked, ctx)->device;
  return CUDA_SUCCESS;
}

}  // namespace fake_cuda

using fake_cuda::Enter;

extern "C" {

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!fake_cuda::ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  fake_cuda::Locked locked;
  auto& contexts = fake_cuda::GetContexts(locked);
  if (contexts.primary[dev] == nullptr) {
    auto ctx = std::make_unique<CUctx_st>(CUctx_st{dev, true, fake_cuda::kDefaultMallocHeap});
    if (!fake_rm_client::ContextCreated(ctx.get())) return CUDA_ERROR_DEVICE_UNAVAILABLE;
    contexts.primary[dev] = ctx.get();
    contexts.live.emplace(ctx.get(), std::move(ctx));
  }
  ++contexts.primary_refs[dev];
  *pctx = contexts.primary[dev];
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::PrimaryRelease(dev);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::PrimaryRelease(dev);
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::PrimaryReset(dev);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::PrimaryReset(dev);
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!fake_cuda::ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  fake_cuda::Locked locked;
  *flags = 0;
  *active = fake_cuda::GetContexts(locked).primary_refs[dev] > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult cuCtxCreate(CUcontext* pctx, unsigned int /*flags*/, CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Create(pctx, dev);
}

CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int /*flags*/, CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Create(pctx, dev);
}

CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* /*params*/, int /*num_params*/,
                        unsigned int /*flags*/, CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Create(pctx, dev);
}

CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* /*params*/, unsigned int /*flags*/,
                        CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Create(pctx, dev);
}

CUresult cuCtxDestroy(CUcontext ctx) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Destroy(ctx);
}

CUresult cuCtxDestroy_v2(CUcontext ctx) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Destroy(ctx);
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  auto& stack = fake_cuda::Stack();
  if (ctx == nullptr) {  // unbinds the thread's current context
    if (!stack.empty()) stack.pop_back();
    return CUDA_SUCCESS;
  }
  fake_cuda::Locked locked;
  if (fake_cuda::Find(locked, ctx) == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (stack.empty()) {
    stack.push_back(ctx);
  } else {
    stack.back() = ctx;
  }
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* pctx) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  *pctx = fake_cuda::CurrentContext(locked);
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Push(ctx);
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Push(ctx);
}

CUresult cuCtxPopCurrent(CUcontext* pctx) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Pop(pctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Pop(pctx);
}

CUresult cuCtxGetDevice(CUdevice* device) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  return fake_cuda::CurrentDevice(locked, device);
}

CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  if (ctx == nullptr) return fake_cuda::CurrentDevice(locked, device);
  const CUctx_st* c = fake_cuda::Find(locked, ctx);
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *device = c->device;
  return CUDA_SUCCESS;
}

// Only CU_LIMIT_MALLOC_HEAP_SIZE is modelled (it is device memory); the other
// limits are accepted and read back.
CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  CUcontext ctx = fake_cuda::CurrentContext(locked);
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (limit != CU_LIMIT_MALLOC_HEAP_SIZE) return CUDA_SUCCESS;
  return fake_cuda::SetMallocHeap(locked, *ctx, value);
}

CUresult cuCtxGetLimit(size_t* value, CUlimit limit) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  CUcontext ctx = fake_cuda::CurrentContext(locked);
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *value = limit == CU_LIMIT_MALLOC_HEAP_SIZE ? ctx->malloc_heap : 0;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::SynchronizeContext(nullptr);
}

CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::SynchronizeContext(ctx);
}

}  // extern "C"
