#include "k8s/library_install.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace gpuslice::k8s {

namespace fs = std::filesystem;

const std::vector<std::string>& InstalledLibraryFiles() {
  static const std::vector<std::string> files = {"libgpuslice-cuda.so", "shim/libcuda.so.1"};
  return files;
}

Status InstallLibrary(const std::string& from_dir, const std::string& to_dir) {
  for (const std::string& file : InstalledLibraryFiles()) {
    const fs::path from = fs::path(from_dir) / file;
    const fs::path to = fs::path(to_dir) / file;
    const fs::path staged = to.string() + ".new." + std::to_string(getpid());
    std::error_code ec;
    if (!fs::is_regular_file(from, ec)) {
      return Status::Error(from.string() + " is missing: pass --from the directory holding the image's library");
    }
    fs::create_directories(to.parent_path(), ec);
    if (ec) return Status::Error("cannot create " + to.parent_path().string() + ": " + ec.message());
    fs::copy_file(from, staged, fs::copy_options::overwrite_existing, ec);
    if (!ec) {
      fs::permissions(staged,
                      fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                          fs::perms::others_exec,
                      ec);
    }
    if (!ec) fs::rename(staged, to, ec);
    if (ec) {
      std::error_code ignored;
      fs::remove(staged, ignored);
      return Status::Error("cannot install " + to.string() + ": " + ec.message() +
                           " (is --to on a writable hostPath volume?)");
    }
  }
  return Status::Ok();
}

}  // namespace gpuslice::k8s
