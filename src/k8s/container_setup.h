// container_setup.h — what the kubelet must do to a container so that it runs
// inside its vGPU: the ContainerAllocateResponse of Allocate.
//
//   mounts   the vGPU's state, in one of two forms:
//              handed out (core/state_handout.h; what the plugins make now):
//                <vGPU dir> -> /run/gpuslice/vgpu                 READ-ONLY
//                (limits, roster and state.sock, which hands out the
//                sealed ledger and boards; no file of them to truncate)
//              files (vGPUs made before the handout):
//                <vGPU dir>/limits -> /run/gpuslice/vgpu/limits   READ-ONLY
//                <vGPU dir>/ledger -> /run/gpuslice/vgpu/ledger   read-write
//                <state>/boards    -> /run/gpuslice/vgpu/boards   read-write
//                <state>/roster.d  -> /run/gpuslice/vgpu/roster.d READ-ONLY
//            the library (preload: libgpuslice-cuda.so; libpath: shim/libcuda.so.1)
//            under /usr/local/gpuslice/lib, read-only
//   env      GPUSLICE_VGPU_DIR, LD_PRELOAD or LD_LIBRARY_PATH,
//            GPUSLICE_REAL_DRIVER, CUDA_VISIBLE_DEVICES and
//            NVIDIA_VISIBLE_DEVICES (GPU UUIDs)
//   devices  /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools (when the
//            host has them) and /dev/nvidiaN for each GPU
//
// Whatever a container sees of the node's state is read-only, or its own
// ledger: a root process in the container can neither write its limits nor
// replace them (design.md, "Why a process cannot raise its own limit"). The
// vGPU directory is mounted whole, not file by file, so that a new roster
// and a state.sock a new keeper binds at the old path (both replace the
// file) show in the container.
//
// Pure apart from stat(2) of the device nodes and library; thread-safe.
#ifndef GPUSLICE_K8S_CONTAINER_SETUP_H_
#define GPUSLICE_K8S_CONTAINER_SETUP_H_

#include <string>

#include "core/status.h"
#include "k8s/assignment.h"
#include "k8s/deviceplugin/v1beta1/api.pb.h"
#include "k8s/topology.h"

namespace gpuslice::k8s {

enum class InjectMode { kPreload, kLibraryPath };

struct ContainerEnvironment {
  std::string library_dir;  // host directory holding libgpuslice-cuda.so and shim/libcuda.so.1
  InjectMode inject = InjectMode::kPreload;
  // GPUSLICE_REAL_DRIVER inside the container: where the NVIDIA container
  // toolkit puts the driver on Debian/Ubuntu images. Empty: not set (the
  // library then searches NVIDIA's standard directories).
  std::string container_driver_path = "/usr/lib/x86_64-linux-gnu/libcuda.so.1";
  // libpath mode replaces the image's LD_LIBRARY_PATH; this is appended after
  // the shim so that CUDA images keep finding their libraries.
  std::string ld_library_path_rest = "/usr/local/nvidia/lib64:/usr/local/nvidia/lib";
  // NVIDIA_VISIBLE_DEVICES tells the NVIDIA container runtime which GPUs to
  // set up (driver libraries, device nodes).
  bool set_nvidia_visible_devices = true;
  // Where the device plugin writes each container's CDI spec (cdi.h), for
  // runtimes with CDI; empty: none, the mounts and env only.
  std::string cdi_dir;
  std::string dev_root = "/dev";    // host device nodes (tests point elsewhere)
  std::string proc_root = "/proc";  // for /proc/driver/nvidia (device minors)
};

StatusOr<v1beta1::ContainerAllocateResponse> BuildContainerResponse(const Assignment& assignment,
                                                                    const std::string& vgpu_dir,
                                                                    const NodeTopology& topology,
                                                                    const ContainerEnvironment& env);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_CONTAINER_SETUP_H_
