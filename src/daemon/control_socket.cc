#include "daemon/control_socket.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "port/fd_passing.h"

namespace gpuslice::daemon {

Status PrepareSocketPath(const std::string& path) {
  sockaddr_un addr;
  if (path.empty() || path[0] != '/') {
    return Status::Error("socket path '" + path + "' is not absolute; set socket.path to an absolute path");
  }
  if (path.size() >= sizeof addr.sun_path) {
    return Status::Error("socket path " + path + " is " + std::to_string(path.size()) + " bytes, longer than the " +
                         std::to_string(sizeof addr.sun_path - 1) +
                         " a unix socket allows; set socket.path (or GPUSLICE_SOCKET) to a shorter path");
  }
  const std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return Status::Error("cannot create " + dir + " for the control socket: " + ec.message() +
                           "; create it, or set socket.path elsewhere");
    }
  }
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return Status::Ok();
  if (!S_ISSOCK(st.st_mode)) {
    return Status::Error(path + " exists and is not a socket; remove it, or set socket.path elsewhere");
  }
  if (port::UnixSocketAnswers(path)) {
    return Status::Error("another gpuslice daemon is already serving on " + path +
                         "; stop it first (systemctl stop gpuslice), or give this one another socket.path and "
                         "state_dir");
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::Error("cannot remove the stale socket " + path + ": " + strerror(errno) + "; remove it by hand");
  }
  return Status::Ok();
}

Status RestrictSocket(const std::string& path, std::optional<gid_t> group) {
  if (group) {
    if (chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0) {
      return Status::Error("cannot give " + path + " to group " + std::to_string(*group) + ": " + strerror(errno) +
                           "; run the daemon as root or as a member of that group");
    }
    if (chmod(path.c_str(), 0660) != 0) return Status::Error("cannot chmod " + path + ": " + strerror(errno));
    return Status::Ok();
  }
  if (chmod(path.c_str(), 0600) != 0) return Status::Error("cannot chmod " + path + ": " + strerror(errno));
  return Status::Ok();
}

StatusOr<gid_t> LookupGroup(const std::string& name) {
  group entry;
  group* found = nullptr;
  char buf[16384];
  if (getgrnam_r(name.c_str(), &entry, buf, sizeof buf, &found) == 0 && found != nullptr) return found->gr_gid;
  bool numeric = !name.empty();
  for (char c : name) numeric = numeric && c >= '0' && c <= '9';
  if (numeric && name.size() < 10) return static_cast<gid_t>(std::stoul(name));
  return Status::Error("socket.group: no group '" + name + "' on this node; create it (groupadd " + name +
                       ") or set socket.group to an existing group");
}

}  // namespace gpuslice::daemon
