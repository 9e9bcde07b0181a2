// gpu_health_file.h — the GPUs a daemon marked unhealthy, kept in the state
// directory as `gpu-health`, so that its successor marks them so too
// (daemon/gpu_health.h). By UUID: a GPU's index can change when the node
// restarts or a GPU is taken out.
//
// Text, one GPU per line after the header, written whole through a rename:
//   gpuslice-gpu-health 1
//   <GPU UUID> <critical XID> <when, Unix seconds>
// No file means no GPU is unhealthy. Only the daemon writes it.
//
// Slow path: allocates, makes syscalls. Thread-compatible.
#ifndef GPUSLICE_NODE_GPU_HEALTH_FILE_H_
#define GPUSLICE_NODE_GPU_HEALTH_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuslice::node {

inline constexpr char kGpuHealthFile[] = "gpu-health";

struct UnhealthyGpu {
  std::string uuid;  // "GPU-xxxxxxxx-..."
  uint64_t xid = 0;
  int64_t since_unix_seconds = 0;
  bool operator==(const UnhealthyGpu&) const = default;
};

Status StoreUnhealthyGpus(const std::string& state_dir, const std::vector<UnhealthyGpu>& gpus);
// Empty when there is no file. An unreadable or malformed file is an error
// naming it and the line; the caller decides (the daemon logs it and starts
// with every GPU healthy).
StatusOr<std::vector<UnhealthyGpu>> LoadUnhealthyGpus(const std::string& state_dir);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_GPU_HEALTH_FILE_H_
