// cdi.h — Container Device Interface (CDI 1.1) specs, as both Kubernetes
// plugins write them for the container runtime.
//
// A spec's edits are the container setup of container_setup.h with one
// change: instead of LD_PRELOAD, the library is named in a generated
// ld.so.preload that is bind-mounted read-only on /etc/ld.so.preload, so
// every process of the container loads it whatever its environment (an exec
// with a scrubbed env, a setuid helper).
//
//   device plugin  <cdi dir>/gpu.gpuslice.io-vgpu_<vGPU name>.json: one
//                  device, named <vGPU name>, carrying every edit. Allocate
//                  returns its ID in cdi_devices, beside the mounts and env
//                  that stay the fallback for runtimes without CDI.
//   DRA driver     one spec per claim, a device per GPU (dra/cdi_spec.h).
//
// Pure apart from stat(2) (the spec builders) and the file writes;
// thread-safe for different files.
#ifndef GPUSLICE_K8S_CDI_H_
#define GPUSLICE_K8S_CDI_H_

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "k8s/assignment.h"
#include "k8s/container_setup.h"
#include "k8s/topology.h"

namespace gpuslice::k8s {

inline constexpr char kDefaultCdiDir[] = "/var/run/cdi";
inline constexpr char kCdiVersion[] = "1.1.0";
inline constexpr char kCdiKind[] = "gpu.gpuslice.io/vgpu";
inline constexpr char kContainerPreloadPath[] = "/etc/ld.so.preload";

// <cdi dir>/gpu.gpuslice.io-vgpu_<name>.json (CDI's naming of transient
// specs: <vendor>-<class>_<name>.json), and <kind>=<name>.
std::string CdiSpecPath(const std::string& cdi_dir, const std::string& name);
std::string CdiDeviceId(const std::string& device_name);

// The edits of `setup` (a preload-mode container setup) as CDI
// containerEdits: its env but LD_PRELOAD, plus GPUSLICE_VGPU=<vgpu_name>;
// its mounts, plus `preload_file` read-only on /etc/ld.so.preload; its
// device nodes.
nlohmann::json CdiEdits(const v1beta1::ContainerAllocateResponse& setup, const std::string& vgpu_name,
                        const std::string& preload_file);

// The device plugin's spec of one container's vGPU (above). `env.inject`
// must be preload: in libpath mode the plugin writes no spec, since a
// preloaded library beside the shim would interpose twice.
StatusOr<nlohmann::json> ContainerCdiSpec(const Assignment& assignment, const std::string& vgpu_dir,
                                          const NodeTopology& topology, const ContainerEnvironment& env,
                                          const std::string& preload_file);

// Writes the ld.so.preload naming the library's container path (0444),
// atomically; unchanged content is left alone.
Status WritePreloadFile(const std::string& path);

// Writes `spec` to `path` atomically (a temporary name without the .json
// suffix, which CDI caches ignore, then rename), `mode`.
Status WriteJsonAtomically(const std::string& path, const nlohmann::json& spec, int mode = 0644);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_CDI_H_
