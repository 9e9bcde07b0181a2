// clock.h — CLOCK_MONOTONIC in nanoseconds, the one clock every gpuslice
// process shares (the pacing boards compare times across processes).
//
// clock_gettime goes through the vDSO: no syscall, safe on the hot path.
#ifndef GPUSLICE_PORT_CLOCK_H_
#define GPUSLICE_PORT_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace gpuslice::port {

inline uint64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_CLOCK_H_
