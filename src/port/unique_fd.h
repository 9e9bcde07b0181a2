// unique_fd.h — a file descriptor closed when its owner goes.
//
// Move-only; not thread-safe to move. Allocates nothing.
#ifndef GPUSLICE_PORT_UNIQUE_FD_H_
#define GPUSLICE_PORT_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace gpuslice::port {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_UNIQUE_FD_H_
