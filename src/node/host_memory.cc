// MemAvailable (host_memory.h).
#include "node/host_memory.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace gpuslice::node {

std::optional<uint64_t> ParseMemAvailable(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::string key, unit;
    uint64_t value = 0;
    if (!(in >> key >> value) || key != "MemAvailable:") continue;
    in >> unit;
    if (unit == "kB") return value * 1024;
    if (unit.empty()) return value;
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<uint64_t> ReadMemAvailable(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseMemAvailable(ss.str());
}

std::string MeminfoPath() {
  const char* p = getenv("GPUSLICE_MEMINFO");
  return p != nullptr && *p != '\0' ? std::string(p) : std::string("/proc/meminfo");
}

}  // namespace gpuslice::node
