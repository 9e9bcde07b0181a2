#include "daemon/instance_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace gpuslice::daemon {

StatusOr<InstanceLock> InstanceLock::Acquire(const std::string& state_dir) {
  const std::string path = state_dir + "/.daemon.lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::Error("cannot open " + path + ": " + strerror(errno) +
                         "; make the state directory writable for the daemon's user");
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    const std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown";
    return Status::Error("another gpuslice daemon (pid " + holder.substr(0, holder.find('\n')) + ") manages " +
                         state_dir + "; stop it first, or give this one another state_dir");
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // Only the error message uses the pid; the lock itself is what counts.
  }
  InstanceLock lock;
  lock.fd_ = fd;
  return lock;
}

InstanceLock::~InstanceLock() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace gpuslice::daemon
