#include "node/schedule_worker.h"

#include <spdlog/spdlog.h>

#include <optional>

namespace gpuslice::node {

ScheduleWorker::ApplyFn ScheduleWorker::NodeSchedule(core::VgpuStore store, policy::TimeslicePolicyConfig config,
                                                     const OccupancyCell* occupancy) {
  return [store = std::move(store), config, occupancy](LimitsChange* change) {
    const std::optional<GpuOccupancy> now = occupancy != nullptr ? occupancy->Get() : std::nullopt;
    return ApplyNodeSchedule(store, config, nullptr, change, now ? &*now : nullptr);
  };
}

ScheduleWorker::ScheduleWorker(ApplyFn apply, Passes passes) : apply_(std::move(apply)) {
  if (passes == Passes::kBackground) thread_ = std::thread([this] { Loop(); });
}

ScheduleWorker::~ScheduleWorker() {
  {
    port::MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void ScheduleWorker::Request() {
  if (!thread_.joinable()) {
    (void)RunPass(nullptr);
    return;
  }
  {
    port::MutexLock lock(&mu_);
    pending_ = true;
  }
  cv_.NotifyOne();
}

Status ScheduleWorker::ApplyNow(LimitsChange* change) { return RunPass(change); }

uint64_t ScheduleWorker::passes() const {
  port::MutexLock lock(&mu_);
  return passes_;
}

Status ScheduleWorker::RunPass(LimitsChange* change) {
  Status s;
  {
    port::MutexLock apply_lock(&apply_mu_);
    s = apply_(change);
  }
  port::MutexLock lock(&mu_);
  ++passes_;
  if (!s.ok()) spdlog::warn("compute schedule not updated: {}", s.message());
  return s;
}

void ScheduleWorker::Loop() {
  port::MutexLock lock(&mu_);
  while (true) {
    cv_.Wait(&mu_, [this] {
      mu_.AssertHeld();
      return pending_ || stop_;
    });
    if (stop_) return;
    pending_ = false;
    lock.Unlock();
    (void)RunPass(nullptr);
    lock.Lock();
  }
}

}  // namespace gpuslice::node
