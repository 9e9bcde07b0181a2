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

namespace {

// The application's wait, then what ends a request there.
template <typename Wait>
CUresult Synchronising(Wait wait) {
  const CUresult r = wait();
  gpuslice::interposer::lc_activity::AfterSync();
  return r;
}

}  // namespace

GPUSLICE_EXPORT CUresult cuCtxSynchronize(void) {
  gpuslice::interposer::BeforeContextSynchronize();
  return Synchronising([] { return GPUSLICE_REAL(cuCtxSynchronize)(); });
}
GPUSLICE_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  gpuslice::interposer::BeforeContextSynchronize();
  return Synchronising([&] { return GPUSLICE_REAL(cuCtxSynchronize_v2)(ctx); });
}
GPUSLICE_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  return Synchronising([&] { return GPUSLICE_REAL(cuStreamSynchronize)(stream); });
}
GPUSLICE_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream stream) {
  return Synchronising([&] { return GPUSLICE_REAL(cuStreamSynchronize_ptsz)(stream); });
}
GPUSLICE_EXPORT CUresult cuEventSynchronize(CUevent event) {
  return Synchronising([&] { return GPUSLICE_REAL(cuEventSynchronize)(event); });
}
