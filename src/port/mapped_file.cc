#include "port/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace gpuslice::port {

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(data_, size_);
}

StatusOr<MappedFile> MappedFile::Open(const std::string& path, size_t size, Access access) {
  const bool rw = access == Access::kReadWrite;
  const int fd = open(path.c_str(), (rw ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Status::Error(path + ": " + strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) < size) {
    close(fd);
    return Status::Error(path + ": not a regular file of at least " + std::to_string(size) + " bytes");
  }
  void* data = mmap(nullptr, size, rw ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);  // the mapping keeps the file; no descriptor stays open in the app
  if (data == MAP_FAILED) return Status::Error(path + ": mmap: " + strerror(err));
  MappedFile file;
  file.data_ = data;
  file.size_ = size;
  return file;
}

StatusOr<MappedFile> MappedFile::FromFd(int fd, size_t size, Access access, const std::string& what) {
  const bool rw = access == Access::kReadWrite;
  void* data = mmap(nullptr, size, rw ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return Status::Error(what + ": mmap: " + strerror(errno));
  MappedFile file;
  file.data_ = data;
  file.size_ = size;
  return file;
}

}  // namespace gpuslice::port
