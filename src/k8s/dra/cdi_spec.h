// cdi_spec.h — the Container Device Interface (CDI 1.1) spec of one prepared
// claim: what a container runtime must do to a container that uses the
// claim's vGPU. One file per claim, <cdi dir>/gpu.gpuslice.io-vgpu_<uid>.json,
// kind gpu.gpuslice.io/vgpu, one CDI device per allocated GPU, named
// <claim uid>-<gpu index>.
//
// The edits are the device plugin's container setup (container_setup.h: the
// limits file read-only, the ledger and boards, GPUSLICE_* and
// CUDA_VISIBLE_DEVICES, the device nodes), with one change: instead of
// LD_PRELOAD, the library is named in a generated ld.so.preload that is
// bind-mounted read-only on /etc/ld.so.preload, so every process of the
// container loads it whatever its environment (an exec with a scrubbed env,
// a setuid helper). The claim-wide edits sit at the spec level, which a
// runtime applies once when any of the spec's devices is injected; each
// device adds only its own /dev/nvidiaN.
//
// Pure apart from stat(2) (BuildCdiSpec) and the file writes (the rest);
// thread-safe for different claims.
#ifndef GPUSLICE_K8S_DRA_CDI_SPEC_H_
#define GPUSLICE_K8S_DRA_CDI_SPEC_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "k8s/container_setup.h"
#include "k8s/dra/claim_allocation.h"
#include "k8s/topology.h"

namespace gpuslice::k8s::dra {

inline constexpr char kContainerPreloadPath[] = "/etc/ld.so.preload";

// The CDI device names and fully qualified IDs of a claim's devices.
std::string CdiDeviceName(const std::string& claim_uid, uint32_t gpu_index);
std::string CdiDeviceId(const std::string& claim_uid, uint32_t gpu_index);  // gpu.gpuslice.io/vgpu=<name>
std::string CdiSpecPath(const std::string& cdi_dir, const std::string& claim_uid);

// `preload_file` is the host path of the generated ld.so.preload.
StatusOr<nlohmann::json> BuildCdiSpec(const ClaimAllocation& claim, const std::string& vgpu_name,
                                      const std::string& vgpu_dir, const NodeTopology& topology,
                                      const ContainerEnvironment& env, const std::string& preload_file);

// Writes the ld.so.preload naming the library's container path (0444),
// atomically; unchanged content is left alone.
Status WritePreloadFile(const std::string& path);

// Writes `spec` to `path` atomically (a temporary name without the .json
// suffix, which CDI caches ignore, then rename), 0644.
Status WriteJsonAtomically(const std::string& path, const nlohmann::json& spec, int mode = 0644);

}  // namespace gpuslice::k8s::dra

#endif  // GPUSLICE_K8S_DRA_CDI_SPEC_H_
