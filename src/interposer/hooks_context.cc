// hooks_context.cc — driver start-up and context creation, where the compute
// path (compute_thread.h) hooks in.
//
// cuInit: before the driver makes its first RM objects, the real libcuda's
// ioctl imports are patched so its channel groups are seen (rm/ioctl_hook.h).
// Context creation: the channel groups the driver allocates meanwhile are
// attributed to the device being created for. The compute thread is started
// (once) by the first successful cuInit or context creation. Outside a vGPU every hook is a plain call to the driver.
//
// Not a hot path: each runs once per context. The thread-local device hint
// is the only state touched around the real call.
#include <cuda.h>

#include "interposer/compute_thread.h"
#include "interposer/driver_table.h"
#include "interposer/export.h"
#include "interposer/vgpu_runtime.h"
#include "rm/ioctl_hook.h"

// Legacy names cuda.h declares only under __CUDA_API_VERSION_INTERNAL; the
// driver still exports them.
extern "C" {
CUresult CUDAAPI cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev);
CUresult CUDAAPI cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int num_params, unsigned int flags,
                                CUdevice dev);
}

using gpuslice::interposer::VgpuRuntime;
namespace gi = gpuslice::interposer;

namespace {

// Runs `create` with TSGs attributed to `dev`, then starts the compute
// thread if the process is in a vGPU.
template <typename Create>
CUresult CreatingContext(CUdevice dev, Create create) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr) return create();
  gi::PrepareCompute(rt);  // in case the application reached us without cuInit
  CUresult r;
  {
    gpuslice::rm::ScopedDeviceHint hint(dev);
    r = create();
  }
  if (r == CUDA_SUCCESS) gi::StartComputeThread(rt);
  return r;
}

}  // namespace

GPUSLICE_EXPORT CUresult cuInit(unsigned int flags) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  gi::PrepareCompute(rt);
  const CUresult r = GPUSLICE_REAL(cuInit)(flags);
  // Started here, not only at context creation: the CUDA runtime makes its
  // primary context through a private driver interface that no hook sees
  // (measured on CUDA 13 / driver 580: the context hooks never ran).
  if (r == CUDA_SUCCESS) gi::StartComputeThread(rt);
  return r;
}

GPUSLICE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  return CreatingContext(dev, [&] { return GPUSLICE_REAL(cuDevicePrimaryCtxRetain)(pctx, dev); });
}

GPUSLICE_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return CreatingContext(dev, [&] { return GPUSLICE_REAL(cuCtxCreate_v2)(pctx, flags, dev); });
}

GPUSLICE_EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int num_params,
                                        unsigned int flags, CUdevice dev) {
  return CreatingContext(dev, [&] { return GPUSLICE_REAL(cuCtxCreate_v3)(pctx, params, num_params, flags, dev); });
}

GPUSLICE_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags,
                                        CUdevice dev) {
  return CreatingContext(dev, [&] { return GPUSLICE_REAL(cuCtxCreate_v4)(pctx, params, flags, dev); });
}
