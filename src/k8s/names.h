// names.h — the names gpuslice shares with Kubernetes: extended resources,
// annotations, and the paths a container sees. One place, so that the device
// plugin, the scheduler extender, the manifests and docs/kubernetes.md agree.
//
// Constants only; no code.
#ifndef GPUSLICE_K8S_NAMES_H_
#define GPUSLICE_K8S_NAMES_H_

#include <cstdint>

namespace gpuslice::k8s {

// Extended resources. vcore: 100 per GPU; a request of 1..100 is a share of
// one GPU, a multiple of 100 is that many whole GPUs. vmemory: units of
// kVmemoryUnitBytes, the container's total over its GPUs.
inline constexpr char kVcoreResource[] = "gpuslice.io/vcore";
inline constexpr char kVmemoryResource[] = "gpuslice.io/vmemory";
inline constexpr uint32_t kVcorePerGpu = 100;
inline constexpr uint64_t kVmemoryUnitBytes = 256ull << 20;  // 256 MiB

// Pod annotations.
//   priority   set by the user: a priority level of the node, "lc" (latency-critical),
//              "be" (best effort, the default) or a level of the node's daemon
//              config (priority_level.h)
//   gpus       set by the extender's bind: {"<container>": [gpu indices], ...}
//   node       set by the extender's bind: the node the indices refer to
//   bind-time  set by the extender's bind: nanoseconds since the epoch; orders
//              pods waiting for Allocate on one node
//   lc-slo-p99-us, lc-alone-p99-us  set by the user on an LC pod (below)
//   power-cap-watts  set by the user: each container's vGPU's power cap per
//              GPU, in watts (docs/design.md, "Power caps"); absent: none
//   suspendable  set by the user on a best-effort pod: "true" lets the node
//              daemon suspend its vGPUs to make room for higher levels
//              (docs/design.md, "Memory overcommit"); absent or "false": not
inline constexpr char kPriorityAnnotation[] = "gpuslice.io/priority";
inline constexpr char kPowerCapAnnotation[] = "gpuslice.io/power-cap-watts";
inline constexpr char kSuspendableAnnotation[] = "gpuslice.io/suspendable";
// A latency-critical pod's p99 SLO and its p99 measured alone, in µs: the
// extender's prioritize prefers nodes where the SLO holds (lc_slo.h).
inline constexpr char kLcSloP99Annotation[] = "gpuslice.io/lc-slo-p99-us";
inline constexpr char kLcAloneP99Annotation[] = "gpuslice.io/lc-alone-p99-us";
inline constexpr char kGpusAnnotation[] = "gpuslice.io/gpus";
inline constexpr char kBindNodeAnnotation[] = "gpuslice.io/node";
inline constexpr char kBindTimeAnnotation[] = "gpuslice.io/bind-time";

// Node annotations, kept current by the device plugin on each node.
//   topology   exactly what `gpuslice devices --json` prints
//   allocated  per-GPU usage in vcore and vmemory units (usage.h)
inline constexpr char kTopologyAnnotation[] = "gpuslice.io/topology";
inline constexpr char kAllocatedAnnotation[] = "gpuslice.io/allocated";

// What a container sees (container paths, not host paths).
inline constexpr char kContainerVgpuDir[] = "/run/gpuslice/vgpu";
inline constexpr char kContainerLibraryDir[] = "/usr/local/gpuslice/lib";

// The kubelet's device-plugin protocol.
inline constexpr char kDevicePluginApiVersion[] = "v1beta1";
inline constexpr char kKubeletSocketName[] = "kubelet.sock";
inline constexpr char kDefaultDevicePluginDir[] = "/var/lib/kubelet/device-plugins";
inline constexpr char kDefaultPodResourcesSocket[] = "/var/lib/kubelet/pod-resources/kubelet.sock";
inline constexpr char kHealthy[] = "Healthy";
inline constexpr char kUnhealthy[] = "Unhealthy";

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_NAMES_H_
