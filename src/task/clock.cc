#include "task/clock.h"

#include <chrono>

namespace gpuslice::task {

namespace {
class Steady final : public Clock {
 public:
  uint64_t NowNs() override {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }
};
}  // namespace

Clock* SteadyClock() {
  static Steady* clock = new Steady();  // never destroyed: workers may outlive statics
  return clock;
}

}  // namespace gpuslice::task
