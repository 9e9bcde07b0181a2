#include "daemon/busy_split.h"

#include <algorithm>

namespace gpuslice::daemon {

std::map<std::string, double> SplitBusyTime(double busy_s, const std::map<std::string, double>& board_s,
                                            const std::map<std::string, double>& sampled_s) {
  busy_s = std::max(0.0, busy_s);
  double attributed = 0;
  for (const auto& [name, s] : board_s) attributed += std::max(0.0, s);
  std::map<std::string, double> out;
  if (attributed <= 0) {
    // The samples alone: who ran, scaled to how long the GPU was busy.
    double sampled = 0;
    for (const auto& [name, s] : sampled_s) sampled += std::max(0.0, s);
    if (sampled <= 0) return sampled_s;
    for (const auto& [name, s] : sampled_s) out[name] = std::max(0.0, s) * busy_s / sampled;
    return out;
  }
  const double scale = attributed > busy_s ? busy_s / attributed : 1.0;
  for (const auto& [name, s] : board_s) out[name] = std::max(0.0, s) * scale;
  const double left = busy_s - attributed * scale;
  if (left <= 0) return out;
  // What each one's samples claim beyond what the boards gave it.
  std::map<std::string, double> unexplained;
  double unexplained_total = 0;
  for (const auto& [name, s] : sampled_s) {
    const auto it = out.find(name);
    const double u = std::max(0.0, s - (it == out.end() ? 0.0 : it->second));
    if (u <= 0) continue;
    unexplained[name] = u;
    unexplained_total += u;
  }
  if (unexplained_total <= 0) {
    // Nothing unexplained: the boards saw everything that ran, and missed
    // some of its time (marks seen late). Spread it as they split the rest.
    for (auto& [name, s] : out) s += left * s / (attributed * scale);
    return out;
  }
  for (const auto& [name, u] : unexplained) out[name] += left * u / unexplained_total;
  return out;
}

}  // namespace gpuslice::daemon
