// hooks_sync.cc — the calls with which an application waits for its GPU
// work: where a latency-critical process's requests end, for the trial of
// its automatic hold (lc_activity.h), and where the experimental holder is
// released first (observers.h).
//
// Each hook is one relaxed load and the real call unless this is an LC
// process that shares its GPU; then one clock read after the wait.
#include <cuda.h>

#include "interposer/driver_table.h"
#include "interposer/export.h"
#include "interposer/lc_activity.h"
#include "interposer/observers.h"

// cuda.h declares the per-thread-stream name only in that mode; the driver
// exports both.
extern "C" {
decltype(cuStreamSynchronize) cuStreamSynchronize_ptsz;
}

namespace lc_activity = gpuslice::interposer::lc_activity;

GPUSLICE_EXPORT CUresult cuCtxSynchronize(void) {
  gpuslice::interposer::BeforeContextSynchronize();
  const CUresult r = GPUSLICE_REAL(cuCtxSynchronize)();
  lc_activity::AfterSync();
  return r;
}
GPUSLICE_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  gpuslice::interposer::BeforeContextSynchronize();
  const CUresult r = GPUSLICE_REAL(cuCtxSynchronize_v2)(ctx);
  lc_activity::AfterSync();
  return r;
}
GPUSLICE_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  const CUresult r = GPUSLICE_REAL(cuStreamSynchronize)(stream);
  lc_activity::AfterSync();
  return r;
}
GPUSLICE_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream stream) {
  const CUresult r = GPUSLICE_REAL(cuStreamSynchronize_ptsz)(stream);
  lc_activity::AfterSync();
  return r;
}
GPUSLICE_EXPORT CUresult cuEventSynchronize(CUevent event) {
  const CUresult r = GPUSLICE_REAL(cuEventSynchronize)(event);
  lc_activity::AfterSync();
  return r;
}
