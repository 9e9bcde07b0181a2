#include "node/flag_values.h"

#include "core/byte_size.h"

#include <cstdlib>

#include "node/power_cap_file.h"

namespace gpuslice::node {

StatusOr<uint32_t> ParsePercentFlag(const std::string& flag, const std::string& text) {
  uint32_t value = 0;
  bool ok = !text.empty() && text.size() <= 3;
  for (char c : text) {
    if (c < '0' || c > '9')
      ok = false;
    else
      value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (!ok || value < 1 || value > 100) {
    return Status::Error(flag + ": '" + text + "' is not a whole percentage from 1 to 100; write e.g. " + flag + " 30");
  }
  return value;
}

StatusOr<uint32_t> ParseLevelFlag(const std::string& flag, const std::string& text,
                                  const task::LevelTable& levels) {
  // The long spellings `run` and `set` have always taken.
  if (text == "best_effort") return core::LevelWord(core::Priority::kBestEffort, 0);
  if (text == "latency_critical") return core::LevelWord(core::Priority::kLatencyCritical, 0);
  if (auto i = levels.Find(text)) return levels.levels()[*i].word;
  return Status::Error(flag + ": '" + text + "' is not a priority level; write " + flag +
                       " and one of: " + levels.Names() + " (lc: latency-critical, be: best-effort; the node's "
                       "levels come from the daemon config's `levels:`, docs/configuration.md)");
}

StatusOr<double> ParsePowerFlag(const std::string& flag, const std::string& text, bool allow_none) {
  if (allow_none && (text == "none" || text == "0")) return 0.0;
  std::string number = text;
  if (!number.empty() && (number.back() == 'W' || number.back() == 'w')) number.pop_back();
  char* end = nullptr;
  const double watts = number.empty() ? 0 : strtod(number.c_str(), &end);
  if (number.empty() || end == nullptr || *end != '\0') {
    return Status::Error(flag + ": '" + text + "' is not a number of watts; write e.g. " + flag + " 150" +
                         (allow_none ? " (or " + flag + " none to remove the cap)" : ""));
  }
  if (std::string why = PowerCapProblem(watts); !why.empty()) return Status::Error(flag + ": " + why);
  return watts;
}

StatusOr<uint64_t> ParseMemoryFlag(const std::string& flag, const std::string& text) {
  if (text == "unlimited") return core::kUnlimited;
  auto bytes = core::ParseByteSize(text);
  if (!bytes.ok()) return Status::Error(flag + ": " + bytes.status().message());
  if (std::string why = MemoryLimitProblem(bytes.value()); !why.empty()) {
    return Status::Error(flag + ": " + why + ", for example 4GiB");
  }
  return bytes.value();
}

std::string MemoryLimitProblem(uint64_t bytes) {
  if (bytes == core::kUnlimited || bytes >= kMinMemoryLimitBytes) return "";
  return "a memory limit of " + std::to_string(bytes) + " bytes is too small to run anything; give at least 1 MiB";
}

}  // namespace gpuslice::node
