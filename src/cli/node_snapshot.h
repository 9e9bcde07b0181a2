// node_snapshot.h — what the listing commands (ls, top, devices) show, from
// the daemon when one answers, else read straight from the node: NVML for
// the GPUs and the state directory for the vGPUs (read-only, through the
// daemon's own view code, so both paths print the same thing). Only the
// daemon measures compute use, so standalone snapshots have no measured
// shares.
//
// Called from the CLI's main thread. Blocks in gRPC or NVML; allocates.
#ifndef GPUSLICE_CLI_NODE_SNAPSHOT_H_
#define GPUSLICE_CLI_NODE_SNAPSHOT_H_

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "daemon/daemon_client.h"
#include "gpuslice/control.pb.h"

namespace gpuslice::cli {

struct NodeSnapshot {
  control::v1::GetDevicesResponse devices;
  std::vector<control::v1::Vgpu> vgpus;
  uint32_t daemon_pid = 0;  // 0: read standalone
};

// Reads the node once. `client` may be null (no daemon: standalone).
// `name` = "" lists every vGPU; an unknown name is an error.
StatusOr<NodeSnapshot> TakeNodeSnapshot(daemon::DaemonClient* client, const std::string& state_dir,
                                        const std::string& name, bool with_vgpus);

}  // namespace gpuslice::cli

#endif  // GPUSLICE_CLI_NODE_SNAPSHOT_H_
