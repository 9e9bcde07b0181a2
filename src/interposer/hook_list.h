// hook_list.h — every entry point gpuslice replaces, as X-macros.
//
// The one place to add a hook's name: the registry (hook_registry.cc) builds
// its lookup table from it, and exports_test.cc checks each is exported.
// Each name is the exact exported symbol; the hook itself is defined in the
// hooks_*.cc file of its API family.
#ifndef GPUSLICE_INTERPOSER_HOOK_LIST_H_
#define GPUSLICE_INTERPOSER_HOOK_LIST_H_

// One line per API family, which clang-format would repack.
// clang-format off
#define GPUSLICE_CUDA_HOOKS(X)                                                  \
  X(cuGetProcAddress) X(cuGetProcAddress_v2)                                    \
  X(cuMemAlloc_v2) X(cuMemAllocPitch_v2) X(cuMemAllocManaged) X(cuMemFree_v2)   \
  X(cuMemCreate) X(cuMemRelease) X(cuMemRetainAllocationHandle)                 \
  X(cuMemExportToShareableHandle) X(cuIpcGetMemHandle)                          \
  X(cuIpcOpenMemHandle) X(cuIpcOpenMemHandle_v2) X(cuIpcCloseMemHandle)         \
  X(cuMemGetHandleForAddressRange)                                              \
  X(cuMemMap) X(cuMemUnmap) X(cuCtxSetLimit)                                    \
  X(cuArrayCreate_v2) X(cuArray3DCreate_v2) X(cuMipmappedArrayCreate)           \
  X(cuArrayDestroy) X(cuMipmappedArrayDestroy)                                  \
  X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz)                                    \
  X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz)                    \
  X(cuMemPoolCreate) X(cuMemPoolDestroy) X(cuMemPoolTrimTo)                     \
  X(cuMemPoolExportToShareableHandle)                                           \
  X(cuGraphInstantiate) X(cuGraphInstantiate_v2)                                \
  X(cuGraphInstantiateWithFlags) X(cuGraphInstantiateWithParams)                \
  X(cuGraphInstantiateWithParams_ptsz) X(cuGraphExecDestroy)                    \
  X(cuGraphLaunch) X(cuGraphLaunch_ptsz) X(cuGraphUpload) X(cuGraphUpload_ptsz) \
  X(cuDeviceGraphMemTrim)                                                       \
  X(cuMemGetInfo_v2) X(cuDeviceTotalMem_v2)                                     \
  X(cuInit) X(cuDevicePrimaryCtxRetain)                                         \
  X(cuCtxCreate_v2) X(cuCtxCreate_v3) X(cuCtxCreate_v4)                         \
  X(cuLaunchKernel) X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx)                  \
  X(cuLaunchKernelEx_ptsz) X(cuLaunchCooperativeKernel)                         \
  X(cuLaunchCooperativeKernel_ptsz)                                             \
  X(cuStreamBeginCapture) X(cuStreamBeginCapture_v2)                            \
  X(cuStreamBeginCapture_ptsz) X(cuStreamBeginCapture_v2_ptsz)                  \
  X(cuStreamBeginCaptureToGraph) X(cuStreamBeginCaptureToGraph_ptsz)            \
  X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz)                              \
  X(cuStreamDestroy) X(cuStreamDestroy_v2)                                      \
  X(cuCtxDestroy_v2) X(cuDevicePrimaryCtxRelease_v2) X(cuDevicePrimaryCtxReset_v2) \
  X(cuCtxDestroy) X(cuDevicePrimaryCtxRelease) X(cuDevicePrimaryCtxReset)      \
  X(cuCtxSynchronize) X(cuCtxSynchronize_v2) X(cuStreamSynchronize)             \
  X(cuStreamSynchronize_ptsz) X(cuEventSynchronize)
// clang-format on

#define GPUSLICE_NVML_HOOKS(X) X(nvmlDeviceGetMemoryInfo) X(nvmlDeviceGetMemoryInfo_v2)

#endif  // GPUSLICE_INTERPOSER_HOOK_LIST_H_
