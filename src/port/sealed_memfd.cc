#include "port/sealed_memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuslice::port {

int RequiredSeals() { return F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL; }

StatusOr<int> CreateSealedMemfd(const char* name, const void* initial, size_t size) {
  const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Status::Error(std::string("memfd_create(") + name + "): " + strerror(errno));
  auto fail = [&](const char* step) {
    const Status s = Status::Error(std::string("cannot make sealed memory ") + name + ": " + step + ": " +
                                   strerror(errno));
    close(fd);
    return s;
  };
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) return fail("ftruncate");
  if (initial != nullptr) {
    const char* p = static_cast<const char*>(initial);
    size_t done = 0;
    while (done < size) {
      const ssize_t n = pwrite(fd, p + done, size - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fail("pwrite");
      done += static_cast<size_t>(n);
    }
  }
  // Sealed only once sized and filled: from here on its size is fixed.
  if (fcntl(fd, F_ADD_SEALS, RequiredSeals()) != 0) return fail("F_ADD_SEALS");
  return fd;
}

Status CheckSealed(int fd, size_t size, const std::string& what) {
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & RequiredSeals()) != RequiredSeals()) {
    return Status::Error(what + " is not sealed against resizing (seals " + std::to_string(seals) +
                         "); it could be truncated under its users, so it is not mapped");
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != size) {
    return Status::Error(what + " is " + std::to_string(st.st_size) + " bytes, not " + std::to_string(size) +
                         "; the daemon that made it has another layout version");
  }
  return Status::Ok();
}

}  // namespace gpuslice::port
