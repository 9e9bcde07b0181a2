#include "k8s/container_setup.h"

#include <sys/stat.h>

#include "core/board_roster.h"
#include "core/state_handout.h"
#include "core/vgpu_store.h"
#include "k8s/gpu_sources.h"
#include "k8s/names.h"

namespace gpuslice::k8s {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

void AddMount(v1beta1::ContainerAllocateResponse& r, const std::string& host, const std::string& container,
              bool read_only) {
  v1beta1::Mount* m = r.add_mounts();
  m->set_host_path(host);
  m->set_container_path(container);
  m->set_read_only(read_only);
}

}  // namespace

StatusOr<v1beta1::ContainerAllocateResponse> BuildContainerResponse(const Assignment& a, const std::string& vgpu_dir,
                                                                    const NodeTopology& topology,
                                                                    const ContainerEnvironment& env) {
  v1beta1::ContainerAllocateResponse r;
  const std::string vgpu = kContainerVgpuDir;
  if (core::HandsOutState(vgpu_dir)) {
    AddMount(r, vgpu_dir, vgpu, /*read_only=*/true);
  } else {
    AddMount(r, vgpu_dir + "/limits", vgpu + "/limits", /*read_only=*/true);
    AddMount(r, vgpu_dir + "/ledger", vgpu + "/ledger", /*read_only=*/false);
    // The GPUs' pacing boards, shared with every vGPU on the node (core/pacing_board.h).
    const std::string state_root = core::VgpuStore::RootOf(vgpu_dir);
    AddMount(r, state_root + "/boards", vgpu + "/boards", /*read_only=*/false);
    // The node's roster (core/board_roster.h): which of the boards' rows to
    // believe. Read-only, and a directory, so that each new roster shows.
    AddMount(r, state_root + "/" + core::kRosterDirName, vgpu + "/" + core::kRosterDirName, /*read_only=*/true);
  }

  const std::string lib = kContainerLibraryDir;
  const std::string host_library = env.inject == InjectMode::kPreload ? env.library_dir + "/libgpuslice-cuda.so"
                                                                      : env.library_dir + "/shim/libcuda.so.1";
  if (!Exists(host_library)) {
    return Status::Error("the gpuslice library is missing on the host at " + host_library +
                         "; the DaemonSet's install step copies it there (or pass --library-dir)");
  }
  auto& envs = *r.mutable_envs();
  envs["GPUSLICE_VGPU_DIR"] = vgpu;
  if (env.inject == InjectMode::kPreload) {
    AddMount(r, host_library, lib + "/libgpuslice-cuda.so", true);
    envs["LD_PRELOAD"] = lib + "/libgpuslice-cuda.so";
  } else {
    AddMount(r, host_library, lib + "/shim/libcuda.so.1", true);
    envs["LD_LIBRARY_PATH"] = lib + "/shim" + (env.ld_library_path_rest.empty() ? "" : ":" + env.ld_library_path_rest);
  }
  if (!env.container_driver_path.empty()) envs["GPUSLICE_REAL_DRIVER"] = env.container_driver_path;
  std::string uuids;
  for (const std::string& u : a.uuids) uuids += (uuids.empty() ? "" : ",") + u;
  envs["CUDA_VISIBLE_DEVICES"] = uuids;
  if (env.set_nvidia_visible_devices) envs["NVIDIA_VISIBLE_DEVICES"] = uuids;

  auto add_device = [&](const std::string& name, bool required) -> Status {
    const std::string host = env.dev_root + "/" + name;
    if (!Exists(host)) {
      if (!required) return Status::Ok();
      return Status::Error("device node " + host +
                           " is missing on the host; is the NVIDIA driver loaded (nvidia-smi)?");
    }
    v1beta1::DeviceSpec* d = r.add_devices();
    d->set_host_path(host);
    d->set_container_path("/dev/" + name);
    d->set_permissions("rw");
    return Status::Ok();
  };
  if (Status s = add_device("nvidiactl", true); !s.ok()) return s;
  if (Status s = add_device("nvidia-uvm", false); !s.ok()) return s;
  if (Status s = add_device("nvidia-uvm-tools", false); !s.ok()) return s;
  for (uint32_t index : a.gpus) {
    const TopologyGpu* g = topology.GpuByIndex(index);
    if (g == nullptr) return Status::Error("GPU " + std::to_string(index) + " is no longer on this node");
    if (Status s = add_device("nvidia" + std::to_string(DeviceMinor(*g, env.proc_root)), true); !s.ok()) return s;
  }
  return r;
}

}  // namespace gpuslice::k8s
