// hooks_launch.cc — kernel launches, stream capture and context teardown, for
// GPU turns (pacer.h).
//
// Every way to put a kernel on a stream goes through the pacer's gate:
// plain, per-thread-stream (_ptsz), extensible (Ex) and cooperative
// launches. Graph launches are paced in hooks_graphs.cc. When no device of
// the process is paced, each hook is one relaxed load and the real call.
//
// Capture begin/end are counted so that the pacer never queries a stream or
// an event while a capture is open; context teardown drops the pacer's
// markers (and tells the optional observers, observers.h) before they die
// with the context, and uncharges the context's memory (charge.h); a stream's
// destruction stops its markers querying it.
#include <cuda.h>

#include "interposer/charge.h"
#include "interposer/driver_table.h"
#include "interposer/event_markers.h"
#include "interposer/export.h"
#include "interposer/observers.h"
#include "interposer/pacer.h"

// cuda.h maps cuStreamBeginCapture and cuStreamDestroy to _v2; the driver
// still exports the originals, which this file hooks under their own names.
#undef cuStreamBeginCapture
#undef cuStreamDestroy

// Per-thread-stream and legacy names that cuda.h declares only in other
// modes; the driver exports them all.
extern "C" {
decltype(cuLaunchKernel) cuLaunchKernel_ptsz;
decltype(cuLaunchKernelEx) cuLaunchKernelEx_ptsz;
decltype(cuLaunchCooperativeKernel) cuLaunchCooperativeKernel_ptsz;
decltype(cuStreamBeginCapture_v2) cuStreamBeginCapture_v2_ptsz;
CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream stream);
decltype(cuStreamBeginCaptureToGraph) cuStreamBeginCaptureToGraph_ptsz;
decltype(cuStreamEndCapture) cuStreamEndCapture_ptsz;
CUresult CUDAAPI cuStreamBeginCapture(CUstream stream);
CUresult CUDAAPI cuStreamDestroy(CUstream stream);
CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx);
CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev);
}

namespace markers = gpuslice::interposer::markers;
namespace pacer = gpuslice::interposer::pacer;

GPUSLICE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                        unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {
  return pacer::Paced(stream, false, [&] {
    return GPUSLICE_REAL(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
  });
}

GPUSLICE_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                             unsigned by, unsigned bz, unsigned shared, CUstream stream,
                                             void** params, void** extra) {
  return pacer::Paced(stream, true, [&] {
    return GPUSLICE_REAL(cuLaunchKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
  });
}

GPUSLICE_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return pacer::Paced(config != nullptr ? config->hStream : nullptr, false,
                      [&] { return GPUSLICE_REAL(cuLaunchKernelEx)(config, f, params, extra); });
}

GPUSLICE_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                                               void** extra) {
  return pacer::Paced(config != nullptr ? config->hStream : nullptr, true,
                      [&] { return GPUSLICE_REAL(cuLaunchKernelEx_ptsz)(config, f, params, extra); });
}

GPUSLICE_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                                   unsigned by, unsigned bz, unsigned shared, CUstream stream,
                                                   void** params) {
  return pacer::Paced(stream, false, [&] {
    return GPUSLICE_REAL(cuLaunchCooperativeKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params);
  });
}

GPUSLICE_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                                        CUstream stream, void** params) {
  return pacer::Paced(stream, true, [&] {
    return GPUSLICE_REAL(cuLaunchCooperativeKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shared, stream, params);
  });
}

// --- capture -----------------------------------------------------------------

namespace {
template <typename Begin>
CUresult Capturing(Begin begin) {
  markers::CaptureBegin();
  const CUresult r = begin();
  if (r != CUDA_SUCCESS) markers::CaptureEnd();
  return r;
}
template <typename End>
CUresult EndingCapture(End end) {
  const CUresult r = end();
  // Ended, cleanly or not; any other error means there was no capture to end.
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED || r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED ||
      r == CUDA_ERROR_STREAM_CAPTURE_UNMATCHED) {
    markers::CaptureEnd();
  }
  return r;
}
}  // namespace

GPUSLICE_EXPORT CUresult cuStreamBeginCapture(CUstream stream) {
  return Capturing([&] { return GPUSLICE_REAL(cuStreamBeginCapture)(stream); });
}
GPUSLICE_EXPORT CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) {
  return Capturing([&] { return GPUSLICE_REAL(cuStreamBeginCapture_v2)(stream, mode); });
}
GPUSLICE_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream stream) {
  return Capturing([&] { return GPUSLICE_REAL(cuStreamBeginCapture_ptsz)(stream); });
}
GPUSLICE_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) {
  return Capturing([&] { return GPUSLICE_REAL(cuStreamBeginCapture_v2_ptsz)(stream, mode); });
}
GPUSLICE_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream stream, CUgraph graph, const CUgraphNode* deps,
                                                     const CUgraphEdgeData* edges, size_t count,
                                                     CUstreamCaptureMode mode) {
  return Capturing([&] { return GPUSLICE_REAL(cuStreamBeginCaptureToGraph)(stream, graph, deps, edges, count, mode); });
}
GPUSLICE_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream stream, CUgraph graph, const CUgraphNode* deps,
                                                          const CUgraphEdgeData* edges, size_t count,
                                                          CUstreamCaptureMode mode) {
  return Capturing(
      [&] { return GPUSLICE_REAL(cuStreamBeginCaptureToGraph_ptsz)(stream, graph, deps, edges, count, mode); });
}
GPUSLICE_EXPORT CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  return EndingCapture([&] { return GPUSLICE_REAL(cuStreamEndCapture)(stream, graph); });
}
GPUSLICE_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) {
  return EndingCapture([&] { return GPUSLICE_REAL(cuStreamEndCapture_ptsz)(stream, graph); });
}

// --- stream and context teardown --------------------------------------------

GPUSLICE_EXPORT CUresult cuStreamDestroy(CUstream stream) {
  pacer::ForgetStream(stream);
  return GPUSLICE_REAL(cuStreamDestroy)(stream);
}
GPUSLICE_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  pacer::ForgetStream(stream);
  return GPUSLICE_REAL(cuStreamDestroy_v2)(stream);
}

GPUSLICE_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  gpuslice::interposer::OnContextGone(ctx);
  pacer::ForgetContext(ctx);
  return gpuslice::interposer::DestroyContext(ctx, GPUSLICE_REAL(cuCtxDestroy_v2));
}
GPUSLICE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  gpuslice::interposer::OnDeviceGone(dev);
  pacer::ForgetDevice(dev);  // may be the last reference; markers come back on the next launch
  return gpuslice::interposer::ReleasePrimaryContext(dev, GPUSLICE_REAL(cuDevicePrimaryCtxRelease_v2));
}
GPUSLICE_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  gpuslice::interposer::OnDeviceGone(dev);
  pacer::ForgetDevice(dev);
  return gpuslice::interposer::ResetPrimaryContext(dev, GPUSLICE_REAL(cuDevicePrimaryCtxReset_v2));
}
