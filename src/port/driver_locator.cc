#include "port/driver_locator.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>

namespace gpuslice::port {
namespace {

// Where NVIDIA's .run installer, distribution packages, the container toolkit
// and WSL put the user-space driver, most common first.
constexpr const char* kDirectories[] = {
    "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib",
    "/usr/lib/nvidia",           "/usr/lib",   "/usr/lib/wsl/lib",
};

bool SameFile(const std::string& path, const void* self) {
  if (self == nullptr) return false;
  Dl_info info;
  if (dladdr(self, &info) == 0 || info.dli_fname == nullptr) return false;
  struct stat a, b;
  if (stat(path.c_str(), &a) != 0 || stat(info.dli_fname, &b) != 0) return false;
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Locate(const char* env, const char* file, const void* self) {
  if (const char* p = getenv(env); p != nullptr && *p != '\0') {
    // An explicit choice is honoured or reported, never silently replaced.
    return IsFile(p) && !SameFile(p, self) ? std::string(p) : std::string();
  }
  for (const char* dir : kDirectories) {
    const std::string path = std::string(dir) + "/" + file;
    if (IsFile(path) && !SameFile(path, self)) return path;
  }
  return "";
}

}  // namespace

std::string LocateRealCudaDriver(const void* self) {
  return Locate("GPUSLICE_REAL_DRIVER", "libcuda.so.1", self);
}

std::string LocateRealNvml(const void* self) {
  return Locate("GPUSLICE_REAL_NVML", "libnvidia-ml.so.1", self);
}

}  // namespace gpuslice::port
