// cdi_spec.h — the Container Device Interface (CDI 1.1) spec of one prepared
// claim: what a container runtime must do to a container that uses the
// claim's vGPU. One file per claim, <cdi dir>/gpu.gpuslice.io-vgpu_<uid>.json,
// kind gpu.gpuslice.io/vgpu, one CDI device per allocated GPU, named
// <claim uid>-<gpu index>.
//
// The edits are the device plugin's (k8s/cdi.h: the container setup, with
// the library in /etc/ld.so.preload instead of LD_PRELOAD). The claim-wide
// edits sit at the spec level, which a runtime applies once when any of the
// spec's devices is injected; each device adds only its own /dev/nvidiaN.
//
// Pure apart from stat(2); thread-safe.
#ifndef GPUSLICE_K8S_DRA_CDI_SPEC_H_
#define GPUSLICE_K8S_DRA_CDI_SPEC_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "k8s/cdi.h"
#include "k8s/container_setup.h"
#include "k8s/dra/claim_allocation.h"
#include "k8s/topology.h"

namespace gpuslice::k8s::dra {

// The CDI device name of a claim's GPU; its ID is k8s::CdiDeviceId of it,
// and the spec's file k8s::CdiSpecPath(cdi dir, claim uid).
std::string CdiDeviceName(const std::string& claim_uid, uint32_t gpu_index);

// `preload_file` is the host path of the generated ld.so.preload.
StatusOr<nlohmann::json> BuildCdiSpec(const ClaimAllocation& claim, const std::string& vgpu_name,
                                      const std::string& vgpu_dir, const NodeTopology& topology,
                                      const ContainerEnvironment& env, const std::string& preload_file);

}  // namespace gpuslice::k8s::dra

#endif  // GPUSLICE_K8S_DRA_CDI_SPEC_H_
