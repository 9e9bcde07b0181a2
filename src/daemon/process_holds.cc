#include "daemon/process_holds.h"

#include <utility>

namespace gpuslice::daemon {

ProcessHolds::ProcessHolds(audit::ProcessActions* system, StartTicks start_ticks)
    : system_(system), start_ticks_(std::move(start_ticks)) {}

bool ProcessHolds::Denied(uint32_t pid) const {
  const std::optional<uint64_t> now = start_ticks_(pid);
  port::MutexLock lock(&mu_);
  auto it = denied_.find(pid);
  if (it == denied_.end()) return false;
  if (now && *now == it->second) return true;
  denied_.erase(it);  // gone, or its pid reused
  return false;
}

bool ProcessHolds::Face::Stop(uint32_t pid) {
  if (const std::optional<uint64_t> start = denies_ ? holds_->start_ticks_(pid) : std::nullopt) {
    port::MutexLock lock(&holds_->mu_);
    holds_->denied_[pid] = *start;
  }
  return holds_->system_->Stop(pid);
}

bool ProcessHolds::Face::Continue(uint32_t pid) {
  if (!denies_) return !holds_->Denied(pid) && holds_->system_->Continue(pid);
  {
    port::MutexLock lock(&holds_->mu_);
    holds_->denied_.erase(pid);
  }
  return holds_->system_->Continue(pid);
}

}  // namespace gpuslice::daemon
