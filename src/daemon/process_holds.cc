#include "daemon/process_holds.h"

#include <spdlog/spdlog.h>

#include <sstream>
#include <utility>

#include "daemon/cap_throttle.h"
#include "port/replace_file.h"

namespace gpuslice::daemon {

ProcessHolds::ProcessHolds(audit::ProcessActions* system, StartTicks start_ticks, std::string denied_path)
    : system_(system), start_ticks_(std::move(start_ticks)), denied_path_(std::move(denied_path)) {
  if (denied_path_.empty()) return;
  port::MutexLock lock(&mu_);
  denied_ = SameProcessesIn(denied_path_, start_ticks_);  // only the processes that were denied
  if (!denied_.empty()) spdlog::info("{} process(es) denied by a previous daemon stay denied", denied_.size());
  SaveLocked();
}

void ProcessHolds::SaveLocked() const {
  if (denied_path_.empty()) return;
  std::ostringstream out;
  for (const auto& [pid, ticks] : denied_) out << pid << ' ' << ticks << '\n';
  if (Status s = port::ReplaceFile(denied_path_, out.str(), 0600); !s.ok()) {
    spdlog::warn("{}: a daemon restarted now would continue the processes its audits denied", s.message());
  }
}

bool ProcessHolds::Denied(uint32_t pid) const {
  const std::optional<uint64_t> now = start_ticks_(pid);
  port::MutexLock lock(&mu_);
  auto it = denied_.find(pid);
  if (it == denied_.end()) return false;
  if (now && *now == it->second) return true;
  denied_.erase(it);  // gone, or its pid reused
  SaveLocked();
  return false;
}

bool ProcessHolds::Face::Stop(uint32_t pid) {
  if (const std::optional<uint64_t> start = denies_ ? holds_->start_ticks_(pid) : std::nullopt) {
    port::MutexLock lock(&holds_->mu_);
    holds_->denied_[pid] = *start;
    holds_->SaveLocked();
  }
  return holds_->system_->Stop(pid);
}

bool ProcessHolds::Face::Continue(uint32_t pid) {
  if (!denies_) return !holds_->Denied(pid) && holds_->system_->Continue(pid);
  {
    port::MutexLock lock(&holds_->mu_);
    if (holds_->denied_.erase(pid) != 0) holds_->SaveLocked();
  }
  return holds_->system_->Continue(pid);
}

}  // namespace gpuslice::daemon
