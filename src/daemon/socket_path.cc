#include "daemon/socket_path.h"

#include <cstdlib>

#include "core/vgpu_store.h"

namespace gpuslice::daemon {

std::string DefaultSocketPath(const std::string& state_dir) {
  if (const char* env = getenv("GPUSLICE_SOCKET"); env != nullptr && *env != '\0') return env;
  return (state_dir.empty() ? core::VgpuStore::DefaultRoot() : state_dir) + "/" + kSocketFileName;
}

}  // namespace gpuslice::daemon
