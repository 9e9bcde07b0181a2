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
// The slots are the tenant's to write, so what they name is believed only as
// RM answers for it on the process's own descriptor: a descriptor that is
// not NVIDIA's RM control device is never used, and RM refuses a handle
// that is not a channel group of that descriptor's client. Nothing is set
// on a process that does not map the slot's vGPU's ledger (/proc/PID/maps),
// so a slot naming another tenant's process changes nothing there. A
// tenant that clears its slot's list is not audited (docs/design.md says
// what is left).
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

class SliceAudit {
 public:
  // Called for each group found above its ceiling again (the metrics' counter).
  using OnRaised = std::function<void(const RaisedSlice&)>;
  // All must outlive the audit.
  SliceAudit(audit::AuditAction action, TenantDescriptors* descriptors, rm::RmIoctl* rm,
             const audit::ProcessTable* table, audit::ProcessActions* actions, OnRaised on_raised);

  // After a group is set back, how long the audit is watched for: its
  // owner runs passes every few hundred milliseconds (Watching), so that a
  // tenant raising its slice again is acted on within that, not a second.
  static constexpr uint64_t kWatchNs = 10'000'000'000;

  // One pass over `views`' processes that `listed` (the driver's compute
  // processes, this namespace's pids) has on a GPU. Returns what it found.
  std::vector<RaisedSlice> Pass(const std::vector<node::VgpuView>& views, const std::vector<audit::GpuProcess>& listed,
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

  const audit::AuditAction action_;
  TenantDescriptors* const descriptors_;
  rm::TimesliceControl control_;
  const audit::ProcessTable* const table_;
  audit::ProcessActions* const actions_;
  OnRaised on_raised_;
  std::map<Key, Strike> strikes_;
  bool warned_denied_ = false;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_SLICE_AUDIT_H_
