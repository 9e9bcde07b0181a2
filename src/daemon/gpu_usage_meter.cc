#include "daemon/gpu_usage_meter.h"

#include <algorithm>

namespace gpuslice::daemon {

void GpuUsageMeter::Add(const Interval& in) {
  port::MutexLock lock(&mu_);
  if (in.end_us <= in.start_us) return;
  const double seconds = static_cast<double>(in.end_us - in.start_us) / 1e6;
  double busy = 0;
  totals_.seconds[in.gpu_index] += seconds;
  for (const auto& [vgpu, s] : in.gpu_seconds) {
    totals_.gpu_seconds[{in.gpu_index, vgpu}] += s;
    busy += s;
  }
  recent_.push_back({in.gpu_index, in.end_us, seconds, in.gpu_seconds, {}});
  Record& record = recent_.back();
  while (!recent_.empty() && recent_.front().end_us + kHistoryUs < in.end_us) recent_.pop_front();
  Gpu& g = gpus_[in.gpu_index];
  std::optional<double> joules;
  if (in.energy_mj) {
    // The counter starts at the driver's load; a first reading, or one that
    // went back (the driver was reloaded), only sets the baseline.
    if (g.last_energy_mj && *in.energy_mj >= *g.last_energy_mj) {
      joules = static_cast<double>(*in.energy_mj - *g.last_energy_mj) / 1e3;
    }
    g.last_energy_mj = in.energy_mj;
  } else if (in.power_mw) {
    joules = static_cast<double>(*in.power_mw) / 1e3 * seconds;
  }
  if (!joules) return;
  const double watts = *joules / seconds;
  g.lowest_watts = std::min(g.lowest_watts.value_or(watts), watts);
  if (busy == 0) g.idle_watts = std::min(g.idle_watts.value_or(watts), watts);
  g.fit_points.emplace_back(std::min(1.0, busy / seconds), watts);
  if (g.fit_points.size() > kFitPoints) g.fit_points.pop_front();
  const double idle_watts = IdleWatts(g);
  const double idle = busy == 0 ? *joules : std::min(*joules, idle_watts * std::max(0.0, seconds - busy));
  const double active = *joules - idle;
  for (const auto& [vgpu, s] : in.gpu_seconds) {
    if (busy > 0) {
      totals_.joules[{in.gpu_index, vgpu}] += active * (s / busy);
      record.joules[vgpu] = active * (s / busy);
    }
  }
  totals_.idle_joules[in.gpu_index] += idle;
  totals_.device_joules[in.gpu_index] += *joules;
  totals_.idle_watts[in.gpu_index] = idle_watts;
  totals_.energy_seconds[in.gpu_index] += seconds;
}

double GpuUsageMeter::IdleWatts(const Gpu& g) {
  if (g.idle_watts) return *g.idle_watts;
  const double lowest = g.lowest_watts.value_or(0.0);
  double lo = 1, hi = 0, sx = 0, sy = 0;
  for (const auto& [x, y] : g.fit_points) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sx += x;
    sy += y;
  }
  if (hi - lo < kFitSpread) return lowest;
  const double n = static_cast<double>(g.fit_points.size());
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0;
  for (const auto& [x, y] : g.fit_points) {
    sxx += (x - mx) * (x - mx);
    sxy += (x - mx) * (y - my);
  }
  const double intercept = my - (sxy / sxx) * mx;
  // Power grows with GPU time; a fit that says otherwise, or reads below
  // zero, is noise: keep the upper bound.
  if (sxy <= 0 || intercept < 0) return lowest;
  return std::min(intercept, lowest);
}

GpuUsageMeter::Totals GpuUsageMeter::totals() const {
  port::MutexLock lock(&mu_);
  return totals_;
}

GpuUsageMeter::Window GpuUsageMeter::Recent(uint64_t window_us) const {
  port::MutexLock lock(&mu_);
  std::map<uint32_t, uint64_t> newest;
  for (const Record& r : recent_) newest[r.gpu_index] = std::max(newest[r.gpu_index], r.end_us);
  Window w;
  for (const Record& r : recent_) {
    if (r.end_us + window_us <= newest[r.gpu_index]) continue;
    w.seconds[r.gpu_index] += r.seconds;
    for (const auto& [vgpu, s] : r.gpu_seconds) w.gpu_seconds[{r.gpu_index, vgpu}] += s;
    for (const auto& [vgpu, j] : r.joules) w.joules[{r.gpu_index, vgpu}] += j;
  }
  return w;
}

}  // namespace gpuslice::daemon
