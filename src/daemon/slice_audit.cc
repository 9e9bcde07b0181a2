#include "daemon/slice_audit.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

// glibc 2.36's <sys/pidfd.h> declares these without C linkage for C++.
extern "C" {
#include <sys/pidfd.h>
}

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

#include "core/slice_ceiling.h"
#include "core/vgpu_layout.h"
#include "daemon/audit_inputs.h"
#include "rm/rm_abi.h"

namespace gpuslice::daemon {
namespace {

// NVIDIA's control device, /dev/nvidiactl: character device 195:255 (the
// driver's major number and its control minor, nv-linux.h).
constexpr unsigned kNvidiaMajor = 195;
constexpr unsigned kNvidiaControlMinor = 255;

class SystemDescriptors final : public TenantDescriptors {
 public:
  int DupRmControl(uint32_t pid, int fd) override {
    const int pidfd = pidfd_open(static_cast<pid_t>(pid), 0);
    if (pidfd < 0) return -errno;
    const int dup = pidfd_getfd(pidfd, fd, 0);
    const int error = errno;
    close(pidfd);
    if (dup < 0) return -error;
    struct stat st;
    if (fstat(dup, &st) != 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != kNvidiaMajor ||
        minor(st.st_rdev) != kNvidiaControlMinor) {
      close(dup);
      return -ENODEV;
    }
    return dup;
  }
  void Close(int fd) override { close(fd); }
};

}  // namespace

TenantDescriptors& SystemTenantDescriptors() {
  static SystemDescriptors descriptors;
  return descriptors;
}

std::string Describe(const RaisedSlice& r) {
  std::string what = "vGPU '" + r.vgpu + "' process " + std::to_string(r.pid) + ": its " +
                     (r.compute ? "compute" : "copy-engine") + " channel group " + fmt::format("0x{:x}", r.handle) +
                     " ran a " + std::to_string(r.found_us) + " us timeslice, above its vGPU's " +
                     std::to_string(r.ceiling_us) + " us; set to " + std::to_string(r.set_us) + " us";
  if (!r.again) return what + " (it is acted on if it raises it again)";
  return what + " again: the process raises it itself (RM controls its library does not make); " +
         (r.acted ? std::string(audit::AuditActionName(r.action)) + " (audit.raised_slice)"
                  : std::string("already acted on"));
}

std::string Describe(const HiddenGroups& h) {
  return "vGPU '" + h.vgpu + "' process " + std::to_string(h.pid) + " runs on GPU " + std::to_string(h.gpu_index) +
         " with no channel group its slot names that RM answers for, for " +
         std::to_string(SliceAudit::kHiddenAfterNs / 1'000'000'000) +
         " s: its slices cannot be audited (a tenant that cleared its list, or a library that cannot see the "
         "driver's ioctls); " +
         (h.acted ? std::string(audit::AuditActionName(h.action)) + " (audit.hidden_groups)"
                  : std::string("already acted on"));
}

SliceAudit::SliceAudit(SliceAuditActions actions, TenantDescriptors* descriptors, rm::RmIoctl* rm,
                       const audit::ProcessTable* table, audit::ProcessActions* process_actions, OnActed on_acted)
    : actions_(actions),
      descriptors_(descriptors),
      control_(rm),
      table_(table),
      process_actions_(process_actions),
      on_acted_(std::move(on_acted)) {}

void SliceAudit::Act(audit::AuditAction action, uint32_t pid) {
  if (action == audit::AuditAction::kDeny) process_actions_->Stop(pid);
  if (action == audit::AuditAction::kKill) process_actions_->Kill(pid);
}

RaisedSlice SliceAudit::SetBack(const node::VgpuView& view, uint32_t pid, const rm::TsgRef& tsg, uint64_t found_us,
                                uint64_t ceiling_us, uint64_t set_us, uint64_t now_ns) {
  RaisedSlice r;
  r.vgpu = view.name;
  r.pid = pid;
  r.client = tsg.client;
  r.handle = tsg.handle;
  r.compute = tsg.engine_type == rm::kEngineTypeGraphics;
  r.found_us = found_us;
  r.ceiling_us = ceiling_us;
  r.set_us = set_us;
  if (const rm::ControlResult set = control_.Set(tsg, set_us); !set.ok) {
    char why[96];
    spdlog::warn("slice audit: could not set {}'s channel group 0x{:x} back ({})", view.name, tsg.handle,
                 set.Describe(why, sizeof why));
  }
  auto [strike, first] = strikes_.try_emplace(Key{pid, tsg.client, tsg.handle});
  r.again = !first && strike->second.generation == view.generation;
  if (r.again && !strike->second.acted) {
    r.action = actions_.raised;
    r.acted = true;
    strike->second.acted = true;
    Act(r.action, pid);
  }
  strike->second.generation = view.generation;
  strike->second.found_ns = now_ns;
  spdlog::warn("slice audit: {}", Describe(r));
  if (r.acted && on_acted_) on_acted_(r.vgpu, "raised_slice");
  return r;
}

SliceAudit::Findings SliceAudit::Pass(const std::vector<node::VgpuView>& views,
                                      const std::vector<audit::GpuProcess>& listed, uint64_t now_ns) {
  // The driver's processes, by how their slots name them, and the GPUs
  // each is on.
  std::map<std::pair<uint64_t, uint32_t>, uint32_t> host_pids;
  std::map<uint32_t, std::set<uint32_t>> gpus_of;
  for (const audit::GpuProcess& p : listed) {
    gpus_of[p.pid].insert(p.gpu_index);
    if (auto id = table_->InNamespace(p.pid)) host_pids[{id->pid_namespace, id->pid}] = p.pid;
  }
  Findings found;
  std::set<std::pair<uint32_t, uint32_t>> still_hidden;
  for (const node::VgpuView& view : views) {
    if (!view.corrupt.empty()) continue;
    for (const node::VgpuProcessView& process : view.processes) {
      const auto host = host_pids.find({process.pid_namespace, process.pid});
      if (host == host_pids.end()) continue;
      const uint32_t pid = host->second;
      std::optional<bool> member;  // whether `pid` maps this vGPU's ledger, once asked
      auto is_member = [&] {
        if (!member) member = MapsLedgerOf(pid, view);
        return *member;
      };
      std::set<uint32_t> audited, unknown;  // GPU indices with a group RM answered for, or not asked
      auto mark = [&](std::set<uint32_t>* into, uint32_t slot) {
        for (uint32_t s = 0; s < view.devices.size(); ++s) {
          if ((slot == core::kUnknownDeviceSlot || slot == s) && view.devices[s].gpu_index) {
            into->insert(*view.devices[s].gpu_index);
          }
        }
      };
      for (const node::ChannelGroupView& g : process.channel_groups) {
        const bool compute = g.engine_type == rm::kEngineTypeGraphics;
        // A group of no known device is held to the vGPU's largest ceiling.
        uint64_t ceiling = 0, policy_us = 0;
        for (uint32_t s = 0; s < view.devices.size(); ++s) {
          if (g.device_slot != core::kUnknownDeviceSlot && g.device_slot != s) continue;
          const node::VgpuDeviceView& d = view.devices[s];
          ceiling = std::max(ceiling, compute ? d.slice_ceiling_us : d.copy_slice_ceiling_us);
          policy_us = std::max(policy_us, d.timeslice_us);
        }
        if (ceiling == 0) continue;
        const int fd = descriptors_->DupRmControl(pid, g.fd);
        if (fd == -EPERM || fd == -EACCES) {
          if (!warned_denied_) {
            spdlog::warn(
                "slice audit: may not take process {}'s descriptors ({}); channel groups' slices are not audited "
                "(run the daemon as root, or give it CAP_SYS_PTRACE)",
                pid, strerror(-fd));
          }
          warned_denied_ = true;
        }
        if (fd < 0) {
          if (fd != -ENODEV) mark(&unknown, g.device_slot);  // not a refusal: it could not be asked
          continue;
        }
        rm::TsgRef tsg;
        tsg.fd = fd;
        tsg.client = g.client;
        tsg.handle = g.handle;
        tsg.engine_type = g.engine_type;
        uint64_t current = 0;
        // Read first, and only what is above the ceiling is checked further:
        // a read changes nothing, and /proc/PID/maps is long.
        const rm::ControlResult read = control_.Get(tsg, &current);
        if (read.ok) mark(&audited, g.device_slot);
        if (read.error != 0) mark(&unknown, g.device_slot);
        if (!read.ok || current <= ceiling || !is_member()) {
          descriptors_->Close(fd);
          continue;
        }
        // The vGPU's own slice (its policy's, or the driver's default),
        // never above the ceiling: what its library would set.
        const uint64_t own = policy_us != 0 ? policy_us : compute ? core::kDriverComputeSliceUs : core::kDriverCopySliceUs;
        found.raised.push_back(SetBack(view, pid, tsg, current, ceiling, std::min(own, ceiling), now_ns));
        descriptors_->Close(fd);
      }
      // The GPUs the driver lists it on, of this vGPU, with no group to audit.
      if (!actions_.hidden) continue;
      for (const node::VgpuDeviceView& d : view.devices) {
        if (!d.gpu_index || !gpus_of[pid].count(*d.gpu_index)) continue;
        const uint32_t gpu = *d.gpu_index;
        if (audited.count(gpu) || unknown.count(gpu) || !is_member()) continue;
        const std::pair<uint32_t, uint32_t> key{pid, gpu};
        still_hidden.insert(key);
        Hidden& h = hidden_.try_emplace(key, Hidden{now_ns, false}).first->second;
        if (h.acted || now_ns < h.since_ns + kHiddenAfterNs) continue;
        HiddenGroups hg{view.name, pid, gpu, true, *actions_.hidden};
        h.acted = true;
        Act(hg.action, pid);
        spdlog::warn("slice audit: {}", Describe(hg));
        if (on_acted_) on_acted_(hg.vgpu, "hidden_groups");
        found.hidden.push_back(std::move(hg));
      }
    }
  }
  // A group set back keeps its strike while its process is listed: raising
  // it later, its limits unchanged, is raising it again.
  std::erase_if(strikes_, [&](const auto& s) { return gpus_of.count(std::get<0>(s.first)) == 0; });
  std::erase_if(hidden_, [&](const auto& h) { return still_hidden.count(h.first) == 0; });
  return found;
}

bool SliceAudit::Watching(uint64_t now_ns) const {
  return std::any_of(strikes_.begin(), strikes_.end(),
                     [now_ns](const auto& s) { return !s.second.acted && now_ns < s.second.found_ns + kWatchNs; });
}

}  // namespace gpuslice::daemon
