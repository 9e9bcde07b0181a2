#include "daemon/cap_throttle.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "port/replace_file.h"

namespace gpuslice::daemon {

std::optional<uint64_t> ProcessStartTicks(uint32_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  // The command name (field 2) may hold spaces and parentheses: fields are
  // counted from the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return std::nullopt;
  }
  try {
    return std::stoull(field);
  } catch (...) {
    return std::nullopt;
  }
}

bool ProcessStoppedOrGone(uint32_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  bool seen = false;
  for (std::string line; std::getline(in, line);) {
    seen = true;
    if (line.starts_with("State:")) {
      const size_t at = line.find_first_not_of(" \t", 6);
      if (at != std::string::npos && std::string("TtZX").find(line[at]) != std::string::npos) return true;
    } else if (line.starts_with("SigPnd:") || line.starts_with("ShdPnd:")) {
      // A SIGSTOP not yet taken (a process not scheduled since, or inside
      // a long system call) is still on its way; a SIGCONT would have
      // discarded it.
      try {
        if ((std::stoull(line.substr(7), nullptr, 16) >> (SIGSTOP - 1)) & 1) return true;
      } catch (...) {
      }
    }
  }
  return !seen;
}

CapThrottle::CapThrottle(audit::ProcessActions* actions, std::string leftovers_path, uint64_t period_ns,
                         bool run_thread, StartTicks start_ticks, StoppedOrGone stopped_or_gone)
    : actions_(actions),
      leftovers_path_(std::move(leftovers_path)),
      period_ns_(period_ns),
      start_ticks_(std::move(start_ticks)),
      stopped_or_gone_(std::move(stopped_or_gone)) {
  if (run_thread) thread_ = std::thread([this] { Loop(); });
}

CapThrottle::~CapThrottle() {
  {
    port::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  std::vector<uint32_t> all;
  {
    port::MutexLock lock(&mu_);
    for (const auto& [key, t] : targets_) all.insert(all.end(), t.pids.begin(), t.pids.end());
    targets_.clear();
    WriteLeftoversLocked();
  }
  ContinueAll(all);
  ContinueAll(stopped_);
}

void CapThrottle::Set(const std::string& key, Target target) {
  std::vector<uint32_t> dropped;
  {
    port::MutexLock lock(&mu_);
    if (auto it = targets_.find(key); it != targets_.end()) {
      for (uint32_t pid : it->second.pids) {
        if (std::find(target.pids.begin(), target.pids.end(), pid) == target.pids.end()) dropped.push_back(pid);
      }
    }
    targets_[key] = std::move(target);
    WriteLeftoversLocked();
  }
  cv_.NotifyAll();
  ContinueAll(dropped);
}

void CapThrottle::Clear(const std::string& key) {
  std::vector<uint32_t> pids;
  {
    port::MutexLock lock(&mu_);
    auto it = targets_.find(key);
    if (it == targets_.end()) return;
    pids = std::move(it->second.pids);
    targets_.erase(it);
    WriteLeftoversLocked();
  }
  ContinueAll(pids);
}

std::map<std::string, CapThrottle::Target> CapThrottle::targets() const {
  port::MutexLock lock(&mu_);
  return targets_;
}

std::vector<uint32_t> CapThrottle::TakeTampered() {
  port::MutexLock lock(&mu_);
  std::vector<uint32_t> out = std::exchange(tampered_, {});
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());  // found again within one call
  return out;
}

