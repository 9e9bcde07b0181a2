#include "node/node_schedule.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "core/board_roster.h"
#include "core/pacing_board.h"
#include "core/shared_word.h"
#include "port/file_lock.h"

namespace gpuslice::node {
namespace {

using Uuid = std::array<uint8_t, 16>;

struct OpenVgpu {
  std::string name;
  core::VgpuHandle handle;
  std::array<uint64_t, core::kMaxDevices> wanted{};
  std::array<uint64_t, core::kMaxDevices> beside_lc{};
  std::array<bool, core::kMaxDevices> alone_beside_lc{};
};

// A device's flags with the node's share mode, and whether the vGPU is the
// lone best-effort one there beside an LC, in them.
uint32_t ScheduledFlags(uint32_t flags, const policy::TimeslicePolicyConfig& config, bool alone_beside_lc) {
  flags &= ~(core::kDeviceFlagShareTurns | core::kDeviceFlagExclusiveTurns | core::kDeviceFlagLoneBestEffort);
  if (config.be_shares == policy::ShareMode::kTurns) flags |= core::kDeviceFlagShareTurns;
  if (config.be_turns == policy::TurnStyle::kExclusive) flags |= core::kDeviceFlagExclusiveTurns;
  if (alone_beside_lc) flags |= core::kDeviceFlagLoneBestEffort;
  return flags;
}

StatusOr<port::MappedFile> OpenLimitsForWrite(const std::string& vgpu_dir) {
  const std::string path = vgpu_dir + "/limits";
  auto file = port::MappedFile::Open(path, sizeof(core::Limits), port::MappedFile::Access::kReadWrite);
  if (file.ok()) return file;
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && chmod(path.c_str(), (st.st_mode & 07777) | S_IWUSR) == 0) {
    file = port::MappedFile::Open(path, sizeof(core::Limits), port::MappedFile::Access::kReadWrite);
    chmod(path.c_str(), st.st_mode & 07777);
    if (file.ok()) return file;
  }
  return Status::Error("cannot write " + path + " (" + file.status().message() +
                       "); run gpuslice as the user who owns the state directory");
}

// Every process reads these words with atomic loads (the memory limit at each
// allocation), so each store is in force at once; the generation bump that
// follows tells them to re-read the rest.
void WriteChange(const LimitsChange& c, core::Limits* w) {
  const uint32_t n = std::min(w->device_count, core::kMaxDevices);
  for (uint32_t i = 0; i < n; ++i) {
    core::DeviceLimit& d = w->devices[i];
    if (c.memory_limit_bytes) core::StoreRelease(d.memory_limit_bytes, *c.memory_limit_bytes);
    if (c.compute_share_pct) core::StoreRelease(d.compute_share_pct, *c.compute_share_pct);
    if (c.priority) core::StoreRelease(d.priority, *c.priority);
    if (i < c.compute_cap_pct.size()) core::StoreRelease(d.compute_cap_pct, c.compute_cap_pct[i]);
    // Read once, at a process's attach: written only while none runs.
    if (i < c.gpu_uuids.size()) memcpy(d.uuid, c.gpu_uuids[i].data(), sizeof d.uuid);
  }
}

// Writes `text` as `dir`'s roster unless it already is: a new file renamed
// over the old one (readers see one or the other, whole), read-only.
Status WriteRosterIfChanged(const std::string& dir, const std::string& text) {
  const std::string path = dir + "/" + core::kRosterFileName;
  if (int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    std::string current(text.size() + 1, '\0');
    const ssize_t n = read(fd, current.data(), current.size());
    close(fd);
    if (n == static_cast<ssize_t>(text.size()) && current.compare(0, text.size(), text) == 0) return Status::Ok();
  }
  const std::string tmp = dir + "/.roster-" + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
  bool ok = fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) ok = close(fd) == 0 && ok;
  if (ok && rename(tmp.c_str(), path.c_str()) == 0) return Status::Ok();
  const std::string why = strerror(errno);
  unlink(tmp.c_str());
  return Status::Error("cannot write the roster " + path + ": " + why +
                       "; other vGPUs' processes on its GPUs ignore this vGPU's board rows until it is written");
}

}  // namespace

