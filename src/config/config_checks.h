// config_checks.h — the range and cross-field rules of DaemonConfig, shared
// by the file parser (which adds the line), ApplyEnvironment (which names the
// variable) and ValidateDaemonConfig (which names the flag or file).
//
// Internal to src/config. Pure; thread-safe; allocates.
#ifndef GPUSLICE_CONFIG_CONFIG_CHECKS_H_
#define GPUSLICE_CONFIG_CONFIG_CHECKS_H_

#include <string>
#include <vector>

#include "config/daemon_config.h"
#include "config/quote.h"

namespace gpuslice::config {

struct ConfigProblem {
  // Dotted YAML paths: the key the message is about first, then keys whose
  // values the rule also read (their line is used when the first is unset).
  std::vector<std::string> keys;
  std::string message;  // "REASON; FIX"
};

// Every rule `config` breaks, in a fixed order. Empty when valid.
std::vector<ConfigProblem> CheckDaemonConfig(const DaemonConfig& config);

// The names log_level accepts (spdlog's), for messages.
bool IsLogLevel(const std::string& level);
inline constexpr char kLogLevels[] = "trace, debug, info, warn, error, critical, off";

}  // namespace gpuslice::config

#endif  // GPUSLICE_CONFIG_CONFIG_CHECKS_H_
