// clock.h — the task scheduler's clock, a seam: the real one is the steady
// clock; tests hand in a fake that they advance themselves, so no test
// depends on how long anything took.
//
// Called from any thread (submitters and workers); NowNs() never blocks or
// allocates.
#ifndef GPUSLICE_TASK_CLOCK_H_
#define GPUSLICE_TASK_CLOCK_H_

#include <cstdint>

namespace gpuslice::task {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual uint64_t NowNs() = 0;  // monotonic nanoseconds
};

// std::chrono::steady_clock; process-wide, never destroyed.
Clock* SteadyClock();

}  // namespace gpuslice::task

#endif  // GPUSLICE_TASK_CLOCK_H_
