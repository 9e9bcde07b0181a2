#include "cli/node_snapshot.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/vgpu_store.h"
#include "daemon/control_service.h"
#include "node/node_devices.h"
#include "node/policy_file.h"
#include "node/standalone_node.h"
#include "node/vgpu_manager.h"
#include "port/nvml_library.h"

namespace gpuslice::cli {
namespace {

// Whether this process is in the group of `path` (a daemon's state
// directory, opened to its socket.group).
bool InGroupOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  if (st.st_gid == getegid()) return true;
  std::vector<gid_t> groups(static_cast<size_t>(std::max(getgroups(0, nullptr), 0)));
  const int n = getgroups(static_cast<int>(groups.size()), groups.data());
  return n > 0 && std::find(groups.begin(), groups.begin() + n, st.st_gid) != groups.begin() + n;
}

StatusOr<NodeSnapshot> FromDaemon(daemon::DaemonClient& client, const std::string& name, bool with_vgpus) {
  NodeSnapshot snapshot;
  auto status = client.GetStatus();
  if (!status.ok()) return status.status();
  snapshot.daemon_pid = status->pid();
  auto devices = client.GetDevices();
  if (!devices.ok()) return devices.status();
  snapshot.devices = std::move(devices.value());
  if (with_vgpus) {
    control::v1::ListVgpusRequest request;
    request.set_name(name);
    auto list = client.ListVgpus(request);
    if (!list.ok()) return list.status();
    snapshot.vgpus.assign(list->vgpus().begin(), list->vgpus().end());
  }
  return snapshot;
}

StatusOr<NodeSnapshot> Standalone(const std::string& state_dir, const std::string& name, bool with_vgpus) {
  // The daemon's code logs through spdlog; here stdout is the command's
  // output (maybe JSON), so its warnings go to stderr.
  node::LogToStderrForCommand();
  NodeSnapshot snapshot;
  node::NodeDevices devices;
  auto nvml = port::NvmlLibrary::Open();
  auto discovered =
      nvml.ok() ? node::DiscoverNodeDevices(*nvml.value()) : StatusOr<node::NodeDevices>(nvml.status());
  if (discovered.ok()) {
    devices = std::move(discovered.value());
  } else if (!with_vgpus) {
    return discovered.status();  // `devices` is nothing without NVML
  }
  // Without NVML, vGPUs are still listed, their GPUs by UUID only.
  daemon::ToProto(devices, &snapshot.devices);
  if (!with_vgpus) return snapshot;
  // The manager without a schedule only reads: List adopts read-only.
  const core::VgpuStore store(state_dir.empty() ? core::VgpuStore::DefaultRoot() : state_dir);
  // A state directory this user may not read is not an empty one: say so,
  // rather than "no vGPUs" (a daemon's state directory is its owner's, and
  // its group's where socket.group names one).
  for (const std::string& dir : {store.root(), store.root() + "/vgpus"}) {
    if (DIR* d = opendir(dir.c_str())) {
      closedir(d);
    } else if (errno == EACCES) {
      // A member of the daemon's socket.group reaches the vGPUs only
      // through the daemon, which did not answer.
      if (InGroupOf(store.root())) {
        return Status::Error("cannot read " + dir + " (" + std::strerror(EACCES) +
                             "), and the daemon that serves it for its group did not answer; start it "
                             "(systemctl start gpuslice) or ask its operator, then try again");
      }
      return Status::Error("cannot read " + dir + " (" + std::strerror(EACCES) +
                           "): its vGPUs are another user's. Run this as the user that runs the daemon (or root), "
                           "or ask for membership of its socket.group, or point --state-dir at your own");
    }
  }
  node::ManagerOptions options;
  // Unreadable stored levels only cost the names (views say "lc+1").
  if (auto levels = node::LoadLevels(store.root()); levels.ok()) options.levels = levels.value();
  node::VgpuManager manager(store, &devices, nullptr, options);
  std::vector<node::VgpuView> views;
  if (node::ApiStatus s = manager.List(name, &views); !s.ok()) return Status::Error(s.message());
  for (const auto& v : views) daemon::ToProto(v, &snapshot.vgpus.emplace_back());
  return snapshot;
}

}  // namespace

StatusOr<NodeSnapshot> TakeNodeSnapshot(daemon::DaemonClient* client, const std::string& state_dir,
                                        const std::string& name, bool with_vgpus) {
  if (client != nullptr) return FromDaemon(*client, name, with_vgpus);
  return Standalone(state_dir, name, with_vgpus);
}

}  // namespace gpuslice::cli
