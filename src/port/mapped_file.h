// mapped_file.h — a file mapped into memory, shared with other processes.
//
// Read-only mappings are opened O_RDONLY and mapped PROT_READ: the process can
// read what is there but has no descriptor or mapping through which to change
// it. Move-only; unmaps on destruction. Not thread-safe to move; the mapped
// bytes themselves are accessed with atomics by callers.
#ifndef GPUSLICE_PORT_MAPPED_FILE_H_
#define GPUSLICE_PORT_MAPPED_FILE_H_

#include <cstddef>
#include <string>

#include "core/status.h"

namespace gpuslice::port {

class MappedFile {
 public:
  enum class Access { kReadOnly, kReadWrite };

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // Maps exactly `size` bytes of an existing file; fails if it is shorter.
  static StatusOr<MappedFile> Open(const std::string& path, size_t size, Access access);

  // Maps exactly `size` bytes of an open descriptor (a sealed memfd handed
  // out by the daemon: port/sealed_memfd.h), which the caller still owns and
  // may close at once. `what` names it in errors.
  static StatusOr<MappedFile> FromFd(int fd, size_t size, Access access, const std::string& what);

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_MAPPED_FILE_H_
