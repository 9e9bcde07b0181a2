#include "k8s/dra/cdi_spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "k8s/assignment.h"
#include "k8s/dra/names.h"
#include "k8s/gpu_sources.h"
#include "k8s/names.h"

namespace gpuslice::k8s::dra {

using nlohmann::json;

std::string CdiDeviceName(const std::string& claim_uid, uint32_t gpu_index) {
  return claim_uid + "-" + std::to_string(gpu_index);
}

std::string CdiDeviceId(const std::string& claim_uid, uint32_t gpu_index) {
  return std::string(kCdiKind) + "=" + CdiDeviceName(claim_uid, gpu_index);
}

std::string CdiSpecPath(const std::string& cdi_dir, const std::string& claim_uid) {
  // CDI's naming for transient specs: <vendor>-<class>_<name>.json.
  return cdi_dir + "/gpu.gpuslice.io-vgpu_" + claim_uid + ".json";
}

namespace {

json Mount(const std::string& host, const std::string& container, bool read_only) {
  return {{"hostPath", host},
          {"containerPath", container},
          {"type", "bind"},
          {"options", {read_only ? "ro" : "rw", "nosuid", "nodev", "rbind", "rprivate"}}};
}

}  // namespace

StatusOr<json> BuildCdiSpec(const ClaimAllocation& claim, const std::string& vgpu_name, const std::string& vgpu_dir,
                            const NodeTopology& topology, const ContainerEnvironment& env,
                            const std::string& preload_file) {
  // The device plugin's setup, computed for the same GPUs, is the one source
  // of what a container needs; only its LD_PRELOAD is replaced below.
  Assignment a;
  a.vgpu = vgpu_name;
  for (const AllocatedDevice& d : claim.devices) {
    a.gpus.push_back(d.gpu_index);
    a.uuids.push_back(d.gpu_uuid);
  }
  ContainerEnvironment preload_env = env;
  preload_env.inject = InjectMode::kPreload;
  auto setup = BuildContainerResponse(a, vgpu_dir, topology, preload_env);
  if (!setup.ok()) return setup.status();

  json common = {{"env", json::array()}, {"mounts", json::array()}, {"deviceNodes", json::array()}};
  for (const auto& [key, value] : setup->envs()) {
    if (key == "LD_PRELOAD") continue;
    common["env"].push_back(key + "=" + value);
  }
  common["env"].push_back("GPUSLICE_VGPU=" + vgpu_name);
  for (const auto& m : setup->mounts()) common["mounts"].push_back(Mount(m.host_path(), m.container_path(), m.read_only()));
  common["mounts"].push_back(Mount(preload_file, kContainerPreloadPath, /*read_only=*/true));

  json devices = json::array();
  std::vector<std::string> per_gpu_nodes;
  for (const AllocatedDevice& d : claim.devices) {
    const TopologyGpu* gpu = topology.GpuByIndex(d.gpu_index);
    const std::string node = "/dev/nvidia" + std::to_string(DeviceMinor(*gpu, env.proc_root));
    per_gpu_nodes.push_back(node);
    json nodes = json::array();
    for (const auto& dev : setup->devices()) {
      if (dev.container_path() == node) {
        nodes.push_back({{"path", dev.container_path()}, {"hostPath", dev.host_path()}, {"permissions", "rw"}});
      }
    }
    devices.push_back({{"name", CdiDeviceName(claim.uid, d.gpu_index)},
                       {"annotations", {{"gpu.gpuslice.io/uuid", d.gpu_uuid}}},
                       {"containerEdits", {{"deviceNodes", nodes}}}});
  }
  for (const auto& dev : setup->devices()) {
    if (std::find(per_gpu_nodes.begin(), per_gpu_nodes.end(), dev.container_path()) != per_gpu_nodes.end()) continue;
    common["deviceNodes"].push_back(
        {{"path", dev.container_path()}, {"hostPath", dev.host_path()}, {"permissions", "rw"}});
  }
  return json{{"cdiVersion", kCdiVersion},
              {"kind", kCdiKind},
              {"annotations", {{"gpu.gpuslice.io/claim", claim.namespace_name + "/" + claim.name}}},
              {"devices", devices},
              {"containerEdits", common}};
}

Status WriteJsonAtomically(const std::string& path, const json& spec, int mode) {
  const std::string tmp = path + ".tmp";
  const std::string text = spec.dump(2) + "\n";
  unlink(tmp.c_str());  // a leftover of a crash, perhaps read-only
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::Error("cannot write " + tmp + ": " + strerror(errno) + "; is the directory writable?");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = strerror(errno);
      close(fd);
      unlink(tmp.c_str());
      return Status::Error("cannot write " + tmp + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  // fsync before rename: a crash must leave the old file or the new one.
  if (fchmod(fd, static_cast<mode_t>(mode)) != 0 || fsync(fd) != 0) {
    const std::string why = strerror(errno);
    close(fd);
    unlink(tmp.c_str());
    return Status::Error("cannot write " + tmp + ": " + why);
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = strerror(errno);
    unlink(tmp.c_str());
    return Status::Error("cannot rename " + tmp + " to " + path + ": " + why);
  }
  return Status::Ok();
}

Status WritePreloadFile(const std::string& path) {
  const std::string line = std::string(kContainerLibraryDir) + "/libgpuslice-cuda.so\n";
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
  if (fd < 0) return Status::Error("cannot write " + tmp + ": " + strerror(errno));
  const bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = strerror(errno);
    unlink(tmp.c_str());
    return Status::Error("cannot write " + path + ": " + why);
  }
  return Status::Ok();
}

}  // namespace gpuslice::k8s::dra
