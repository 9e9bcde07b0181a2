#include "node/schedule_worker.h"

#include <spdlog/spdlog.h>

namespace gpuslice::node {

ScheduleWorker::ApplyFn ScheduleWorker::NodeSchedule(core::VgpuStore store, policy::TimeslicePolicyConfig config) {
  return [store = std::move(store), config](LimitsChange* change) {
    return ApplyNodeSchedule(store, config, nullptr, change);
  };
}

ScheduleWorker::ScheduleWorker(ApplyFn apply, Passes passes) : apply_(std::move(apply)) {
  if (passes == Passes::kBackground) thread_ = std::thread([this] { Loop(); });
}

ScheduleWorker::~ScheduleWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ScheduleWorker::Request() {
  if (!thread_.joinable()) {
    (void)RunPass(nullptr);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = true;
  }
  cv_.notify_one();
}

Status ScheduleWorker::ApplyNow(LimitsChange* change) { return RunPass(change); }

uint64_t ScheduleWorker::passes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return passes_;
}

Status ScheduleWorker::RunPass(LimitsChange* change) {
  Status s;
  {
    std::lock_guard<std::mutex> apply_lock(apply_mu_);
    s = apply_(change);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++passes_;
  if (!s.ok()) spdlog::warn("compute schedule not updated: {}", s.message());
  return s;
}

void ScheduleWorker::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return pending_ || stop_; });
    if (stop_) return;
    pending_ = false;
    lock.unlock();
    (void)RunPass(nullptr);
    lock.lock();
  }
}

}  // namespace gpuslice::node
