#include "node/vgpu_view.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>

#include "core/memory_ledger.h"
#include "core/shared_word.h"
#include "core/slice_ceiling.h"

namespace gpuslice::node {
namespace {

uint64_t SelfPidNamespace() {
  static const uint64_t ns = port::SystemProcessProbe().Self().pid_namespace;
  return ns;
}

}  // namespace

std::string FormatGpuUuid(const uint8_t uuid[16]) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[uuid[i] >> 4];
    out += kHex[uuid[i] & 15];
  }
  return out;
}

bool HasMembers(const std::string& dir) {
  const int fd = open((dir + "/members").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = flock(fd, LOCK_EX | LOCK_NB) != 0;
  close(fd);  // drops our lock if we got it
  return held;
}

void SetLcLatencyQuantiles(const core::LcLatencySnapshot* baseline, double window_seconds, LcLatencyView* out) {
  const core::LcLatencySnapshot* over = &out->lifetime;
  core::LcLatencySnapshot recent;
  out->window_seconds.reset();
  out->window_requests = 0;
  if (baseline != nullptr) {
    recent = core::LcLatencyDelta(out->lifetime, *baseline);
    // No request lately: lifetime figures beat none, and say so.
    if (recent.count > 0) {
      over = &recent;
      out->window_seconds = window_seconds;
      out->window_requests = recent.count;
    }
  }
  out->p50_seconds = core::LcLatencyQuantileSeconds(*over, 0.5);
  out->p99_seconds = core::LcLatencyQuantileSeconds(*over, 0.99);
}

VgpuView ReadVgpuView(const core::VgpuHandle& handle, const NodeDevices& node) {
  const core::Limits& limits = handle.limits();
  core::Ledger& ledger = handle.ledger();
  VgpuView view;
  view.name = limits.name;
  view.dir = handle.dir();
  view.generation = core::LoadAcquire(limits.generation);
  const uint32_t device_count = std::min(limits.device_count, core::kMaxDevices);
  core::MemoryLedger account(&limits, &ledger);
  for (uint32_t i = 0; i < device_count; ++i) {
    const core::DeviceLimit& d = limits.devices[i];
    VgpuDeviceView dv;
    if (const port::GpuInfo* gpu = node.Find(d.uuid)) {
      dv.gpu_index = gpu->index;
      dv.gpu_uuid = gpu->uuid_text;
      dv.memory_total_bytes = gpu->memory_total_bytes;
    } else {
      dv.gpu_uuid = FormatGpuUuid(d.uuid);
    }
    dv.memory_limit_bytes = core::LoadAcquire(d.memory_limit_bytes);
    dv.memory_used_bytes = account.UsedBytes(i);
    dv.compute_share_pct = core::LoadAcquire(d.compute_share_pct);
    dv.compute_cap_pct = core::LoadAcquire(d.compute_cap_pct);
    dv.effective_compute_cap_pct = dv.compute_cap_pct;  // VgpuManager tells them apart under a power cap
    const uint32_t level = core::LoadAcquire(d.priority);  // a level word: class and rank
    dv.priority = core::LevelClass(level);
    dv.priority_rank = core::LevelRank(level);
    dv.timeslice_us = core::LoadAcquire(d.timeslice_us);
    dv.timeslice_beside_lc_us = core::LoadAcquire(d.timeslice_beside_lc_us);
    dv.slice_ceiling_us = core::ComputeSliceCeilingUs(d);
    dv.copy_slice_ceiling_us = core::CopySliceCeilingUs(d);
    view.devices.push_back(std::move(dv));
  }
  if (!view.devices.empty()) {
    view.priority = view.devices[0].priority;
    view.priority_rank = view.devices[0].priority_rank;
  }

  const uint32_t high_water = std::min(core::LoadAcquire(ledger.slot_high_water), core::kMaxProcesses);
  for (uint32_t s = 0; s < high_water; ++s) {
    const core::ProcessSlot& slot = ledger.slots[s];
    const uint64_t owner = core::LoadAcquire(slot.owner);
    if (owner == 0 || core::SlotBusy(owner)) continue;
    VgpuProcessView p;
    p.pid = static_cast<uint32_t>(owner >> 32);
    p.pid_namespace = slot.pid_namespace;
    p.same_pid_namespace = slot.pid_namespace == SelfPidNamespace();
    for (uint32_t i = 0; i < device_count; ++i) p.memory_used_bytes.push_back(core::LoadAcquire(slot.used_bytes[i]));
    for (uint32_t i = 0; i < device_count && i < core::ProcessSlot::kApplied; ++i) {
      const uint64_t applied = core::LoadAcquire(slot.applied_timeslice_us[i]);
      p.applied_timeslice_us.push_back(applied);
      view.devices[i].applied_timeslice_us = std::max(view.devices[i].applied_timeslice_us, applied);
    }
    for (const core::PublishedChannelGroup& g : slot.channel_groups) {
      const uint64_t where = core::LoadAcquire(g.where), what = core::LoadRelaxed(g.what);
      if (where == 0) continue;
      p.channel_groups.push_back({static_cast<int>(where >> 32) - 1, static_cast<uint32_t>(where),
                                  static_cast<uint32_t>(what >> 32), static_cast<uint32_t>(what >> 16) & 0xffffu,
                                  static_cast<uint32_t>(what) & 0xffffu});
    }
    view.processes.push_back(std::move(p));
  }
  view.denied_allocations = core::LoadAcquire(ledger.denied_allocations);
  view.reaped_processes = core::LoadAcquire(ledger.reaped_processes);
  view.timeslice_applications = core::LoadAcquire(ledger.timeslice_applications);
  view.timeslice_failures = core::LoadAcquire(ledger.timeslice_failures);
  view.gate_waits = core::LoadAcquire(ledger.gate_waits);
  view.hold_budget_spent = core::LoadAcquire(ledger.hold_budget_spent);
  view.memory_waits = core::PendingMemoryWaits(ledger);
  view.lc_latency.lifetime = core::TakeLcLatencySnapshot(ledger);
  SetLcLatencyQuantiles(nullptr, 0, &view.lc_latency);
  for (core::TaskLevelSnapshot& s : core::TakeTaskLevelSnapshots(ledger)) {
    TaskLevelView& level = view.task_levels.emplace_back();
    level.level = std::move(s.name);
    level.failed = s.failed;
    level.slo_misses = s.slo_misses;
    level.latency.lifetime = s.latency;
    SetLcLatencyQuantiles(nullptr, 0, &level.latency);
  }
  view.has_members = HasMembers(handle.dir());
  return view;
}

}  // namespace gpuslice::node
