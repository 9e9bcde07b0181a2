#include "node/gpu_occupancy.h"

#include <utility>

namespace gpuslice::node {

bool OccupancyCell::Set(GpuOccupancy now) {
  port::MutexLock lock(&mu_);
  if (value_ && *value_ == now) return false;
  value_ = std::move(now);
  return true;
}

std::optional<GpuOccupancy> OccupancyCell::Get() const {
  port::MutexLock lock(&mu_);
  return value_;
}

}  // namespace gpuslice::node
