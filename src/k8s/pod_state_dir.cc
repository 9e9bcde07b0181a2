#include "k8s/pod_state_dir.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/vgpu_store.h"

namespace gpuslice::k8s {

Status SecurePodStateDir(const std::string& state_dir) {
  struct stat st {};
  if (stat(state_dir.c_str(), &st) != 0) {
    return Status::Error("cannot read the state directory " + state_dir + ": " + strerror(errno));
  }
  // A group other than root's may enter (kubelet's hostPath is root's, 0755).
  if ((st.st_mode & 0070) != 0 && st.st_gid != 0) {
    const group* g = getgrgid(st.st_gid);
    return Status::Error("the state directory " + state_dir + " is open to group " +
                         (g != nullptr ? std::string(g->gr_name) : std::to_string(st.st_gid)) +
                         " (a node daemon with socket.group shares it?); pods' vGPU directories are open to every "
                         "uid, so that group's users could reach them: give the plugin a state directory of its own "
                         "(--state-dir), or the daemon no socket.group");
  }
  if ((st.st_mode & 0077) != 0 && chmod(state_dir.c_str(), 0700) != 0) {
    return Status::Error("cannot make the state directory " + state_dir + " owner-only: " + strerror(errno));
  }
  const std::string marker = state_dir + "/" + core::kPodsMarker;
  const int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd < 0 && errno != EEXIST) return Status::Error("cannot write " + marker + ": " + strerror(errno));
  if (fd >= 0) close(fd);
  return Status::Ok();
}

}  // namespace gpuslice::k8s
