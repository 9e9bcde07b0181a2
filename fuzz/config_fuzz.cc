// Fuzzes the daemon's config parser (src/config/daemon_config.h) with
// arbitrary bytes as the YAML file. Invariants beyond "no crash, no hang, no
// uncaught exception": an accepted config passes validation; a rejected one
// gets one line, FILE:LINE-prefixed and of bounded length.
#include <string>
#include <string_view>

#include "config/daemon_config.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gpuslice::fuzz::FuzzCheckFailed;
  // Real configs are a few KB; long inputs only slow the search down.
  if (size > 16 * 1024) return 0;
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  const gpuslice::StatusOr<gpuslice::config::DaemonConfig> config =
      gpuslice::config::ParseDaemonConfig(yaml, "fuzz.yaml");
  if (config.ok()) {
    const gpuslice::Status valid = gpuslice::config::ValidateDaemonConfig(config.value(), "fuzz.yaml");
    if (!valid.ok()) FuzzCheckFailed("an accepted config fails validation", valid.message().c_str());
    return 0;
  }
  const std::string& message = config.status().message();
  if (message.rfind("fuzz.yaml", 0) != 0) FuzzCheckFailed("error does not start with the file name", message.c_str());
  if (message.find('\n') != std::string::npos) FuzzCheckFailed("error spans lines", message.c_str());
  if (message.size() > 1024) FuzzCheckFailed("error longer than 1 KiB", message.c_str());
  return 0;
}
