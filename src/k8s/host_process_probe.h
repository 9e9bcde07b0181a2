// host_process_probe.h — a ProcessProbe (port/process.h) that can also judge
// the processes of containers, for removing a dead pod's vGPU.
//
// A vGPU's ledger slots name each process by (pid, start time, pid
// namespace). The pid means nothing outside its namespace, so the core's
// probe leaves other namespaces' slots alone, and a container killed with
// SIGKILL would keep its vGPU forever. A namespace lives exactly as long as
// one of its processes does, so this probe says a foreign-namespace process
// is gone when no process on the host is in that namespace any more. It
// needs the host's /proc (the DaemonSet runs with hostPID).
//
// Refresh() snapshots the namespaces in use; IsGone answers from the last
// snapshot, so take one right before judging. Thread-compatible; Refresh
// reads /proc (one readlink per process) and allocates.
#ifndef GPUSLICE_K8S_HOST_PROCESS_PROBE_H_
#define GPUSLICE_K8S_HOST_PROCESS_PROBE_H_

#include <cstdint>
#include <set>
#include <string>

#include "port/process.h"

namespace gpuslice::k8s {

class HostProcessProbe final : public port::ProcessProbe {
 public:
  explicit HostProcessProbe(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}

  void Refresh();
  port::ProcessIdentity Self() const override;
  bool IsGone(const port::ProcessIdentity& who) const override;

 private:
  std::string proc_root_;
  std::set<uint64_t> live_namespaces_;
  bool refreshed_ = false;
};

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_HOST_PROCESS_PROBE_H_
