#include "k8s/cdi.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "k8s/names.h"

namespace gpuslice::k8s {

using nlohmann::json;

namespace {

json Mount(const std::string& host, const std::string& container, bool read_only) {
  return {{"hostPath", host},
          {"containerPath", container},
          {"type", "bind"},
          {"options", {read_only ? "ro" : "rw", "nosuid", "nodev", "rbind", "rprivate"}}};
}

}  // namespace

std::string CdiSpecPath(const std::string& cdi_dir, const std::string& name) {
  return cdi_dir + "/gpu.gpuslice.io-vgpu_" + name + ".json";
}

std::string CdiDeviceId(const std::string& device_name) { return std::string(kCdiKind) + "=" + device_name; }

json CdiEdits(const v1beta1::ContainerAllocateResponse& setup, const std::string& vgpu_name,
              const std::string& preload_file) {
  json edits = {{"env", json::array()}, {"mounts", json::array()}, {"deviceNodes", json::array()}};
  for (const auto& [key, value] : setup.envs()) {
    if (key == "LD_PRELOAD") continue;
    edits["env"].push_back(key + "=" + value);
  }
  edits["env"].push_back("GPUSLICE_VGPU=" + vgpu_name);
  for (const auto& m : setup.mounts())
    edits["mounts"].push_back(Mount(m.host_path(), m.container_path(), m.read_only()));
  edits["mounts"].push_back(Mount(preload_file, kContainerPreloadPath, /*read_only=*/true));
  for (const auto& dev : setup.devices()) {
    edits["deviceNodes"].push_back(
        {{"path", dev.container_path()}, {"hostPath", dev.host_path()}, {"permissions", "rw"}});
  }
  return edits;
}

StatusOr<json> ContainerCdiSpec(const Assignment& a, const std::string& vgpu_dir, const NodeTopology& topology,
                                const ContainerEnvironment& env, const std::string& preload_file) {
  if (env.inject != InjectMode::kPreload) return Status::Error("CDI specs are written in preload mode only");
  auto setup = BuildContainerResponse(a, vgpu_dir, topology, env);
  if (!setup.ok()) return setup.status();
  return json{
      {"cdiVersion", kCdiVersion},
      {"kind", kCdiKind},
      {"annotations",
       {{"gpu.gpuslice.io/pod", a.namespace_name + "/" + a.pod}, {"gpu.gpuslice.io/container", a.container}}},
      {"devices", json::array({{{"name", a.vgpu}, {"containerEdits", CdiEdits(*setup, a.vgpu, preload_file)}}})}};
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

}  // namespace gpuslice::k8s
