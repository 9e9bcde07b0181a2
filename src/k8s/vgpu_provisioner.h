// vgpu_provisioner.h — how the device plugin and the DRA driver make and
// remove containers' vGPUs, and read the node's priority levels that name
// a vGPU's level, as an interface. Today it is the state directory itself
// (core::VgpuStore, NewStoreProvisioner); the node daemon can implement it
// later and hand it in, without the plugin changing.
//
// Called from gRPC handler threads (Provision) and the reclaimer (Release),
// serialised by their caller. Blocks on the store's file lock; allocates.
#ifndef GPUSLICE_K8S_VGPU_PROVISIONER_H_
#define GPUSLICE_K8S_VGPU_PROVISIONER_H_

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/vgpu_store.h"
#include "node/state_keeper_client.h"
#include "port/process.h"
#include "task/task_levels.h"

namespace gpuslice::k8s {

class VgpuProvisioner {
 public:
  virtual ~VgpuProvisioner() = default;
  // Creates the vGPU, or returns the existing one if it has exactly this
  // spec. Returns its directory on the host, which holds `limits` and
  // either `state.sock` (core/state_handout.h) or a `ledger` file
  // (core/vgpu_layout.h).
  virtual StatusOr<std::string> Provision(const core::VgpuSpec& spec) = 0;
  // Removes the vGPU once no process uses it. `probe` judges the ledger's
  // processes (they live in the container's pid namespace, not ours).
  // Returns false when something still uses it; a vGPU already gone is true.
  virtual StatusOr<bool> Release(const std::string& name, const port::ProcessProbe& probe) = 0;
  virtual std::vector<std::string> List() const = 0;
  // The node's priority levels (task/task_levels.h): the default levels, or
  // the gpuslice daemon config's, which the daemon stores in the state
  // directory. Read at each call: the daemon may start after the plugin.
  virtual StatusOr<task::LevelTable> Levels() const = 0;
};

// Over core::VgpuStore at `state_root`. Levels are node::LoadLevels(state_root),
// and each new vGPU's memory wait node::LoadMemoryWait(state_root).
//
// With `keeper` (what the plugins run), each new vGPU keeps its ledger and
// boards in sealed memory held by the node's state keeper and handed out on
// `<dir>/state.sock` (core/state_handout.h), so no container can truncate
// them under another; the provisioner checks the keeper every second and
// gives a new one everything if it died. Provision opens the directory to
// every uid (0755; it holds limits 0444, roster 0444, state.sock 0666 and
// members 0600), since the container's processes may run as any user and
// the directory is mounted read-only (container_setup.h); only this
// container's mount reaches it, because the state directory above it is 0700.
//
// Without `keeper` (tests, and vGPUs made before the handout), the ledger is
// a file, opened to every uid (0666) for the same reason.
std::unique_ptr<VgpuProvisioner> NewStoreProvisioner(const std::string& state_root,
                                                     std::unique_ptr<node::StateKeeperClient> keeper = nullptr);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_VGPU_PROVISIONER_H_
