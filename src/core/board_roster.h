// board_roster.h — which rows of a pacing board (core/pacing_board.h) a
// process may believe, and what of them.
//
// Every process of every vGPU on a GPU can write every row of that GPU's
// board: the board is shared memory they all map read-write. A row's level
// (latency-critical or not, and its rank), weight and cap decide who holds
// whom and who gets turns, so a tenant that wrote a fake latency-critical row
// held every best-effort vGPU on its GPU (issue 11: a victim's launches fell
// from 2.0 M to 0.1 M in 5 s). Those facts therefore come from the *roster*:
// a file, `<vgpu dir>/roster`, that whoever manages the node writes into
// every vGPU's directory from the vGPUs' read-only `limits`
// (node/node_schedule.h), and that tenants can read but not write (mode
// 0444 in a directory they do not own; a read-only mount in a container).
// A process that has a roster believes a board row only when the roster
// lists the row's vGPU id on that GPU, and takes its level, weight and cap
// from the roster; a row the roster does not list is ignored: it neither
// holds, nor demands, nor takes turns.
//
// What the roster does not stop (docs/design.md, "Forged board entries"):
// a forged row that carries a *listed* vGPU's id (bounded by each victim's
// hold budget, core/hold_budget.h), and writes to the turn word and to rows'
// times and virtual times (bounded by core/turn_floor.h).
//
// Format (text, so that an operator can read it), one line per vGPU and GPU:
//   gpuslice-roster 1
//   <gpu uuid, 32 hex> <vgpu id, 16 hex> <level word> <weight> <cap %> <name>
//
// FormatRoster and ParseRoster allocate (slow paths: the manager, and a
// process's compute thread). BoardTrust is the launch path's view: Find is
// lock-free, allocation-free and syscall-free; Reset is called by one thread
// at a time (the compute thread), concurrently with any number of Finds.
#ifndef GPUSLICE_CORE_BOARD_ROSTER_H_
#define GPUSLICE_CORE_BOARD_ROSTER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuslice::core {

inline constexpr char kRosterFileName[] = "roster";
// Also written as `<state dir>/roster.d/roster`, the node's one copy, which
// the Kubernetes plugin mounts read-only into pods as `<vgpu dir>/roster.d`
// (a directory: a file bind mount would pin the inode the next roster
// replaces). A process reads `<vgpu dir>/roster`, else that.
inline constexpr char kRosterDirName[] = "roster.d";
inline constexpr char kRosterHeader[] = "gpuslice-roster 1";

struct RosterEntry {
  std::array<uint8_t, 16> gpu{};
  uint64_t vgpu_id = 0;  // core::VgpuIdOf
  uint32_t level = 0;    // core::LevelWord
  uint32_t weight = 100;
  uint32_t cap_pct = 0;
  std::string name;
};

std::string FormatRoster(const std::vector<RosterEntry>& entries);
// Errors name the line and say what to do.
StatusOr<std::vector<RosterEntry>> ParseRoster(const std::string& text);

// What a process believes of another vGPU's row.
struct TrustedMember {
  uint32_t level = 0;
  uint32_t weight = 100;
  uint32_t cap_pct = 0;
};

// The vGPUs one process believes on one GPU's board, by id.
class BoardTrust {
 public:
  // The most vGPUs it holds; a board has 64 rows, so a roster listing more
  // for one GPU lists vGPUs that cannot all be on it at once. Further ones
  // are not believed.
  static constexpr int kCapacity = 128;

  // Believes exactly `members` (id, what) from now on. One caller at a time.
  void Reset(const std::vector<std::pair<uint64_t, TrustedMember>>& members);
  // Whether `vgpu_id` is believed, and what of it. Any thread.
  bool Find(uint64_t vgpu_id, TrustedMember* out) const;
  int size() const { return sizes_[current_.load(std::memory_order_acquire)].load(std::memory_order_relaxed); }

 private:
  static constexpr int kSlots = 2 * kCapacity;  // open addressing, at most half full
  struct Slot {
    std::atomic<uint64_t> id{0};
    std::atomic<uint64_t> what{0};  // level << 32 | weight << 16 | cap
  };
  // Two tables: Reset fills the one readers are not using, then switches.
  // (A reader still probing the old table when the next Reset starts to
  // refill it reads atomics at worst out of date: one gate decision.)
  Slot tables_[2][kSlots];
  std::atomic<int> sizes_[2] = {0, 0};
  std::atomic<int> current_{0};
};

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_BOARD_ROSTER_H_
