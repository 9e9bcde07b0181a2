#include "daemon/board_sampler.h"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/board_roster.h"
#include "core/shared_word.h"
#include "port/clock.h"

namespace gpuslice::daemon {
namespace {

constexpr uint64_t kRefreshNs = 1'000'000'000;  // roster and new boards

bool Busy(const core::BoardMember& m) { return static_cast<int32_t>(core::LoadAcquire(m.busy_processes)) > 0; }

}  // namespace

void BoardSampler::Credit(const core::Board& board, const std::map<uint64_t, Listed>& listed, policy::ShareMode shares,
                          uint64_t now_ns, double seconds, std::map<std::string, double>* out) {
  const uint64_t timeout = core::PacingConfig{}.member_timeout_ns;
  // The listed, live rows with work queued.
  const Listed* busy[core::kBoardMembers];
  int busy_count = 0;
  uint64_t busy_weight = 0;
  const Listed* holder = nullptr;
  const int holder_row = core::TurnHolder(board);
  for (int i = 0; i < core::kBoardMembers; ++i) {
    const core::BoardMember& m = board.members[i];
    const uint64_t id = core::LoadAcquire(m.vgpu_id);
    if (id == 0) continue;
    const auto it = listed.find(id);
    if (it == listed.end()) continue;
    const uint64_t beat = core::LoadAcquire(m.heartbeat_ns);
    if (beat + timeout <= now_ns || !Busy(m)) continue;
    busy[busy_count++] = &it->second;
    busy_weight += std::max<uint32_t>(it->second.weight, 1);
    if (i == holder_row) holder = &it->second;
  }
  if (shares == policy::ShareMode::kTurns || (holder != nullptr && holder->cap_pct != 0)) {
    if (holder != nullptr) {
      (*out)[holder->name] += seconds;
      return;
    }
    for (int k = 0; k < busy_count; ++k) (*out)[busy[k]->name] += seconds / busy_count;
    return;
  }
  for (int k = 0; k < busy_count; ++k) {
    (*out)[busy[k]->name] += seconds * std::max<uint32_t>(busy[k]->weight, 1) / static_cast<double>(busy_weight);
  }
}

BoardSampler::BoardSampler(std::vector<Gpu> gpus, MapBoard map_board, std::string roster_path, policy::ShareMode shares)
    : map_board_(std::move(map_board)), roster_path_(std::move(roster_path)), shares_(shares) {
  for (Gpu& g : gpus) watched_.push_back(Watched{g, {}, 0, {}});
  thread_ = std::thread([this] { Loop(); });
  pthread_setname_np(thread_.native_handle(), "board-sampler");  // seen in top -H and /proc
}

BoardSampler::~BoardSampler() {
  {
    port::MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

std::map<std::string, double> BoardSampler::Take(uint32_t index) {
  port::MutexLock lock(&mu_);
  auto it = credited_.find(index);
  if (it == credited_.end()) return {};
  std::map<std::string, double> out = std::move(it->second);
  credited_.erase(it);
  return out;
}

void BoardSampler::Refresh(uint64_t now_ns) {
  refreshed_ns_ = now_ns;
  struct stat st {};
  if (stat(roster_path_.c_str(), &st) == 0 &&
      (st.st_mtim.tv_sec != roster_mtime_.tv_sec || st.st_mtim.tv_nsec != roster_mtime_.tv_nsec)) {
    std::ifstream in(roster_path_);
    std::stringstream text;
    text << in.rdbuf();
    auto roster = core::ParseRoster(text.str());
    if (roster.ok()) {
      roster_mtime_ = st.st_mtim;
      for (Watched& w : watched_) {
        w.listed.clear();
        // Names of vGPUs gone: what they were credited is handed over at the
        // next flush, then they go.
        for (auto it = w.pending.begin(); it != w.pending.end();) it = it->second == 0 ? w.pending.erase(it) : ++it;
      }
      for (const core::RosterEntry& e : roster.value()) {
        for (Watched& w : watched_) {
          if (w.gpu.uuid == e.gpu) w.listed[e.vgpu_id] = Listed{e.name, e.weight, e.cap_pct};
        }
      }
    } else {
      spdlog::warn("GPU time per vGPU: cannot read the roster {}: {}", roster_path_, roster.status().message());
    }
  }
  for (Watched& w : watched_) {
    if (w.board.data() != nullptr) continue;
    auto mapped = map_board_(w.gpu.uuid);
    if (mapped.ok()) w.board = std::move(mapped.value());
  }
}

bool BoardSampler::SampleAll(uint64_t now_ns) {
  bool any_active = false;
  for (Watched& w : watched_) {
    if (w.board.data() == nullptr || w.listed.empty()) continue;
    const auto& board = *static_cast<const core::Board*>(w.board.data());
    const uint64_t since = w.last_ns == 0 ? 0 : std::min(now_ns - w.last_ns, kMaxCreditNs);
    w.last_ns = now_ns;
    const bool active = core::TurnHolder(board) >= 0;
    any_active = any_active || active;
    // Into the thread's own totals (their names stay, so no allocation once
    // every vGPU has run), handed over under the lock every kFlushSamples.
    if (since > 0) Credit(board, w.listed, shares_, now_ns, static_cast<double>(since) / 1e9, &w.pending);
    if (++w.pending_samples < kFlushSamples && active) continue;
    w.pending_samples = 0;
    port::MutexLock lock(&mu_);
    for (auto& [name, s] : w.pending) {
      if (s == 0) continue;
      credited_[w.gpu.index][name] += s;
      s = 0;
    }
  }
  return any_active;
}

void BoardSampler::Loop() {
  port::MutexLock lock(&mu_);
  while (!stop_) {
    lock.Unlock();
    const uint64_t now = port::MonotonicNanos();
    if (refreshed_ns_ == 0 || now - refreshed_ns_ >= kRefreshNs) Refresh(now);
    const bool active = SampleAll(now);
    lock.Lock();
    cv_.WaitFor(&mu_, std::chrono::nanoseconds(active ? kActivePeriodNs : kIdlePeriodNs), [this] {
      mu_.AssertHeld();
      return stop_;
    });
  }
}

}  // namespace gpuslice::daemon
