// names.h — the names the DRA driver shares with Kubernetes, the kubelet and
// container runtimes: the driver, its sockets, the CDI kind, the opaque
// config's kind. One place, so that code, manifests and docs agree.
//
// Constants only; no code.
#ifndef GPUSLICE_K8S_DRA_NAMES_H_
#define GPUSLICE_K8S_DRA_NAMES_H_

namespace gpuslice::k8s::dra {

inline constexpr char kDriverName[] = "gpu.gpuslice.io";

// The kubelet's plugin watcher scans this directory for registration sockets.
inline constexpr char kDefaultRegistryDir[] = "/var/lib/kubelet/plugins_registry";
// The DRA service socket lives in <plugins dir>/<driver>/dra.sock.
inline constexpr char kDefaultPluginsDir[] = "/var/lib/kubelet/plugins";
inline constexpr char kDraPluginType[] = "DRAPlugin";
inline constexpr char kDraV1Version[] = "v1.DRAPlugin";
inline constexpr char kDraV1beta1Version[] = "v1beta1.DRAPlugin";

// CDI: the kind and directory are both plugins' (k8s/cdi.h).

// The claim's opaque configuration (DeviceClass or ResourceClaim
// spec.devices.config[].opaque.parameters).
inline constexpr char kConfigApiVersion[] = "gpu.gpuslice.io/v1alpha1";
inline constexpr char kConfigKind[] = "VgpuConfig";

// Device capacities in the ResourceSlice.
inline constexpr char kCoresCapacity[] = "cores";
inline constexpr char kMemoryCapacity[] = "memory";

}  // namespace gpuslice::k8s::dra

#endif  // GPUSLICE_K8S_DRA_NAMES_H_
