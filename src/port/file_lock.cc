#include "port/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace gpuslice::port {
namespace {

// The pid /proc/locks names as holding a lock on `fd`'s file, or 0. Its
// lines read "1: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF",
// the device numbers in hex; a waiter's line has "->" after the number.
long HolderOf(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return 0;
  char file[64];
  snprintf(file, sizeof file, "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
           static_cast<unsigned long long>(st.st_ino));
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    std::istringstream fields(line);
    std::string number, kind, advisory, access, pid, where;
    if (!(fields >> number >> kind) || kind != "FLOCK") continue;  // "->": a waiter
    if (fields >> advisory >> access >> pid >> where && where == file) return std::atol(pid.c_str());
  }
  return 0;
}

}  // namespace

StatusOr<UniqueFd> LockFile(const std::string& path, LockMode mode, std::chrono::milliseconds wait) {
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid()) return Status::Error("cannot open lock " + path + ": " + strerror(errno));
  const int operation = (mode == LockMode::kExclusive ? LOCK_EX : LOCK_SH) | LOCK_NB;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::chrono::milliseconds pause{1};
  while (flock(fd.get(), operation) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) return Status::Error("cannot lock " + path + ": " + strerror(errno));
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      const long holder = HolderOf(fd.get());
      return Status::Error(path + " is still locked after " + std::to_string(wait.count()) + " ms" +
                           (holder > 0 ? " by pid " + std::to_string(holder) : std::string()) +
                           "; a stopped or hung gpuslice daemon or command holds it: check the daemon "
                           "(systemctl status gpuslice), or continue or end that process");
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds{50});
  }
  return fd;
}

}  // namespace gpuslice::port
