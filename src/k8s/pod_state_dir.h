// pod_state_dir.h — the Kubernetes plugins' state directory stays
// owner-only.
//
// A pod's vGPU directory is open to every uid (0755, its state socket 0666):
// the container's processes may run as any user, and only the container's
// own mount should reach them. So nothing above may be open: not the
// hostPath that kubelet creates 0755 (narrowed here to 0700), and not a
// node daemon's state directory opened to its `socket.group` (0710), whose
// group's users could then reach every pod's socket and ledger. The plugins
// refuse to start in such a directory, and mark theirs (core::kPodsMarker)
// so that a daemon refuses to open it to a group.
//
// Slow path, at plugin start; thread-compatible.
#ifndef GPUSLICE_K8S_POD_STATE_DIR_H_
#define GPUSLICE_K8S_POD_STATE_DIR_H_

#include <string>

#include "core/status.h"

namespace gpuslice::k8s {

// `state_dir` (which exists) made owner-only (0700), unless a group other
// than root's may enter it, which is an error naming the fix; then marked.
Status SecurePodStateDir(const std::string& state_dir);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_POD_STATE_DIR_H_
