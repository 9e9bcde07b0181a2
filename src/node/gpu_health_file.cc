#include "node/gpu_health_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "port/replace_file.h"

namespace gpuslice::node {
namespace {
constexpr char kHeader[] = "gpuslice-gpu-health 1";
}  // namespace

Status StoreUnhealthyGpus(const std::string& state_dir, const std::vector<UnhealthyGpu>& gpus) {
  std::string text = std::string(kHeader) + "\n";
  for (const UnhealthyGpu& g : gpus) {
    text += g.uuid + " " + std::to_string(g.xid) + " " + std::to_string(g.since_unix_seconds) + "\n";
  }
  return port::ReplaceFile(state_dir + "/" + kGpuHealthFile, text, 0644);
}

StatusOr<std::vector<UnhealthyGpu>> LoadUnhealthyGpus(const std::string& state_dir) {
  const std::string path = state_dir + "/" + kGpuHealthFile;
  if (access(path.c_str(), F_OK) != 0 && errno == ENOENT) return std::vector<UnhealthyGpu>{};
  std::ifstream in(path);
  if (!in) return Status::Error("cannot read " + path + ": " + strerror(errno));
  std::string line;
  if (!std::getline(in, line) || line != kHeader) {
    return Status::Error(path + " is not a GPU health record (its first line is not \"" + kHeader +
                         "\"); remove it to start with every GPU healthy");
  }
  std::vector<UnhealthyGpu> gpus;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    UnhealthyGpu g;
    std::string extra;
    if (!(fields >> g.uuid >> g.xid >> g.since_unix_seconds) || (fields >> extra) || g.uuid.rfind("GPU-", 0) != 0) {
      return Status::Error(path + ": bad line \"" + line + "\" (want: GPU-UUID XID UNIX_SECONDS); fix or remove it");
    }
    gpus.push_back(std::move(g));
  }
  return gpus;
}

}  // namespace gpuslice::node
