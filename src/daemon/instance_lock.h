// instance_lock.h — one daemon per state directory.
//
// Two daemons on one state directory would both collect garbage and write
// limits; the second refuses to start. The lock is a flock on
// <state>/.daemon.lock, which the kernel drops when its holder dies, so a
// `kill -9` never blocks the next start. The file holds the holder's pid,
// for the error message.
//
// Acquired and released on the daemon's main thread. Move-only.
#ifndef GPUSLICE_DAEMON_INSTANCE_LOCK_H_
#define GPUSLICE_DAEMON_INSTANCE_LOCK_H_

#include <string>

#include "core/status.h"

namespace gpuslice::daemon {

class InstanceLock {
 public:
  static StatusOr<InstanceLock> Acquire(const std::string& state_dir);
  InstanceLock(InstanceLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  InstanceLock& operator=(InstanceLock&&) = delete;
  ~InstanceLock();

 private:
  InstanceLock() = default;
  int fd_ = -1;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_INSTANCE_LOCK_H_
