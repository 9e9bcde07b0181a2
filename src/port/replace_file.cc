#include "port/replace_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuslice::port {

Status ReplaceFile(const std::string& path, const std::string& contents, mode_t mode) {
  const std::string tmp = path + ".tmp";
  unlink(tmp.c_str());  // a crashed writer's, perhaps read-only
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::Error("cannot write " + tmp + ": " + strerror(errno));
  const bool written = write(fd, contents.data(), contents.size()) == static_cast<ssize_t>(contents.size());
  const int saved = errno;
  const bool closed = close(fd) == 0;
  if (!written || !closed || rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = !written ? saved : errno;
    unlink(tmp.c_str());
    return Status::Error("cannot write " + path + ": " + strerror(err));
  }
  return Status::Ok();
}

}  // namespace gpuslice::port
