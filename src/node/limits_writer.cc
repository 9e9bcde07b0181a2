#include "node/limits_writer.h"

#include <sys/stat.h>

#include "core/vgpu_layout.h"

namespace gpuslice::node {

StatusOr<port::MappedFile> OpenLimitsForWrite(const std::string& vgpu_dir) {
  const std::string path = vgpu_dir + "/limits";
  auto file = port::MappedFile::Open(path, sizeof(core::Limits), port::MappedFile::Access::kReadWrite);
  if (file.ok()) return file;
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || chmod(path.c_str(), (st.st_mode & 07777) | S_IWUSR) != 0) {
    return Status::Error("cannot write " + path + " (" + file.status().message() +
                         "); run gpuslice as the user who owns the state directory");
  }
  file = port::MappedFile::Open(path, sizeof(core::Limits), port::MappedFile::Access::kReadWrite);
  chmod(path.c_str(), st.st_mode & 07777);
  if (!file.ok()) {
    return Status::Error("cannot write " + path + " (" + file.status().message() +
                         "); run gpuslice as the user who owns the state directory");
  }
  return file;
}

}  // namespace gpuslice::node
