#include "core/turn_floor.h"

#include <cstring>

#include "core/vgpu_layout.h"

namespace gpuslice::core {

uint32_t TurnFloorPermille(const std::vector<RosterEntry>& roster, const uint8_t gpu[16], uint64_t self) {
  const RosterEntry* me = nullptr;
  for (const RosterEntry& e : roster) {
    if (e.vgpu_id == self && memcmp(e.gpu.data(), gpu, 16) == 0) me = &e;
  }
  if (me == nullptr || LevelClass(me->level) == Priority::kLatencyCritical) return 0;
  const uint32_t order = LevelOrder(me->level);
  uint64_t weights = 0;
  for (const RosterEntry& e : roster) {
    if (memcmp(e.gpu.data(), gpu, 16) != 0 || LevelClass(e.level) == Priority::kLatencyCritical) continue;
    if (LevelOrder(e.level) > order) return 0;
    if (LevelOrder(e.level) == order) weights += e.weight == 0 ? 100 : e.weight;
  }
  const uint32_t mine = me->weight == 0 ? 100 : me->weight;
  return static_cast<uint32_t>(1000 * static_cast<uint64_t>(mine) / weights);
}

uint32_t OwedTurnPermille(const std::vector<RosterEntry>& roster, const uint8_t gpu[16], uint64_t self) {
  const uint32_t floor = TurnFloorPermille(roster, gpu, self);
  uint32_t lc_caps = 0;
  for (const RosterEntry& e : roster) {
    if (memcmp(e.gpu.data(), gpu, 16) == 0 && LevelClass(e.level) == Priority::kLatencyCritical) {
      lc_caps += e.cap_pct;
    }
  }
  return lc_caps >= 100 ? 0 : floor * (100 - lc_caps) / 100 / 2;
}

bool TurnFloorWatch::Sample(bool wants_gpu, bool holds_turn, uint64_t elapsed_ns) {
  if (!wants_gpu) return false;
  if (elapsed_ns > kMaxSampleNs) elapsed_ns = kMaxSampleNs;
  wanted_ns_ += elapsed_ns;
  if (holds_turn) held_ns_ += elapsed_ns;
  if (wanted_ns_ < kWindowNs) return false;
  held_permille_ = static_cast<uint32_t>(1000 * held_ns_ / wanted_ns_);
  wanted_ns_ = held_ns_ = 0;
  const bool starved = floor_permille_ > 0 && 2 * held_permille_ < floor_permille_;
  return starved_.exchange(starved, std::memory_order_relaxed) != starved;
}

}  // namespace gpuslice::core
