#include "daemon/schedule_worker.h"

#include <spdlog/spdlog.h>

namespace gpuslice::daemon {

ScheduleWorker::ScheduleWorker(std::function<Status()> apply) : apply_(std::move(apply)) {
  thread_ = std::thread([this] { Loop(); });
}

ScheduleWorker::~ScheduleWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ScheduleWorker::Request() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = true;
  }
  cv_.notify_one();
}

Status ScheduleWorker::ApplyNow() { return RunPass(); }

uint64_t ScheduleWorker::passes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return passes_;
}

Status ScheduleWorker::RunPass() {
  Status s;
  {
    std::lock_guard<std::mutex> apply_lock(apply_mu_);
    if (apply_) s = apply_();
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
    (void)RunPass();
    lock.lock();
  }
}

}  // namespace gpuslice::daemon
