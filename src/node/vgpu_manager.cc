#include "node/vgpu_manager.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/byte_size.h"
#include "core/memory_ledger.h"
#include "core/shared_word.h"
#include "core/state_handout.h"
#include "node/flag_values.h"
#include "node/power_cap_file.h"
#include "node/suspend_record.h"
#include "node/vgpu_owner.h"
#include "port/process.h"

namespace gpuslice::node {
namespace {

// The vGPU's suspend state and counters (suspend_record.h) in its view.
void SetSuspendView(const std::string& dir, VgpuView* view) {
  auto read = ReadSuspendRecord(dir);
  if (!read.ok()) {
    view->suspend_detail = read.status().message();
    return;
  }
  const SuspendRecord& r = read.value();
  view->suspend_state = SuspendStateName(r.state);
  view->suspend_detail = r.detail;
  view->suspended_by = r.by;
  view->suspended_bytes = r.state == SuspendState::kRunning ? 0 : r.bytes;
  view->suspended_seconds_total = r.suspended_seconds_total;
  if (r.state != SuspendState::kRunning && r.state != SuspendState::kSuspending && r.since_unix_ms > 0) {
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    view->suspended_seconds_total += static_cast<double>(now - r.since_unix_ms) / 1e3;
  }
  view->suspend_bytes_moved_total = r.bytes_moved_total;
  view->suspends = r.suspends;
  view->resumes = r.resumes;
  view->last_suspend_seconds = r.last_suspend_seconds;
  view->last_resume_seconds = r.last_resume_seconds;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

ino_t InodeOf(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

std::string Limit(uint64_t bytes) {
  return bytes == core::kUnlimited ? std::string("unlimited") : core::FormatByteSize(bytes);
}

// The level word a request asks for (nullopt: none): a class is its rank
// 0, a name resolves through the node's levels.
ApiStatus RequestedLevel(const task::LevelTable& levels, const std::optional<core::Priority>& priority,
                         const std::string& level_name, std::optional<uint32_t>* level) {
  level->reset();
  if (priority) *level = core::LevelWord(*priority, 0);
  if (level_name.empty()) return ApiStatus::Ok();
  // Named as the CLI flag: that is where users type it (the API field is priority_level).
  auto word = ParseLevelFlag("--priority", level_name, levels);
  if (!word.ok()) return {ApiCode::kInvalidArgument, word.status().message()};
  if (priority && core::LevelClass(word.value()) != *priority) {
    return {ApiCode::kInvalidArgument, "priority and priority level '" + level_name +
                                           "' name different classes; give only the level"};
  }
  *level = word.value();
  return ApiStatus::Ok();
}

ApiStatus CheckPercent(const char* what, const std::optional<uint32_t>& pct) {
  if (pct && (*pct < 1 || *pct > 100)) {
    return {ApiCode::kInvalidArgument,
            std::string(what) + " " + std::to_string(*pct) + " is out of range; give a whole percentage from 1 to 100"};
  }
  return ApiStatus::Ok();
}

// Names come from requests: the message must stay one line and short
// whatever was sent, so the name is shown clipped and with control
// characters replaced before the store's own rules judge it.
ApiStatus CheckName(const std::string& name) {
  std::string shown;
  bool printable = true;
  for (char c : name.substr(0, 64)) {
    const bool ok = c >= 0x20 && c < 0x7f;
    printable = printable && ok;
    shown += ok ? c : '?';
  }
  if (name.size() > 64) shown += "...";
  if (!printable || name.size() > core::kMaxNameLength) {
    return {ApiCode::kInvalidArgument, "invalid vGPU name '" + shown + "': use 1 to " +
                                           std::to_string(core::kMaxNameLength) +
                                           " letters, digits, '-', '_' and '.'"};
  }
  if (Status s = core::VgpuStore::ValidateName(name); !s.ok()) return {ApiCode::kInvalidArgument, s.message()};
  return ApiStatus::Ok();
}

// A client pid keeps an ephemeral vGPU for as long as that process lives.
// init lives as long as the node, so naming it would keep the vGPU forever:
// refused. A pid that does not exist (or lives in another pid namespace) is
// not refused, but it keeps nothing: Create falls back to the grace period.
// (The control API cannot see its caller's pid on this socket, so a client
// naming another live process is not caught here; the socket is the
// daemon's user's only, or its group's.)
ApiStatus CheckClientPid(uint32_t pid) {
  if (pid == 1) {
    return {ApiCode::kInvalidArgument,
            "client_pid 1 is init, which never exits, so the vGPU would be kept forever; give the pid of the "
            "process that will hold the vGPU, or 0"};
  }
  return ApiStatus::Ok();
}

// The compute cap the pacer enforces (limits' compute_cap_pct, 0 = none):
// the user's cap (0 = none), tightened by a power cap's budget (0 = none).
uint32_t EffectiveCap(uint32_t user_cap_pct, uint32_t budget_pct) {
  if (budget_pct == 0) return user_cap_pct;
  const uint32_t cap = std::min(user_cap_pct == 0 ? 100u : user_cap_pct, budget_pct);
  return cap >= 100 ? 0 : cap;
}

ApiStatus CheckPowerCap(const std::optional<double>& watts, bool zero_removes) {
  if (!watts || (zero_removes && *watts == 0)) return ApiStatus::Ok();
  if (std::string why = PowerCapProblem(*watts); !why.empty()) return {ApiCode::kInvalidArgument, why};
  return ApiStatus::Ok();
}

}  // namespace

VgpuManager::VgpuManager(core::VgpuStore store, const NodeDevices* devices, ScheduleWorker* schedule,
                         ManagerOptions options)
    : store_(std::move(store)),
      devices_(devices),
      schedule_(schedule),
      options_(std::move(options)),
      operator_uid_(options_.operator_uid.value_or(geteuid())) {}

ApiStatus VgpuManager::CheckCaller(const std::string& name, const std::string& dir, std::optional<uid_t> caller,
                                   const char* verb) const {
  const std::optional<uid_t> owner = LoadOwner(dir);
  if (MayChange(caller, owner, operator_uid_)) return ApiStatus::Ok();
  const std::string who =
      operator_uid_ == 0 ? "its owner or root" : "its owner, root or the daemon's " + DescribeUid(operator_uid_);
  return {ApiCode::kPermissionDenied, std::string("cannot ") + verb + " vGPU '" + name + "': it belongs to " +
                                          (owner ? DescribeUid(*owner) : "the node's operator (it records no owner)") +
                                          ", and only " + who +
                                          " may change it; pick another --name for a vGPU of your own"};
}

size_t VgpuManager::Adopt() {
  port::MutexLock lock(&mu_);
  RefreshLocked();
  for (const auto& [name, m] : vgpus_) {
    core::MemoryLedger account(&m->handle.limits(), &m->handle.ledger());
    spdlog::info("adopted vGPU '{}' ({}, {} live processes)", name, m->persistent ? "persistent" : "ephemeral",
                 account.LiveProcessCount());
  }
  if (!vgpus_.empty()) schedule_->Request();
  return vgpus_.size();
}

Status VgpuManager::AdoptLocked(const std::string& name) {
  const std::string dir = store_.DirOf(name);
  auto handle = core::VgpuHandle::Open(dir, port::MappedFile::Access::kReadOnly);
  if (!handle.ok()) return handle.status();
  auto m = std::make_shared<Managed>(Managed{std::move(handle.value())});
  m->limits_inode = InodeOf(dir + "/limits");
  m->persistent = Exists(dir + "/" + kPersistentMarker);
  m->suspendable = Exists(dir + "/" + core::kSuspendableMarker);
  m->grace_until = Clock::now() + options_.grace;
  if (LoadPowerCap(dir)) {
    // A restarted daemon resumes from the budget in force (the limits hold
    // min(user's cap, budget)), not from the user's cap: that would let the
    // vGPU run over its power cap until the controller measured it again.
    const core::Limits& limits = m->handle.limits();
    for (uint32_t i = 0; i < std::min(limits.device_count, core::kMaxDevices); ++i) {
      const uint32_t in_force = core::LoadAcquire(limits.devices[i].compute_cap_pct);
      m->power_budget.push_back(in_force == 0 ? 100 : in_force);
    }
  }
  vgpus_[name] = std::move(m);
  return Status::Ok();
}

void VgpuManager::RefreshLocked() {
  const std::vector<std::string> names = store_.List();
  std::map<std::string, std::shared_ptr<Managed>> kept;
  std::map<std::string, std::string> corrupt;
  for (const std::string& name : names) {
    auto it = vgpus_.find(name);
    if (it != vgpus_.end() && it->second->limits_inode == InodeOf(store_.DirOf(name) + "/limits")) {
      kept[name] = it->second;
      continue;
    }
    // New to us (made by a standalone `gpuslice run`, or before a restart),
    // or replaced under the same name.
    vgpus_.erase(name);
    if (Status s = AdoptLocked(name); !s.ok()) {
      if (!corrupt_.contains(name)) spdlog::warn("vGPU '{}' is corrupt: {}", name, s.message());
      corrupt[name] = s.message();
      continue;
    }
    kept[name] = vgpus_[name];
  }
  vgpus_ = std::move(kept);
  corrupt_ = std::move(corrupt);
}

void VgpuManager::ApplyGroupPermissions(const std::string& dir, uid_t owner) const {
  if (!options_.group) return;
  // Group members' applications map the ledger read-write and take the
  // members lock, so they need those files and a path to them; but only the
  // vGPU's owner may have them (vgpu_owner.h).
  const gid_t gid = *options_.group;
  const GroupGrant grant = GrantInGroupMode(owner);
  if (!grant.owners_alone()) {
    spdlog::warn(
        "vGPU {}: its files stay open to group {}, not to its owner {} alone: only a daemon run as root "
        "can give them to another user",
        dir, gid, DescribeUid(owner));
  }
  struct Item {
    std::string path;
    uid_t uid;
    mode_t mode;
  };
  const uid_t keep = static_cast<uid_t>(-1);
  // The directory last: until it opens, no member can reach the files.
  const Item items[] = {{dir + "/limits", keep, 0444},
                        {dir + "/ledger", grant.uid, grant.mode},
                        {dir + "/members", grant.uid, grant.mode},
                        {dir + "/" + core::kStateSocketName, grant.uid, grant.mode},
                        {store_.root(), keep, 0710},
                        {store_.root() + "/vgpus", keep, 0710},
                        {dir, keep, 0750}};
  for (const Item& item : items) {
    struct stat st;
    // A vGPU that hands out its state has no ledger file (the keeper's
    // client shares its socket instead).
    if (lstat(item.path.c_str(), &st) != 0 && errno == ENOENT) continue;
    if (chown(item.path.c_str(), item.uid, gid) != 0 || chmod(item.path.c_str(), item.mode) != 0) {
      spdlog::warn("cannot share {} with group {}: {}", item.path, gid, strerror(errno));
    }
  }
}

ApiStatus VgpuManager::Create(const CreateOptions& o, CreateResult* result) {
  if (ApiStatus s = CheckName(o.name); !s.ok()) return s;
  if (o.gpus.size() > core::kMaxDevices) {
    return {ApiCode::kInvalidArgument, "a vGPU has at most " + std::to_string(core::kMaxDevices) + " GPUs; name fewer"};
  }
  if (auto s = CheckPercent("compute share", o.compute_share_pct); !s.ok()) return s;
  if (auto s = CheckPercent("compute cap", o.compute_cap_pct); !s.ok()) return s;
  if (auto s = CheckPowerCap(o.power_cap_watts, /*zero_removes=*/false); !s.ok()) return s;
  std::optional<uint32_t> level;
  if (auto s = RequestedLevel(options_.levels, o.priority, o.priority_level, &level); !s.ok()) return s;
  if (o.memory_limit_bytes) {
    if (std::string why = MemoryLimitProblem(*o.memory_limit_bytes); !why.empty()) {
      return {ApiCode::kInvalidArgument, why};
    }
  }
  if (ApiStatus s = CheckClientPid(o.client_pid); !s.ok()) return s;
  auto gpus = devices_->Select(o.gpus);
  if (!gpus.ok()) return {ApiCode::kInvalidArgument, gpus.status().message()};

  if (o.suspendable && core::LevelClass(level.value_or(core::LevelWord(options_.default_priority, 0))) ==
                           core::Priority::kLatencyCritical) {
    return {ApiCode::kInvalidArgument,
            "a latency-critical vGPU cannot be suspendable: only best-effort vGPUs are "
            "suspended to make room; drop --suspendable or use a best-effort level"};
  }
  core::VgpuSpec spec;
  spec.name = o.name;
  spec.memory_wait_ms = options_.memory_wait_ms;
  spec.suspendable = o.suspendable;
  for (const auto& g : gpus.value()) {
    core::DeviceSpec d;
    d.uuid = g.uuid;
    d.memory_limit_bytes = o.memory_limit_bytes.value_or(options_.default_memory_bytes.value_or(core::kUnlimited));
    d.compute_share_pct = o.compute_share_pct.value_or(options_.default_compute_pct);
    d.compute_cap_pct = o.compute_cap_pct.value_or(100) == 100 ? 0 : *o.compute_cap_pct;
    const uint32_t word = level.value_or(core::LevelWord(options_.default_priority, 0));
    d.priority = core::LevelClass(word);
    d.priority_rank = core::LevelRank(word);
    spec.devices.push_back(d);
  }

  port::MutexLock lock(&mu_);
  const std::string dir = store_.DirOf(o.name);
  const bool exists = Exists(dir);
  if (exists && !o.join_existing) {
    return {ApiCode::kAlreadyExists,
            "vGPU '" + o.name + "' already exists; join it, delete it first, or pick another name"};
  }
  if (exists) {
    if (ApiStatus s = CheckCaller(o.name, dir, o.caller, "join"); !s.ok()) return s;
    // A join that states memory, GPUs or compute must agree with the vGPU:
    // silently joining a different one would break the caller's assumptions.
    auto existing = core::VgpuHandle::Open(dir, port::MappedFile::Access::kReadOnly);
    if (!existing.ok()) return {ApiCode::kInternal, existing.status().message()};
    const core::Limits& limits = existing->limits();
    const core::DeviceLimit& d0 = limits.devices[0];
    const std::optional<PowerCapSetting> power = LoadPowerCap(dir);
    // Under a power cap the limits hold the effective cap; the user's is kept aside.
    const uint32_t user_cap = power ? power->user_cap_pct : core::LoadAcquire(d0.compute_cap_pct);
    // What differs, in the words of the flags that asked for it, and the
    // flags to leave out.
    std::string mismatch, flags;
    if (!o.gpus.empty()) {
      bool same = limits.device_count == spec.devices.size();
      for (size_t i = 0; same && i < spec.devices.size(); ++i) {
        same = memcmp(limits.devices[i].uuid, spec.devices[i].uuid.data(), 16) == 0;
      }
      if (!same) {
        mismatch = "other GPUs";
        flags = "--gpu";
      }
    }
    if (o.memory_limit_bytes && core::LoadAcquire(d0.memory_limit_bytes) != *o.memory_limit_bytes) {
      mismatch = "a " + Limit(core::LoadAcquire(d0.memory_limit_bytes)) + " memory limit";
      flags = "--memory";
    }
    if ((o.compute_share_pct && core::LoadAcquire(d0.compute_share_pct) != *o.compute_share_pct) ||
        (o.compute_cap_pct && user_cap != spec.devices[0].compute_cap_pct) ||
        (level && core::LoadAcquire(d0.priority) != *level)) {
      const uint32_t cap = user_cap;
      const uint32_t word = core::LoadAcquire(d0.priority);
      // At its class's lowest level a vGPU is named by its class, as `ls`
      // does: `be`, not the configured level that shares its word.
      const std::string level = core::LevelRank(word) != 0 ? options_.levels.NameOf(word)
                                : core::LevelClass(word) == core::Priority::kLatencyCritical ? "lc"
                                                                                             : "be";
      mismatch = "--compute " + std::to_string(core::LoadAcquire(d0.compute_share_pct)) +
                 (cap != 0 ? " --compute-cap " + std::to_string(cap) : "") + " --priority " + level;
      flags = "--compute/--compute-cap/--priority";
    }
    if (o.power_cap_watts && (!power || power->watts != *o.power_cap_watts)) {
      mismatch = power ? "a " + std::to_string(static_cast<long long>(power->watts)) + " W power cap" : "no power cap";
      flags = "--power-cap";
    }
    if (!mismatch.empty()) {
      return {ApiCode::kFailedPrecondition, "vGPU '" + o.name + "' already exists with " + mismatch +
                                                "; join it without " + flags + ", or pick another --name"};
    }
  }
  if (!exists) {
    if (ApiStatus s = AdmitLocked(spec); !s.ok()) return s;
  }
  bool created = false;
  auto made = store_.CreateOrJoin(spec, /*spec_is_explicit=*/false, &created);
  if (!made.ok()) return {ApiCode::kInternal, made.status().message()};
  if (created && o.power_cap_watts) {
    if (Status s = StorePowerCap(dir, {*o.power_cap_watts, spec.devices[0].compute_cap_pct}); !s.ok()) {
      // Made but not as asked: remove it rather than run it uncapped.
      (void)store_.RemoveIfUnused(o.name);
      return {ApiCode::kInternal, s.message()};
    }
  }
  if (created) {
    if (o.persistent) {
      const int fd = open((dir + "/" + kPersistentMarker).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
      if (fd >= 0) close(fd);
    }
    const uid_t owner = o.caller.value_or(geteuid());
    if (Status s = StoreOwner(dir, owner); !s.ok()) {
      // Without its owner only the operator could change it: refused
      // rather than made half-owned.
      (void)store_.RemoveIfUnused(o.name);
      return {ApiCode::kInternal, s.message()};
    }
    ApplyGroupPermissions(dir, owner);
  } else if (o.persistent && !Exists(dir + "/" + kPersistentMarker)) {
    const int fd = open((dir + "/" + kPersistentMarker).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
    if (fd >= 0) close(fd);
  }
  auto it = vgpus_.find(o.name);
  if (created || it == vgpus_.end() || it->second->limits_inode != InodeOf(dir + "/limits")) {
    if (Status s = AdoptLocked(o.name); !s.ok()) return {ApiCode::kInternal, s.message()};
    it = vgpus_.find(o.name);
  }
  Managed& m = *it->second;
  m.persistent = m.persistent || o.persistent;
  const uint64_t client_start = o.client_pid != 0 ? port::ProcessStartTime(static_cast<pid_t>(o.client_pid)) : 0;
  if (client_start != 0) {
    // Kept while the client lives, until it releases: no grace needed.
    m.pending.push_back({o.client_pid, client_start});
    if (created) m.grace_until = Clock::now();
  } else {
    // No pid, or one we cannot watch (another pid namespace): a grace
    // period covers the moment until the client takes its membership.
    m.grace_until = Clock::now() + options_.grace;
  }

  result->name = o.name;
  result->dir = dir;
  result->created = created;
  result->gpu_uuids.clear();
  const core::Limits& limits = m.handle.limits();
  for (uint32_t i = 0; i < limits.device_count && i < core::kMaxDevices; ++i) {
    result->gpu_uuids.push_back(FormatGpuUuid(limits.devices[i].uuid));
  }
  if (created) {
    spdlog::info("created vGPU '{}' ({}, {} GPU(s), memory {})", o.name, o.persistent ? "persistent" : "ephemeral",
                 spec.devices.size(), Limit(spec.devices[0].memory_limit_bytes));
    schedule_->Request();
  }
  return ApiStatus::Ok();
}

ApiStatus VgpuManager::Resize(const ResizeOptions& o, VgpuView* after) {
  if (ApiStatus s = CheckName(o.name); !s.ok()) return s;
  if (auto s = CheckPercent("compute share", o.compute_share_pct); !s.ok()) return s;
  if (auto s = CheckPercent("compute cap", o.compute_cap_pct); !s.ok()) return s;
  if (auto s = CheckPowerCap(o.power_cap_watts, /*zero_removes=*/true); !s.ok()) return s;
  std::optional<uint32_t> level;
  if (auto s = RequestedLevel(options_.levels, o.priority, o.priority_level, &level); !s.ok()) return s;
  if (o.memory_limit_bytes) {
    if (std::string why = MemoryLimitProblem(*o.memory_limit_bytes); !why.empty()) {
      return {ApiCode::kInvalidArgument, why};
    }
  }
  if (!o.memory_limit_bytes && !o.compute_share_pct && !o.compute_cap_pct && !level && !o.power_cap_watts) {
    return {ApiCode::kInvalidArgument,
            "nothing to change; give --memory, --compute, --compute-cap, --priority or --power-cap"};
  }
  port::MutexLock lock(&mu_);
  RefreshLocked();
  auto it = vgpus_.find(o.name);
  if (auto bad = corrupt_.find(o.name); bad != corrupt_.end()) return {ApiCode::kFailedPrecondition, bad->second};
  if (it == vgpus_.end()) {
    return {ApiCode::kNotFound, "no vGPU '" + o.name + "' on this node; `gpuslice ls` lists them"};
  }
  if (ApiStatus s = CheckCaller(o.name, store_.DirOf(o.name), o.caller, "resize"); !s.ok()) return s;
  Managed& m = *it->second;
  const core::Limits& limits = m.handle.limits();
  core::MemoryLedger account(&limits, &m.handle.ledger());
  const uint32_t device_count = std::min(limits.device_count, core::kMaxDevices);
  if (o.memory_limit_bytes && !o.force) {
    for (uint32_t i = 0; i < device_count; ++i) {
      const uint64_t used = account.UsedBytes(i);
      if (used > *o.memory_limit_bytes) {
        const port::GpuInfo* gpu = devices_->Find(limits.devices[i].uuid);
        return {ApiCode::kFailedPrecondition,
                "vGPU '" + o.name + "' uses " + core::FormatByteSize(used) + " on GPU " +
                    (gpu != nullptr ? std::to_string(gpu->index) : FormatGpuUuid(limits.devices[i].uuid)) +
                    ", more than the new " + core::FormatByteSize(*o.memory_limit_bytes) +
                    " limit; free memory in its processes first, or pass --force to keep what they hold and "
                    "refuse new allocations until usage falls below the limit"};
      }
    }
  }
  auto keep = it->second;  // `it` may not outlive an unlock
  // The power cap and the user's compute cap (power_cap_file.h): the file
  // first, so that the limits never hold a cap the file does not explain.
  const std::optional<PowerCapSetting> power = LoadPowerCap(m.handle.dir());
  std::optional<PowerCapSetting> new_power = power;
  const uint32_t cap_in_limits = core::LoadAcquire(limits.devices[0].compute_cap_pct);
  if (o.power_cap_watts && *o.power_cap_watts == 0) new_power.reset();
  if (o.power_cap_watts && *o.power_cap_watts > 0) {
    new_power = PowerCapSetting{*o.power_cap_watts, power ? power->user_cap_pct : cap_in_limits};
  }
  if (o.compute_cap_pct && new_power) new_power->user_cap_pct = *o.compute_cap_pct == 100 ? 0 : *o.compute_cap_pct;
  // A new compute cap under a power cap changes the user's cap the file
  // keeps, so the file is rewritten then too.
  if (o.power_cap_watts || (o.compute_cap_pct && new_power)) {
    Status s = new_power ? StorePowerCap(m.handle.dir(), *new_power) : RemovePowerCap(m.handle.dir());
    if (!s.ok()) return {ApiCode::kInternal, s.message()};
    if (!new_power) m.power_budget.clear();
  }
  LimitsChange change;
  change.vgpu = o.name;
  change.memory_limit_bytes = o.memory_limit_bytes;
  change.compute_share_pct = o.compute_share_pct;
  change.priority = level;
  if (o.compute_cap_pct || o.power_cap_watts) {
    uint32_t user = power ? power->user_cap_pct : cap_in_limits;
    if (new_power) user = new_power->user_cap_pct;
    if (o.compute_cap_pct) user = *o.compute_cap_pct == 100 ? 0u : *o.compute_cap_pct;
    for (uint32_t i = 0; i < device_count; ++i) {
      const uint32_t budget = new_power && i < keep->power_budget.size() ? keep->power_budget[i] : 0;
      change.compute_cap_pct.push_back(EffectiveCap(user, budget));
    }
  }
  spdlog::info("resized vGPU '{}'{}{}{}{}{}", o.name,
               o.memory_limit_bytes ? " memory " + Limit(*o.memory_limit_bytes) : "",
               o.compute_share_pct ? " compute " + std::to_string(*o.compute_share_pct) + "%" : "",
               o.compute_cap_pct ? " cap " + std::to_string(*o.compute_cap_pct) + "%" : "",
               level ? " priority " + options_.levels.NameOf(*level) : "",
               o.power_cap_watts ? " power cap " + (*o.power_cap_watts == 0 ? std::string("removed")
                                                                             : std::to_string(*o.power_cap_watts) + " W")
                                 : "");
  // One change, one generation bump: the node schedule writes the values
  // and the slices they imply, and bumps once, before `set` is answered.
  lock.Unlock();
  const Status s = schedule_->ApplyNow(&change);
  lock.Lock();
  if (!change.written) return {ApiCode::kInternal, "vGPU '" + o.name + "' not resized: " + s.message()};
  if (!s.ok()) {
    return {ApiCode::kInternal, "the limits changed, but the node's compute schedule was not updated: " + s.message()};
  }
  *after = ViewLocked(o.name, *keep);
  return ApiStatus::Ok();
}

ApiStatus VgpuManager::Delete(const std::string& name, bool if_unused, uint32_t client_pid, bool* deleted,
                              std::optional<uid_t> caller) {
  *deleted = false;
  if (ApiStatus s = CheckName(name); !s.ok()) return s;
  port::MutexLock lock(&mu_);
  RefreshLocked();
  auto it = vgpus_.find(name);
  if (it == vgpus_.end()) {
    if (if_unused) return ApiStatus::Ok();
    // A corrupt vGPU's processes cannot be counted, so it is never deleted
    // from here: only by hand, once they are stopped.
    if (auto bad = corrupt_.find(name); bad != corrupt_.end()) return {ApiCode::kFailedPrecondition, bad->second};
    return {ApiCode::kNotFound, "no vGPU '" + name + "' on this node; `gpuslice ls` lists them"};
  }
  if (ApiStatus s = CheckCaller(name, store_.DirOf(name), caller, "delete"); !s.ok()) return s;
  Managed& m = *it->second;
  if (client_pid != 0) {
    std::erase_if(m.pending, [&](const Pending& p) { return p.pid == client_pid; });
  }
  if (if_unused) {
    // The departing client's own claim is gone; the grace still protects
    // a client that joined without a pid.
    if (!RemovableLocked(name, m, Clock::now())) return ApiStatus::Ok();
  } else {
    core::MemoryLedger account(&m.handle.limits(), &m.handle.ledger());
    account.ReapDeadProcesses(port::SystemProcessProbe());
    if (const uint32_t live = account.LiveProcessCount(); live > 0) {
      return {ApiCode::kFailedPrecondition, "vGPU '" + name + "' still has " + std::to_string(live) +
                                                " running process(es); stop them first (`gpuslice ls " + name +
                                                "` shows their pids)"};
    }
    if (HasMembers(m.handle.dir())) {
      return {ApiCode::kFailedPrecondition,
              "vGPU '" + name + "' is held by a running `gpuslice run`; stop that command first"};
    }
  }
  auto removed = store_.RemoveIfUnused(name);
  if (!removed.ok()) return {ApiCode::kInternal, removed.status().message()};
  if (!removed.value()) {
    if (if_unused) return ApiStatus::Ok();
    return {ApiCode::kFailedPrecondition, "vGPU '" + name + "' came into use while being deleted; try again"};
  }
  vgpus_.erase(name);
  *deleted = true;
  spdlog::info("deleted vGPU '{}'", name);
  schedule_->Request();
  return ApiStatus::Ok();
}

bool VgpuManager::RemovableLocked(const std::string&, Managed& m, Clock::time_point now) {
  // Cheapest tests first: this runs for every vGPU at every GC pass, under
  // the lock, and a busy vGPU is answered by a scan of its mapped ledger.
  if (m.persistent || now < m.grace_until) return false;
  core::MemoryLedger account(&m.handle.limits(), &m.handle.ledger());
  if (account.LiveProcessCount() > 0) return false;
  if (HasMembers(m.handle.dir())) return false;
  std::erase_if(m.pending, [](const Pending& p) {
    return port::ProcessStartTime(static_cast<pid_t>(p.pid)) != p.start_time;  // gone or reused
  });
  return m.pending.empty();
}

ApiStatus VgpuManager::List(const std::string& name, std::vector<VgpuView>* views) {
  views->clear();
  if (!name.empty()) {
    if (ApiStatus s = CheckName(name); !s.ok()) return s;
  }
  port::MutexLock lock(&mu_);
  RefreshLocked();
  for (const auto& [n, m] : vgpus_) {
    if (name.empty() || n == name) views->push_back(ViewLocked(n, *m));
  }
  for (const auto& [n, why] : corrupt_) {
    if (name.empty() || n == name) views->push_back(VgpuView{.name = n, .dir = store_.DirOf(n), .corrupt = why});
  }
  if (!name.empty() && views->empty()) {
    return {ApiCode::kNotFound, "no vGPU '" + name + "' on this node; `gpuslice ls` lists them"};
  }
  return ApiStatus::Ok();
}

VgpuView VgpuManager::ViewLocked(const std::string&, const Managed& m) const {
  VgpuView view = ReadVgpuView(m.handle, *devices_);
  view.persistent = m.persistent;
  view.suspendable = m.suspendable;
  view.priority_level = options_.levels.NameOf(core::LevelWord(view.priority, view.priority_rank));
  SetSuspendView(view.dir, &view);
  if (auto power = LoadPowerCap(m.handle.dir())) {
    view.power_cap_watts = power->watts;
    for (size_t i = 0; i < view.devices.size(); ++i) {
      view.devices[i].compute_cap_pct = power->user_cap_pct;
      view.devices[i].power_budget_pct = i < m.power_budget.size() ? m.power_budget[i] : 0;
    }
  }
  if (const std::optional<uid_t> owner = LoadOwner(m.handle.dir())) view.owner_uid = *owner;
  for (size_t i = 0; i < view.devices.size() && i < m.measured.size(); ++i) {
    view.devices[i].compute_measured_ratio = m.measured[i];
  }
  if (!m.lc_samples.empty()) {
    const Managed::LcSample& baseline = m.lc_samples.front();
    const double window = std::chrono::duration<double>(Clock::now() - baseline.at).count();
    SetLcLatencyQuantiles(&baseline.snapshot, window, &view.lc_latency);
    for (TaskLevelView& level : view.task_levels) {
      // A level first seen since the baseline: all its tasks are recent.
      static const core::LcLatencySnapshot kNone;
      const core::LcLatencySnapshot* before = &kNone;
      for (const core::TaskLevelSnapshot& t : baseline.tasks) {
        if (t.name == level.level) before = &t.latency;
      }
      SetLcLatencyQuantiles(before, window, &level.latency);
    }
  }
  return view;
}

void VgpuManager::SampleLcLatency() {
  // Bounds the samples kept should the caller sample far more often than
  // the window needs; the window then shrinks rather than memory growing.
  constexpr size_t kMaxSamples = 128;
  // The vGPUs known already: GC and every listing adopt new ones, which
  // then get their first sample a second later.
  port::MutexLock lock(&mu_);
  const auto now = Clock::now();
  for (auto& [name, m] : vgpus_) {
    m->lc_samples.push_back(
        {now, core::TakeLcLatencySnapshot(m->handle.ledger()), core::TakeTaskLevelSnapshots(m->handle.ledger())});
    // Keep the newest sample that is at least a window old, and all after it.
    while (m->lc_samples.size() > kMaxSamples ||
           (m->lc_samples.size() >= 2 && m->lc_samples[1].at <= now - options_.lc_latency_window)) {
      m->lc_samples.pop_front();
    }
  }
}

GcResult VgpuManager::CollectGarbage() {
  GcResult result;
  std::vector<std::shared_ptr<Managed>> all;
  {
    port::MutexLock lock(&mu_);
    RefreshLocked();
    for (const auto& [name, m] : vgpus_) all.push_back(m);
  }
  // Lock-free by the ledger's design: a reaper CASes each dead slot before
  // clearing it, so this may race with every other reaper on the node.
  for (const auto& m : all) {
    core::MemoryLedger account(&m->handle.limits(), &m->handle.ledger());
    result.reaped_processes += account.ReapDeadProcesses(port::SystemProcessProbe());
  }
  port::MutexLock lock(&mu_);
  const auto now = Clock::now();
  for (auto it = vgpus_.begin(); it != vgpus_.end();) {
    if (!RemovableLocked(it->first, *it->second, now)) {
      ++it;
      continue;
    }
    auto removed = store_.RemoveIfUnused(it->first);
    if (!removed.ok()) {
      spdlog::warn("cannot remove unused vGPU '{}': {}", it->first, removed.status().message());
      ++it;
      continue;
    }
    if (!removed.value()) {
      ++it;
      continue;
    }
    spdlog::info("removed unused vGPU '{}'", it->first);
    result.removed.push_back(it->first);
    it = vgpus_.erase(it);
  }
  if (!result.removed.empty()) schedule_->Request();
  return result;
}

void VgpuManager::SetMeasuredRatios(const std::map<std::string, std::vector<std::optional<double>>>& ratios) {
  port::MutexLock lock(&mu_);
  for (auto& [name, m] : vgpus_) {
    auto it = ratios.find(name);
    m->measured = it != ratios.end() ? it->second : std::vector<std::optional<double>>{};
  }
}

ApiStatus VgpuManager::AdmitLocked(const core::VgpuSpec& spec) {
  if (options_.max_memory_overcommit_pct == 0) return ApiStatus::Ok();
  RefreshLocked();
  for (const core::DeviceSpec& d : spec.devices) {
    auto gpu = std::find_if(devices_->gpus.begin(), devices_->gpus.end(),
                            [&d](const port::GpuInfo& g) { return g.uuid == d.uuid; });
    if (gpu == devices_->gpus.end() || gpu->memory_total_bytes == 0) continue;  // nothing to compare with
    const uint64_t total = gpu->memory_total_bytes;
    auto counted = [total](uint64_t limit) { return limit == core::kUnlimited ? total : std::min(limit, total); };
    uint64_t sum = counted(d.memory_limit_bytes);
    for (const auto& [name, m] : vgpus_) {
      const core::Limits& limits = m->handle.limits();
      for (uint32_t i = 0; i < std::min(limits.device_count, core::kMaxDevices); ++i) {
        if (memcmp(limits.devices[i].uuid, d.uuid.data(), 16) == 0) {
          sum += counted(core::LoadAcquire(limits.devices[i].memory_limit_bytes));
        }
      }
    }
    const unsigned __int128 allowed = static_cast<unsigned __int128>(total) * options_.max_memory_overcommit_pct / 100;
    if (sum > allowed) {
      return {ApiCode::kFailedPrecondition,
              "vGPU '" + spec.name + "' would bring the memory limits on GPU " + std::to_string(gpu->index) + " to " +
                  std::to_string(sum >> 20) + " MiB, over the " + std::to_string(static_cast<uint64_t>(allowed >> 20)) +
                  " MiB that " + std::to_string(options_.max_memory_overcommit_pct) + "% of its " +
                  std::to_string(total >> 20) +
                  " MiB allows (memory_pressure.max_overcommit_pct); ask for less memory, pick another GPU, or raise "
                  "the percentage"};
    }
  }
  return ApiStatus::Ok();
}

bool VgpuManager::AnyMemoryWaits() {
  port::MutexLock lock(&mu_);
  for (const auto& [name, m] : vgpus_) {
    if (core::AnyPendingMemoryWait(m->handle.ledger())) return true;
  }
  return false;
}

ApiStatus VgpuManager::AnswerMemoryWait(const std::string& name, const core::MemoryWait& wait) {
  port::MutexLock lock(&mu_);
  auto it = vgpus_.find(name);
  if (it == vgpus_.end()) return {ApiCode::kNotFound, "no vGPU '" + name + "' on this node"};
  (void)core::AnswerNoRelief(&it->second->handle.ledger(), wait);
  return ApiStatus::Ok();
}

ApiStatus VgpuManager::SetPowerBudget(const std::string& name, const std::vector<uint32_t>& budget_pct) {
  port::MutexLock lock(&mu_);
  auto it = vgpus_.find(name);
  if (it == vgpus_.end()) return {ApiCode::kNotFound, "no vGPU '" + name + "' on this node"};
  Managed& m = *it->second;
  const std::optional<PowerCapSetting> power = LoadPowerCap(m.handle.dir());
  if (!power) {
    m.power_budget.clear();
    return ApiStatus::Ok();
  }
  const core::Limits& limits = m.handle.limits();
  const uint32_t device_count = std::min(limits.device_count, core::kMaxDevices);
  std::vector<uint32_t> effective(device_count);
  bool changed = false;
  for (uint32_t i = 0; i < device_count; ++i) {
    effective[i] = EffectiveCap(power->user_cap_pct, i < budget_pct.size() ? std::clamp(budget_pct[i], 1u, 100u) : 0);
    changed = changed || core::LoadAcquire(limits.devices[i].compute_cap_pct) != effective[i];
  }
  m.power_budget.assign(budget_pct.begin(), budget_pct.end());
  if (!changed) return ApiStatus::Ok();
  // The vGPU's own processes read the cap at every heartbeat (and the
  // generation tells them limits changed). The others believe its cap from
  // the node's roster (core/board_roster.h), which the same pass rewrites.
  LimitsChange change;
  change.vgpu = name;
  change.compute_cap_pct = effective;
  lock.Unlock();
  const Status s = schedule_->ApplyNow(&change);
  if (!change.written) return {ApiCode::kInternal, s.message()};
  spdlog::debug("vGPU '{}': power budget {}% on its first GPU", name, effective[0]);
  return ApiStatus::Ok();
}

std::vector<VgpuManager::ProcessOnGpu> VgpuManager::ProcessesInDaemonNamespace() {
  std::vector<ProcessOnGpu> out;
  port::MutexLock lock(&mu_);
  for (const auto& [name, m] : vgpus_) {
    const VgpuView view = ReadVgpuView(m->handle, *devices_);
    for (const auto& p : view.processes) {
      if (!p.same_pid_namespace) continue;
      for (uint32_t i = 0; i < view.devices.size(); ++i) {
        if (view.devices[i].gpu_index) out.push_back({p.pid, name, i, *view.devices[i].gpu_index});
      }
    }
  }
  return out;
}

}  // namespace gpuslice::node
