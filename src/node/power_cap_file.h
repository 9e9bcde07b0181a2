// power_cap_file.h — a vGPU's power cap, kept in its directory as the file
// `power_cap` (absent: no power cap), with the user's own compute cap.
//
// With a power cap, the limits' compute_cap_pct is the *effective* cap the
// pacer enforces, min(user's cap, the daemon's power budget)
// (daemon/power_cap_controller.h), so the user's cap must be kept apart to
// survive the budget's changes and a daemon restart. Text, two lines:
//   power_cap_watts=<watts>
//   compute_cap_pct=<the user's cap, 0 = none>
// Written whole through a rename, so a reader never sees half a file.
//
// Called by VgpuManager under its lock. Makes syscalls; allocates.
#ifndef GPUSLICE_NODE_POWER_CAP_FILE_H_
#define GPUSLICE_NODE_POWER_CAP_FILE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"

namespace gpuslice::node {

struct PowerCapSetting {
  double watts = 0;            // > 0
  uint32_t user_cap_pct = 0;   // 0 = no compute cap of the user's
};

inline constexpr char kPowerCapFile[] = "power_cap";
// The largest cap accepted: far above any GPU's board power, so a typo of
// milliwatts for watts is caught.
inline constexpr double kMaxPowerCapWatts = 10'000;

// nullopt: no file (or one that cannot be parsed, logged: treated as no cap).
std::optional<PowerCapSetting> LoadPowerCap(const std::string& vgpu_dir);
Status StorePowerCap(const std::string& vgpu_dir, const PowerCapSetting& setting);
Status RemovePowerCap(const std::string& vgpu_dir);

// "" when `watts` is a usable cap, else the one-line reason and fix.
std::string PowerCapProblem(double watts);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_POWER_CAP_FILE_H_