void CapThrottle::Cycle(const std::function<bool(uint64_t offset_ns)>& wait_until) {
  std::vector<std::pair<double, std::vector<uint32_t>>> plan;  // duty, pids; shortest duty first
  {
    port::MutexLock lock(&mu_);
    for (const auto& [key, t] : targets_) {
      if (t.duty < 1.0) plan.emplace_back(std::max(t.duty, 0.0), t.pids);
    }
  }
  std::sort(plan.begin(), plan.end());
  // What the last period stopped should still be stopped at its end.
  std::map<uint32_t, int> streaks;
  for (uint32_t pid : stopped_) {
    if (stopped_or_gone_(pid)) continue;
    const int streak = running_when_stopped_[pid] + 1;
    if (streak < kTamperPeriods) {
      streaks[pid] = streak;
      continue;
    }
    port::MutexLock lock(&mu_);
    tampered_.push_back(pid);
  }
  running_when_stopped_ = std::move(streaks);
  // Whatever the last period stopped runs again first: a throttle cleared
  // or changed since then is no longer in the plan.
  ContinueAll(stopped_);
  stopped_.clear();
  for (const auto& [duty, pids] : plan) {
    if (!wait_until(static_cast<uint64_t>(duty * static_cast<double>(period_ns_)))) {
      ContinueAll(stopped_);
      stopped_.clear();
      return;
    }
    for (uint32_t pid : pids) {
      if (actions_->Stop(pid)) stopped_.push_back(pid);
    }
  }
  if (!wait_until(period_ns_)) {
    ContinueAll(stopped_);
    stopped_.clear();
  }
}

void CapThrottle::Loop() {
  for (;;) {
    {
      port::MutexLock lock(&mu_);
      cv_.Wait(&mu_, [this] {
        mu_.AssertHeld();
        if (stopping_) return true;
        return std::any_of(targets_.begin(), targets_.end(), [](const auto& e) { return e.second.duty < 1.0; });
      });
      if (stopping_) break;
    }
    const auto start = std::chrono::steady_clock::now();
    Cycle([this, start](uint64_t offset_ns) {
      const auto until = start + std::chrono::nanoseconds(offset_ns);
      port::MutexLock lock(&mu_);
      while (!stopping_) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= until) return true;
        cv_.WaitFor(&mu_, until - now);
      }
      return false;
    });
  }
  ContinueAll(stopped_);
  stopped_.clear();
}

void CapThrottle::ContinueAll(const std::vector<uint32_t>& pids) {
  for (uint32_t pid : pids) actions_->Continue(pid);
}

void CapThrottle::WriteLeftoversLocked() {
  if (leftovers_path_.empty()) return;
  std::set<uint32_t> pids;
  for (const auto& [key, t] : targets_) pids.insert(t.pids.begin(), t.pids.end());
  if (pids.empty()) {
    unlink(leftovers_path_.c_str());
    return;
  }
  std::ostringstream out;
  for (uint32_t pid : pids) {
    if (auto ticks = start_ticks_(pid)) out << pid << ' ' << *ticks << '\n';
  }
  if (Status s = port::ReplaceFile(leftovers_path_, out.str(), 0600); !s.ok()) {
    spdlog::warn("{}: a daemon that dies mid-throttle leaves its processes stopped", s.message());
  }
}

std::map<uint32_t, uint64_t> SameProcessesIn(const std::string& path,
                                             const std::function<std::optional<uint64_t>(uint32_t)>& start_ticks) {
  std::map<uint32_t, uint64_t> same;
  std::ifstream in(path);
  uint64_t pid = 0;
  uint64_t ticks = 0;
  while (in >> pid >> ticks) {
    if (pid != 0 && pid <= UINT32_MAX && start_ticks(static_cast<uint32_t>(pid)) == ticks) {
      same[static_cast<uint32_t>(pid)] = ticks;
    }
  }
  return same;
}

int CapThrottle::ContinueLeftovers(const std::string& path, audit::ProcessActions* actions,
                                   const StartTicks& start_ticks) {
  int continued = 0;
  // Only the process that was throttled: a pid reused since is another's.
  for (const auto& [pid, ticks] : SameProcessesIn(path, start_ticks)) {
    if (actions->Continue(pid)) ++continued;
  }
  unlink(path.c_str());
  return continued;
}

}  // namespace gpuslice::daemon
