#include "node/power_cap_file.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "port/replace_file.h"

namespace gpuslice::node {

std::optional<PowerCapSetting> LoadPowerCap(const std::string& vgpu_dir) {
  std::ifstream in(vgpu_dir + "/" + kPowerCapFile);
  if (!in) return std::nullopt;
  PowerCapSetting s;
  bool have_watts = false;
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    char* end = nullptr;
    if (key == "power_cap_watts") {
      s.watts = strtod(value.c_str(), &end);
      have_watts = end != value.c_str() && PowerCapProblem(s.watts).empty();
    } else if (key == "compute_cap_pct") {
      s.user_cap_pct = static_cast<uint32_t>(strtoul(value.c_str(), &end, 10));
      if (s.user_cap_pct > 100) s.user_cap_pct = 0;
    }
  }
  if (!have_watts) {
    spdlog::warn("{}/{} names no valid power_cap_watts; the vGPU is treated as having no power cap (set it again "
                 "with `gpuslice set NAME --power-cap WATTS`)", vgpu_dir, kPowerCapFile);
    return std::nullopt;
  }
  return s;
}

Status StorePowerCap(const std::string& vgpu_dir, const PowerCapSetting& setting) {
  std::ostringstream text;
  text << "power_cap_watts=" << setting.watts << "\ncompute_cap_pct=" << setting.user_cap_pct << "\n";
  Status s = port::ReplaceFile(vgpu_dir + "/" + kPowerCapFile, text.str(), 0644);
  if (!s.ok()) return Status::Error(s.message() + "; check the state directory's permissions");
  return s;
}

Status RemovePowerCap(const std::string& vgpu_dir) {
  const std::string path = vgpu_dir + "/" + kPowerCapFile;
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::Error("cannot remove " + path + ": " + strerror(errno) + "; check the state directory's permissions");
  }
  return Status::Ok();
}

std::string PowerCapProblem(double watts) {
  if (!std::isfinite(watts) || watts <= 0) {
    return "a power cap must be a positive number of watts, e.g. 150 (0 in `set` removes the cap)";
  }
  if (watts > kMaxPowerCapWatts) {
    return "a power cap of " + std::to_string(static_cast<long long>(watts)) + " W is above any GPU's power; give "
           "watts, not milliwatts, e.g. 150";
  }
  return "";
}

}  // namespace gpuslice::node