Status ApplyNodeSchedule(const core::VgpuStore& store, const policy::TimeslicePolicyConfig& config,
                         NodeScheduleResult* result, LimitsChange* change, const GpuOccupancy* occupancy) {
  struct stat st;
  if (stat((store.root() + "/vgpus").c_str(), &st) != 0) {  // no vGPU ever made here
    return change == nullptr ? Status::Ok() : Status::Error("no vGPU '" + change->vgpu + "' on this node");
  }
  auto lock = port::LockFile(store.root() + "/.schedule.lock", port::LockMode::kExclusive, port::kStateLockWait);
  if (!lock.ok()) return lock.status();
  std::optional<port::MappedFile> changed_file;
  if (change != nullptr) {
    auto file = OpenLimitsForWrite(store.DirOf(change->vgpu));
    if (!file.ok()) return file.status();
    WriteChange(*change, static_cast<core::Limits*>(file->data()));
    change->written = true;
    changed_file = std::move(file.value());
  }

  Status first_error;
  std::vector<std::unique_ptr<OpenVgpu>> vgpus;
  for (const std::string& name : store.List()) {
    auto handle = core::VgpuHandle::Open(store.DirOf(name), port::MappedFile::Access::kReadOnly);
    if (!handle.ok()) {
      // Removed since List(), or corrupted: it runs nothing we can schedule.
      if (first_error.ok() && stat(store.DirOf(name).c_str(), &st) == 0) first_error = handle.status();
      continue;
    }
    vgpus.push_back(std::make_unique<OpenVgpu>(OpenVgpu{name, std::move(handle.value()), {}}));
  }

  // GPU -> (vGPU, device index) of every vGPU that includes it.
  std::map<Uuid, std::vector<std::pair<OpenVgpu*, uint32_t>>> by_gpu;
  for (auto& v : vgpus) {
    const core::Limits& limits = v->handle.limits();
    for (uint32_t i = 0; i < limits.device_count; ++i) {
      const core::DeviceLimit& d = limits.devices[i];
      if ((d.flags & core::kDeviceFlagPresent) == 0) continue;
      Uuid uuid;
      memcpy(uuid.data(), d.uuid, uuid.size());
      by_gpu[uuid].emplace_back(v.get(), i);
    }
  }
  // The roster (core/board_roster.h): who is on each GPU, and at what
  // level, weight and cap, from their limits, which tenants cannot write.
  std::vector<core::RosterEntry> roster;
  for (const auto& [uuid, members] : by_gpu) {
    for (const auto& [v, i] : members) {
      const core::Limits& limits = v->handle.limits();
      const core::DeviceLimit& d = limits.devices[i];
      if (stat((v->handle.dir() + "/limits").c_str(), &st) != 0) continue;
      core::RosterEntry e;
      e.gpu = uuid;
      e.vgpu_id = core::VgpuIdOf(std::string(limits.name, strnlen(limits.name, sizeof limits.name)), st.st_ino);
      e.level = core::LoadAcquire(d.priority);
      e.weight = std::min<uint32_t>(core::LoadAcquire(d.compute_share_pct), 100);
      e.cap_pct = std::min<uint32_t>(core::LoadAcquire(d.compute_cap_pct), 100);
      e.name = v->name;
      roster.push_back(std::move(e));
    }
  }
  const std::string roster_text = core::FormatRoster(roster);
  const std::string node_copy = store.root() + "/" + core::kRosterDirName;
  if (mkdir(node_copy.c_str(), 0755) != 0 && errno != EEXIST && first_error.ok()) {
    first_error = Status::Error("cannot create " + node_copy + ": " + strerror(errno));
  }
  std::vector<std::string> dirs = {node_copy};
  for (auto& v : vgpus) dirs.push_back(v->handle.dir());
  for (const std::string& dir : dirs) {
    // A vGPU removed meanwhile is no failure (the garbage collector does not
    // take this lock): its processes are gone, and so the change a resize
    // wrote above, which they saw and ended on, was delivered.
    if (Status s = WriteRosterIfChanged(dir, roster_text);
        !s.ok() && first_error.ok() && stat(dir.c_str(), &st) == 0) {
      first_error = s;
    }
  }

  for (const auto& [uuid, members] : by_gpu) {
    const GpuOccupancy::OnGpu* on_gpu = nullptr;
    if (occupancy != nullptr) {
      if (auto it = occupancy->gpus.find(uuid); it != occupancy->gpus.end()) on_gpu = &it->second;
    }
    std::vector<policy::VgpuOnGpu> inputs;
    for (const auto& [v, i] : members) {
      const core::DeviceLimit& d = v->handle.limits().devices[i];
      inputs.push_back({v->name, core::LevelClass(d.priority), d.compute_share_pct, core::LevelRank(d.priority),
                        on_gpu == nullptr || on_gpu->vgpus.count(v->name) != 0});
    }
    const uint32_t others = on_gpu != nullptr ? static_cast<uint32_t>(on_gpu->other_pids.size()) : 0;
    const std::vector<uint64_t> slices = policy::ComputeTimeslices(inputs, config, others);
    const std::vector<uint64_t> beside_lc = policy::ComputeTimeslicesBesideLc(inputs, config, others);
    const std::vector<bool> alone = policy::AloneBesideLc(inputs, others);
    for (size_t k = 0; k < members.size(); ++k) {
      members[k].first->wanted[members[k].second] = slices[k];
      members[k].first->beside_lc[members[k].second] = beside_lc[k];
      members[k].first->alone_beside_lc[members[k].second] = alone[k];
    }
  }

  bool change_bumped = false;
  for (auto& v : vgpus) {
    const bool is_change = changed_file && v->name == change->vgpu;
    const core::Limits& current = v->handle.limits();
    bool changed = is_change;
    for (uint32_t i = 0; i < current.device_count; ++i) {
      if (core::LoadAcquire(current.devices[i].timeslice_us) != v->wanted[i] ||
          core::LoadAcquire(current.devices[i].timeslice_beside_lc_us) != v->beside_lc[i] ||
          core::LoadAcquire(current.devices[i].flags) !=
              ScheduledFlags(core::LoadAcquire(current.devices[i].flags), config, v->alone_beside_lc[i])) {
        changed = true;
      }
    }
    if (!changed) continue;
    port::MappedFile opened;
    if (!is_change) {
      auto writable = OpenLimitsForWrite(v->handle.dir());
      if (!writable.ok()) {
        if (first_error.ok()) first_error = writable.status();
        continue;
      }
      opened = std::move(writable.value());
    }
    auto* limits = static_cast<core::Limits*>(is_change ? changed_file->data() : opened.data());
    for (uint32_t i = 0; i < limits->device_count && i < core::kMaxDevices; ++i) {
      core::StoreRelaxed(limits->devices[i].timeslice_us, v->wanted[i]);
      core::StoreRelaxed(limits->devices[i].timeslice_beside_lc_us, v->beside_lc[i]);
      core::StoreRelaxed(limits->devices[i].flags,
                         ScheduledFlags(core::LoadRelaxed(limits->devices[i].flags), config, v->alone_beside_lc[i]));
    }
    // Release: a reader that sees the new generation sees the new slices.
    core::FetchAddRelease(limits->generation, 1);
    change_bumped = change_bumped || is_change;
    if (result != nullptr) result->changed.push_back(v->name);
  }
  // A changed vGPU the pass could not read is still bumped: its processes
  // must see what was written.
  if (changed_file && !change_bumped) {
    core::FetchAddRelease(static_cast<core::Limits*>(changed_file->data())->generation, 1);
    if (result != nullptr) result->changed.push_back(change->vgpu);
  }
  return first_error;
}

}  // namespace gpuslice::node
