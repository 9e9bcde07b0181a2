// VgpuManager's suspend and resume (vgpu_manager.h): the vGPU's state
// machine and its persistence, around vgpu_suspender.h's driver sequences.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/byte_size.h"
#include "node/suspend_record.h"
#include "node/vgpu_manager.h"
#include "node/vgpu_suspender.h"
#include "port/gpu_uuid.h"

namespace gpuslice::node {
namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool Alive(uint32_t pid) { return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

std::vector<uint32_t> LivePids(const std::vector<uint32_t>& pids) {
  std::vector<uint32_t> out;
  for (uint32_t pid : pids) {
    if (Alive(pid)) out.push_back(pid);
  }
  return out;
}

// Closes the current suspended period into the total.
void CloseSuspendedPeriod(SuspendRecord* r) {
  if (r->since_unix_ms > 0) r->suspended_seconds_total += static_cast<double>(NowUnixMs() - r->since_unix_ms) / 1e3;
}

ApiStatus Persist(const std::string& dir, const SuspendRecord& r) {
  if (Status s = WriteSuspendRecord(dir, r); !s.ok()) return {ApiCode::kInternal, s.message()};
  return ApiStatus::Ok();
}

}  // namespace

void VgpuManager::SetCheckpointDriver(CheckpointDriver* driver, std::string unavailable) {
  port::MutexLock lock(&mu_);
  checkpoint_ = driver;
  checkpoint_unavailable_ = std::move(unavailable);
}

ApiStatus VgpuManager::CheckpointTargetLocked(const std::string& name, const char* verb, std::optional<uid_t> caller,
                                              Managed** m, CheckpointDriver** driver) {
  RefreshLocked();
  auto it = vgpus_.find(name);
  if (it == vgpus_.end()) return {ApiCode::kNotFound, "no vGPU '" + name + "' on this node; `gpuslice ls` lists them"};
  if (ApiStatus s = CheckCaller(name, store_.DirOf(name), caller, verb); !s.ok()) return s;
  if (checkpoint_ == nullptr) {
    return {ApiCode::kFailedPrecondition, std::string("cannot ") + verb + ": " + checkpoint_unavailable_};
  }
  *m = it->second.get();
  *driver = checkpoint_;
  return ApiStatus::Ok();
}

ApiStatus VgpuManager::Suspend(const SuspendOptions& o, VgpuView* after) {
  const std::string dir = store_.DirOf(o.name);
  std::vector<uint32_t> pids;
  uint64_t bytes = 0;
  SuspendRecord record;
  CheckpointDriver* driver = nullptr;
  {
    port::MutexLock lock(&mu_);
    Managed* m = nullptr;
    if (ApiStatus s = CheckpointTargetLocked(o.name, "suspend", o.caller, &m, &driver); !s.ok()) return s;
    auto read = ReadSuspendRecord(dir);
    if (!read.ok()) return {ApiCode::kInternal, read.status().message()};
    record = read.value();
    if (record.state != SuspendState::kRunning) {
      return {ApiCode::kFailedPrecondition, "vGPU '" + o.name + "' is " + SuspendStateName(record.state) +
                                                "; only a running vGPU can be suspended"};
    }
    const VgpuView view = ViewLocked(o.name, *m);
    for (const auto& p : view.processes) {
      if (!p.same_pid_namespace) {
        return {ApiCode::kFailedPrecondition,
                "vGPU '" + o.name + "' has process " + std::to_string(p.pid) +
                    " in another pid namespace, which the daemon cannot checkpoint; run the daemon in the "
                    "host's pid namespace"};
      }
      pids.push_back(p.pid);
    }
    if (pids.empty()) {
      return {ApiCode::kFailedPrecondition, "vGPU '" + o.name + "' has no process to suspend"};
    }
    for (const auto& d : view.devices) bytes += d.memory_used_bytes;
    const std::optional<uint64_t> available =
        options_.host_memory ? options_.host_memory() : ReadMemAvailable(MeminfoPath());
    if (!available) {
      return {ApiCode::kFailedPrecondition,
              "cannot read the host's available memory (MemAvailable in /proc/meminfo); suspend refused"};
    }
    if (bytes > *available) {
      return {ApiCode::kFailedPrecondition,
              "vGPU '" + o.name + "' holds " + core::FormatByteSize(bytes) +
                  " of device memory, more than the host's " + core::FormatByteSize(*available) +
                  " available memory for its checkpoint; suspend refused: free host memory first"};
    }
    record.state = SuspendState::kSuspending;
    record.pids = pids;
    record.bytes = bytes;
    record.since_unix_ms = NowUnixMs();
    if (ApiStatus s = Persist(dir, record); !s.ok()) return s;
  }
  const auto start = std::chrono::steady_clock::now();
  const ApiStatus result = SuspendProcesses(driver, pids, o.lock_timeout.value_or(options_.suspend_lock_timeout));
  const double seconds = SecondsSince(start);
  port::MutexLock lock(&mu_);
  if (result.ok()) {
    record.state = SuspendState::kSuspended;
    record.since_unix_ms = NowUnixMs();
    record.detail.clear();
    record.by = o.by;
    record.bytes_moved_total += bytes;
    ++record.suspends;
    record.last_suspend_seconds = seconds;
    spdlog::info("suspended vGPU '{}': {} processes, {} checkpointed in {:.3f} s", o.name, pids.size(),
                 core::FormatByteSize(bytes), seconds);
  } else {
    record.state = SuspendState::kRunning;
    record.pids.clear();
    record.bytes = 0;
    record.since_unix_ms = NowUnixMs();
    record.detail = "suspend failed: " + result.message();
    spdlog::warn("suspend of vGPU '{}' failed: {}", o.name, result.message());
  }
  if (ApiStatus s = Persist(dir, record); !s.ok()) return s;
  if (after != nullptr) {
    RefreshLocked();
    if (auto it = vgpus_.find(o.name); it != vgpus_.end()) *after = ViewLocked(o.name, *it->second);
  }
  return result;
}

ApiStatus VgpuManager::Resume(const std::string& name, VgpuView* after, std::optional<uid_t> caller) {
  return ResumeOnto(name, {}, after, caller);
}

ApiStatus VgpuManager::ResumeOnto(const std::string& name, const std::vector<CheckpointDriver::GpuPair>& onto,
                                  VgpuView* after, std::optional<uid_t> caller) {
  const std::string dir = store_.DirOf(name);
  SuspendRecord record;
  CheckpointDriver* driver = nullptr;
  {
    port::MutexLock lock(&mu_);
    Managed* m = nullptr;
    if (ApiStatus s = CheckpointTargetLocked(name, "resume", caller, &m, &driver); !s.ok()) return s;
    auto read = ReadSuspendRecord(dir);
    if (!read.ok()) return {ApiCode::kInternal, read.status().message()};
    record = read.value();
    if (record.state != SuspendState::kSuspended) {
      return {ApiCode::kFailedPrecondition, "vGPU '" + name + "' is " + SuspendStateName(record.state) +
                                                "; only a suspended vGPU can be resumed"};
    }
    record.state = SuspendState::kResuming;
    if (ApiStatus s = Persist(dir, record); !s.ok()) return s;
  }
  // Without the migration's pairs the processes come back where they were
  // checkpointed: so do the limits.
  if (onto.empty()) PutLimitsBack(name, record);
  const auto start = std::chrono::steady_clock::now();
  const ApiStatus result = ResumeProcesses(driver, LivePids(record.pids), onto);
  const double seconds = SecondsSince(start);
  port::MutexLock lock(&mu_);
  if (result.ok()) {
    CloseSuspendedPeriod(&record);
    record.state = SuspendState::kRunning;
    record.bytes_moved_total += record.bytes;
    ++record.resumes;
    record.last_resume_seconds = seconds;
    record.detail.clear();
    record.by.clear();
    record.migrating_from.clear();
    spdlog::info("resumed vGPU '{}': {} restored in {:.3f} s", name, core::FormatByteSize(record.bytes), seconds);
    record.pids.clear();
    record.bytes = 0;
    record.since_unix_ms = NowUnixMs();
  } else {
    record.state = SuspendState::kSuspended;
    record.detail = "resume failed: " + result.message();
    spdlog::error("resume of vGPU '{}' failed: {}", name, result.message());
  }
  if (ApiStatus s = Persist(dir, record); !s.ok()) return s;
  if (after != nullptr) {
    RefreshLocked();
    if (auto it = vgpus_.find(name); it != vgpus_.end()) *after = ViewLocked(name, *it->second);
  }
  return result;
}

void VgpuManager::PutLimitsBack(const std::string& name, const SuspendRecord& record) {
  std::array<uint8_t, 16> from{};
  if (record.migrating_from.empty() || !port::ParseGpuUuid(record.migrating_from, &from)) return;
  {
    port::MutexLock lock(&mu_);
    auto it = vgpus_.find(name);
    if (it == vgpus_.end() || memcmp(it->second->handle.limits().devices[0].uuid, from.data(), from.size()) == 0) {
      return;
    }
  }
  LimitsChange back;
  back.vgpu = name;
  back.gpu_uuids = {from};
  if (Status s = schedule_->ApplyNow(&back); !back.written) {
    spdlog::error("vGPU '{}': cannot put its limits back on {} after an unfinished migration: {}", name,
                  record.migrating_from, s.message());
  } else {
    spdlog::warn("vGPU '{}': a migration did not finish; its limits are back on {}", name, record.migrating_from);
  }
}

ApiStatus VgpuManager::Migrate(const MigrateOptions& o, VgpuView* after) {
  std::array<uint8_t, 16> from{};
  CheckpointDriver* driver = nullptr;
  {
    port::MutexLock lock(&mu_);
    Managed* m = nullptr;
    if (ApiStatus s = CheckpointTargetLocked(o.name, "migrate", o.caller, &m, &driver); !s.ok()) return s;
    const core::Limits& limits = m->handle.limits();
    if (limits.device_count != 1) {
      return {ApiCode::kFailedPrecondition, "vGPU '" + o.name + "' has " + std::to_string(limits.device_count) +
                                                " GPUs; migrate moves a vGPU of one GPU"};
    }
    memcpy(from.data(), limits.devices[0].uuid, from.size());
  }
  auto target = devices_->Select({o.gpu});
  if (!target.ok()) return {ApiCode::kInvalidArgument, target.status().message()};
  if (target->size() != 1) return {ApiCode::kInvalidArgument, "name one GPU to migrate to, by index or UUID"};
  const port::GpuInfo to = target->front();
  auto source = std::find_if(devices_->gpus.begin(), devices_->gpus.end(),
                             [&from](const port::GpuInfo& g) { return g.uuid == from; });
  if (to.uuid == from) {
    return {ApiCode::kFailedPrecondition, "vGPU '" + o.name + "' is on GPU " + std::to_string(to.index) + " already"};
  }
  if (source != devices_->gpus.end() && source->name != to.name) {
    return {ApiCode::kFailedPrecondition, "GPU " + std::to_string(source->index) + " is a " + source->name +
                                              " and GPU " + std::to_string(to.index) + " a " + to.name +
                                              ": a checkpoint is restored only onto a GPU of the same model"};
  }
  // 1. Every process checkpointed, its device memory released; the record
  // says where they were, for a resume after a daemon killed from here on.
  if (ApiStatus s = Suspend({o.name, o.lock_timeout, "migrate"}, nullptr); !s.ok()) return s;
  {
    port::MutexLock lock(&mu_);
    auto record = ReadSuspendRecord(store_.DirOf(o.name));
    if (!record.ok()) return {ApiCode::kInternal, record.status().message()};
    record->migrating_from = FormatGpuUuid(from.data());
    if (ApiStatus s = Persist(store_.DirOf(o.name), record.value()); !s.ok()) return s;
  }
  // 2. The limits moved (one generation bump; the node's slices and roster
  // computed again with the vGPU on its new GPU). No process of it runs.
  LimitsChange move;
  move.vgpu = o.name;
  move.gpu_uuids = {to.uuid};
  if (Status s = schedule_->ApplyNow(&move); !move.written) {
    const ApiStatus back = Resume(o.name, after);
    return {ApiCode::kInternal,
            "cannot move vGPU '" + o.name + "'s limits (" + s.message() + "); " +
                (back.ok() ? "it runs on where it was" : "and its resume failed: " + back.message())};
  }
  // 3. Every process restored onto the target. The driver wants a pair for
  // every GPU the process checkpointed, which may be every GPU of the node
  // (whatever CUDA_VISIBLE_DEVICES showed it): the source and the target
  // are swapped, and every other GPU maps to itself.
  std::vector<CheckpointDriver::GpuPair> pairs;
  for (const port::GpuInfo& g : devices_->gpus) {
    pairs.push_back({g.uuid, g.uuid == from ? to.uuid : g.uuid == to.uuid ? from : g.uuid});
  }
  if (source == devices_->gpus.end()) pairs.push_back({from, to.uuid});
  const ApiStatus moved = ResumeOnto(o.name, pairs, after, o.caller);
  if (moved.ok()) {
    spdlog::info("migrated vGPU '{}' to GPU {}", o.name, to.index);
    return moved;
  }
  // 4. Back where it was: the processes restored onto the target (locked)
  // checkpointed again, the limits back, every process restored as it was.
  auto record = ReadSuspendRecord(store_.DirOf(o.name));
  const std::vector<uint32_t> pids = record.ok() ? LivePids(record->pids) : std::vector<uint32_t>{};
  for (uint32_t pid : pids) {
    if (driver->State(pid) == ProcessCheckpointState::kLocked) (void)driver->Checkpoint(pid);
  }
  const ApiStatus again = Resume(o.name, after);  // the limits back first (PutLimitsBack)
  const std::string where = source != devices_->gpus.end() ? "GPU " + std::to_string(source->index) : "its old GPU";
  spdlog::error("migration of vGPU '{}' failed: {}", o.name, moved.message());
  // A process whose restore failed is left as the driver left it: the
  // states say which.
  return {ApiCode::kInternal, "migration of vGPU '" + o.name + "' to GPU " + std::to_string(to.index) + " failed (" +
                                  moved.message() + "); " +
                                  (again.ok() ? "back on " + where : "putting it back failed too: " + again.message()) +
                                  "; processes: " + DescribeProcessStates(driver, pids)};
}

size_t VgpuManager::RecoverSuspends() {
  std::vector<std::string> names;
  CheckpointDriver* driver = nullptr;
  {
    port::MutexLock lock(&mu_);
    RefreshLocked();
    for (const auto& [name, m] : vgpus_) names.push_back(name);
    driver = checkpoint_;
  }
  size_t recovered = 0;
  for (const std::string& name : names) {
    const std::string dir = store_.DirOf(name);
    auto read = ReadSuspendRecord(dir);
    if (!read.ok()) {
      spdlog::error("vGPU '{}': {}", name, read.status().message());
      continue;
    }
    SuspendRecord record = read.value();
    if (record.state == SuspendState::kSuspended) {
      spdlog::info("vGPU '{}' is suspended ({} processes); `gpuslice resume {}` resumes it", name,
                   record.pids.size(), name);
      continue;
    }
    if (record.state == SuspendState::kRunning) continue;
    const bool was_resuming = record.state == SuspendState::kResuming;
    if (driver == nullptr) {
      spdlog::error("vGPU '{}' was left {} by a previous daemon, and the checkpoint API is unavailable ({}); "
                    "its processes may stay locked",
                    name, SuspendStateName(record.state), checkpoint_unavailable_);
      continue;
    }
    // A suspend the previous daemon never answered is undone, a resume
    // finished: either way every process runs again, where it was
    // checkpointed.
    PutLimitsBack(name, record);
    const ApiStatus s = ResumeProcesses(driver, LivePids(record.pids));
    port::MutexLock lock(&mu_);
    if (s.ok()) {
      if (was_resuming) {
        CloseSuspendedPeriod(&record);
        ++record.resumes;
      }
      record.state = SuspendState::kRunning;
      record.pids.clear();
      record.bytes = 0;
      record.since_unix_ms = NowUnixMs();
      record.detail = std::string("recovered at daemon start from an interrupted ") +
                      (was_resuming ? "resume" : "suspend") + "; every process running";
      spdlog::warn("vGPU '{}': {}", name, record.detail);
      ++recovered;
    } else {
      record.state = SuspendState::kSuspended;
      record.detail = "recovery at daemon start failed: " + s.message();
      spdlog::error("vGPU '{}': {}", name, record.detail);
    }
    if (Status w = WriteSuspendRecord(dir, record); !w.ok()) spdlog::error("vGPU '{}': {}", name, w.message());
  }
  return recovered;
}

}  // namespace gpuslice::node
