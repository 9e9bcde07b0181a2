// slice_audit.h — holds every process's channel groups to its vGPU's slice
// ceiling (core/slice_ceiling.h), from outside the process.
//
// A process can ask RM for any slice on its own channel groups with the raw
// system call, which no interposer sees, and stop the library thread that
// would set the vGPU's slice back (docs/design.md, "A tenant's own channel
// groups"). A best-effort process at a 4 s slice holds an LC off the GPU as
// stock time-slicing does, or worse. RM takes controls on a process's groups
// through a duplicate of its descriptor (pidfd_getfd) from another process
// (docs/gpu-facts.md). So about once a second the daemon reads the slice of
// every channel group that the processes the driver lists on its GPUs
// published in their ledger slots, and for a group above its vGPU's ceiling:
//   - the first time, sets the vGPU's own slice there and says so;
//   - found above it again at a later pass, the vGPU's limits unchanged in
//     between, the tenant raised it itself (a library never sets more than
//     the ceiling): `raised_slice`, acted on as audit.raised_slice says
//     (report, deny: SIGSTOP, kill: the default), once per group.
// A process with no group to audit on a GPU for seconds is `hidden_groups`
// (audit.hidden_groups, report by default: HiddenGroups says why).
// The slots are the tenant's to write, so what they name is believed only as
// RM answers for it on the process's own descriptor: a descriptor that is
// not NVIDIA's RM control device is never used, and RM refuses a handle
// that is not a channel group of that descriptor's client. Nothing is set
// on, or done to, a process that does not map the slot's vGPU's ledger
// (/proc/PID/maps), so a slot naming another tenant's process changes
// nothing there.
//
// A pass runs about once a second, and every few hundred milliseconds for a
// while after a group was set back (Watching), so a tenant that raises its
// slice again and again is acted on about a second after its first raise.
//
// Fails open: where the daemon may not take a process's descriptors (not
// root, no CAP_SYS_PTRACE), it says so once and audits nothing there.
//
// Not thread-safe: one thread calls Pass (the housekeeping thread). Allocates;
// each group costs three system calls and an RM control or two (160-440 us
// each on an H200).
#ifndef GPUSLICE_DAEMON_SLICE_AUDIT_H_
#define GPUSLICE_DAEMON_SLICE_AUDIT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "audit/memory_audit.h"
#include "node/vgpu_view.h"
#include "rm/rm_ioctl.h"
#include "rm/timeslice_control.h"

namespace gpuslice::daemon {

// Another process's descriptors, behind a seam for tests.
class TenantDescriptors {
 public:
  virtual ~TenantDescriptors() = default;
  // A descriptor of this process for process `pid`'s descriptor `fd`, if
  // that is NVIDIA's RM control device (/dev/nvidiactl); else -errno:
  // -ENODEV for another file, -EPERM where it may not be taken.
  virtual int DupRmControl(uint32_t pid, int fd) = 0;
  virtual void Close(int fd) = 0;
};
// pidfd_open, pidfd_getfd and fstat (a character device 195:255).
TenantDescriptors& SystemTenantDescriptors();

// One group found above its ceiling.
struct RaisedSlice {
  std::string vgpu;
  uint32_t pid = 0;  // the daemon's pid namespace
  uint32_t client = 0;
  uint32_t handle = 0;
  bool compute = true;
  uint64_t found_us = 0;    // the slice read
  uint64_t ceiling_us = 0;  // the vGPU's ceiling there
  uint64_t set_us = 0;      // what the daemon set
  bool again = false;       // found again after a set: the tenant raises it itself
  bool acted = false;       // `action` was taken in this pass
  audit::AuditAction action = audit::AuditAction::kReport;
};
std::string Describe(const RaisedSlice& r);

// A process on a GPU none of whose channel groups can be audited there for
// kHiddenAfterNs: its slot names none, or none that RM answers for. Its
// library publishes them within a tick of making them, so either the
// tenant cleared its list (to raise its slices unseen) or its library
// cannot see the driver's ioctls (a gpuslice failure, which is why the
// default action is report).
struct HiddenGroups {
  std::string vgpu;
  uint32_t pid = 0;
  uint32_t gpu_index = 0;
  bool acted = false;  // `action` was taken in this pass
  audit::AuditAction action = audit::AuditAction::kReport;
};
std::string Describe(const HiddenGroups& h);

struct SliceAuditActions {
  audit::AuditAction raised = audit::AuditAction::kKill;                   // audit.raised_slice
  std::optional<audit::AuditAction> hidden = audit::AuditAction::kReport;  // audit.hidden_groups; nullopt: off
};

class SliceAudit {
 public:
  // Called for each finding acted on, with its kind ("raised_slice",
  // "hidden_groups"): the metrics' counter.
  using OnActed = std::function<void(const std::string& vgpu, const char* kind)>;
  // All must outlive the audit.
  SliceAudit(SliceAuditActions actions, TenantDescriptors* descriptors, rm::RmIoctl* rm,
             const audit::ProcessTable* table, audit::ProcessActions* process_actions, OnActed on_acted);

  // After a group is set back, how long the audit is watched for: its
  // owner runs passes every few hundred milliseconds (Watching), so that a
  // tenant raising its slice again is acted on within that, not a second.
  static constexpr uint64_t kWatchNs = 10'000'000'000;
  // How long a listed process may have no group to audit: its library
  // publishes its groups within 100 ms of making them, and a loaded node
  // may delay that by seconds.
  static constexpr uint64_t kHiddenAfterNs = 5'000'000'000;

  struct Findings {
    std::vector<RaisedSlice> raised;
    std::vector<HiddenGroups> hidden;  // those past kHiddenAfterNs
  };
  // One pass over `views`' processes that `listed` (the driver's compute
  // processes, this namespace's pids) has on a GPU.
  Findings Pass(const std::vector<node::VgpuView>& views, const std::vector<audit::GpuProcess>& listed,
                uint64_t now_ns);
  // True within kWatchNs of setting back a group not yet acted on.
  bool Watching(uint64_t now_ns) const;

 private:
  using Key = std::tuple<uint32_t, uint32_t, uint32_t>;  // host pid, client, group
  struct Strike {
    uint64_t generation = 0;  // the vGPU's limits when the daemon set the group back
    uint64_t found_ns = 0;    // when
    bool acted = false;
  };

  struct Hidden {
    uint64_t since_ns = 0;
    bool acted = false;
  };
  // Acts on `pid` as `action` says.
  void Act(audit::AuditAction action, uint32_t pid);
  // Sets `tsg` (process `pid`'s, of `view`, read at `found_us`) back to
  // `set_us`, and acts on the process if that is its second strike.
  RaisedSlice SetBack(const node::VgpuView& view, uint32_t pid, const rm::TsgRef& tsg, uint64_t found_us,
                      uint64_t ceiling_us, uint64_t set_us, uint64_t now_ns);

  const SliceAuditActions actions_;
  TenantDescriptors* const descriptors_;
  rm::TimesliceControl control_;
  const audit::ProcessTable* const table_;
  audit::ProcessActions* const process_actions_;
  OnActed on_acted_;
  std::map<Key, Strike> strikes_;
  std::map<std::pair<uint32_t, uint32_t>, Hidden> hidden_;  // (host pid, GPU index)
  bool warned_denied_ = false;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_SLICE_AUDIT_H_
