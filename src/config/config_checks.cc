#include "config/config_checks.h"

#include <string_view>

#include "config/listen_address.h"

namespace gpuslice::config {
namespace {

// Timeslices are written to the hardware per channel group; above 10 s a BE
// slice would starve everything else and an LC one could not be preempted
// for a human-noticeable time. Below 1 µs is not a slice.
constexpr uint64_t kMaxSliceUs = 10'000'000;

// Reaping faster than 10 ms burns CPU scanning /proc for nothing; slower than
// a minute leaves dead processes' memory charged for too long.
constexpr uint32_t kMinReapMs = 10;
constexpr uint32_t kMaxReapMs = 60'000;

// sun_path is 108 bytes including the terminating NUL.
constexpr size_t kMaxSocketPath = 107;

void CheckSlice(std::vector<ConfigProblem>& out, const std::string& key, uint64_t value) {
  if (value < 1 || value > kMaxSliceUs) {
    out.push_back(
        {{key}, std::to_string(value) + " is out of range; want 1.." + std::to_string(kMaxSliceUs) + " microseconds"});
  }
}

bool IsGroupName(std::string_view g) {
  for (char c : g) {
    const bool bad = c == '/' || c == ':' || c == ',' || static_cast<unsigned char>(c) <= ' ' || c == 0x7f;
    if (bad) return false;
  }
  return g.size() <= 32;
}

}  // namespace

bool IsLogLevel(const std::string& level) {
  return level == "trace" || level == "debug" || level == "info" || level == "warn" || level == "error" ||
         level == "critical" || level == "off";
}

std::vector<ConfigProblem> CheckDaemonConfig(const DaemonConfig& c) {
  std::vector<ConfigProblem> out;
  if (!c.state_dir.empty() && c.state_dir.front() != '/') {
    out.push_back({{"state_dir"}, Quote(c.state_dir) + " is not an absolute path; write it from /"});
  }
  if (c.socket.path.empty() || c.socket.path.front() != '/') {
    out.push_back({{"socket.path"},
                   Quote(c.socket.path) + " is not an absolute path; write it from /, e.g. "
                                          "/run/gpuslice/gpuslice.sock"});
  } else if (c.socket.path.size() > kMaxSocketPath) {
    out.push_back({{"socket.path"},
                   "is " + std::to_string(c.socket.path.size()) +
                       " bytes, longer than a unix socket path may be (107); use a shorter path"});
  }
  if (!IsGroupName(c.socket.group)) {
    out.push_back({{"socket.group"},
                   Quote(c.socket.group) + " is not a group name; use a name from /etc/group "
                                           "(no spaces, ':', ',' or '/'; at most 32 bytes), or leave it empty"});
  }
  if (auto addr = ParseListenAddress(c.metrics.address); !addr.ok()) {
    out.push_back({{"metrics.address"}, addr.status().message()});
  } else if (c.metrics.enabled && !c.metrics.allow_remote && !IsLoopbackHost(addr->host)) {
    out.push_back({{"metrics.address", "metrics.allow_remote"},
                   Quote(c.metrics.address) + " is not a loopback address; set metrics.allow_remote: true to "
                                              "serve other hosts, or use 127.0.0.1:PORT"});
  }
  if (c.defaults.memory_bytes && *c.defaults.memory_bytes == 0) {
    out.push_back({{"defaults.memory"},
                   "0 bytes would deny every allocation; give a size such as 4GiB, or "
                   "remove the key for the whole GPU"});
  }
  if (c.defaults.compute_pct < 1 || c.defaults.compute_pct > 100) {
    out.push_back(
        {{"defaults.compute"}, std::to_string(c.defaults.compute_pct) + " is out of range; want a percentage 1..100"});
  }
  const policy::TimeslicePolicyConfig& t = c.timeslices;
  CheckSlice(out, "timeslices.best_effort.period_us", t.be_period_us);
  CheckSlice(out, "timeslices.best_effort.min_slice_us", t.be_min_slice_us);
  CheckSlice(out, "timeslices.best_effort.slice_beside_lc_us", t.be_slice_beside_lc_us);
  CheckSlice(out, "timeslices.best_effort.period_with_lc_us", t.be_period_with_lc_us);
  CheckSlice(out, "timeslices.best_effort.min_slice_with_lc_us", t.be_min_slice_with_lc_us);
  CheckSlice(out, "timeslices.latency_critical.slice_us", t.lc_slice_us);
  CheckSlice(out, "timeslices.latency_critical.shared_slice_us", t.lc_shared_slice_us);
  if (t.be_min_slice_us > t.be_period_us) {
    out.push_back({{"timeslices.best_effort.min_slice_us", "timeslices.best_effort.period_us"},
                   std::to_string(t.be_min_slice_us) + " is longer than period_us (" + std::to_string(t.be_period_us) +
                       "); make min_slice_us at most period_us"});
  }
  if (t.be_min_slice_with_lc_us > t.be_period_with_lc_us) {
    out.push_back({{"timeslices.best_effort.min_slice_with_lc_us", "timeslices.best_effort.period_with_lc_us"},
                   std::to_string(t.be_min_slice_with_lc_us) + " is longer than period_with_lc_us (" +
                       std::to_string(t.be_period_with_lc_us) +
                       "); make min_slice_with_lc_us at most period_with_lc_us"});
  }
  if (c.reap_interval_ms < kMinReapMs || c.reap_interval_ms > kMaxReapMs) {
    out.push_back({{"reap_interval_ms"},
                   std::to_string(c.reap_interval_ms) + " is out of range; want " + std::to_string(kMinReapMs) + ".." +
                       std::to_string(kMaxReapMs)});
  }
  if (c.audit.over_cap_margin_pct < 1 || c.audit.over_cap_margin_pct > 99) {
    out.push_back({{"audit.over_cap_margin_pct"},
                   std::to_string(c.audit.over_cap_margin_pct) +
                       " is out of range; want 1..99 percent of a GPU (0 would act on an honest library's 29-31% "
                       "under a 30% cap, and a cap plus 100 is never reached; to stop the audit, set "
                       "audit.over_cap: off)"});
  }
  if (c.audit.over_cap_window_s < 1 || c.audit.over_cap_window_s > 60) {
    out.push_back({{"audit.over_cap_window_s"},
                   std::to_string(c.audit.over_cap_window_s) +
                       " is out of range; want 1..60 seconds (the audit keeps a minute of samples; under 30, an "
                       "honest job that queues seconds of work per synchronisation may read over its cap)"});
  }
  if (c.memory_pressure.wait_ms > 600'000) {
    out.push_back({{"memory_pressure.wait_ms"},
                   std::to_string(c.memory_pressure.wait_ms) +
                       " is over 600000 (10 minutes); an allocation must not wait longer"});
  }
  if (c.memory_pressure.max_overcommit_pct != 0 && c.memory_pressure.max_overcommit_pct < 100) {
    out.push_back(
        {{"memory_pressure.max_overcommit_pct"},
         std::to_string(c.memory_pressure.max_overcommit_pct) +
             " is under 100, which would refuse limits the GPU can hold; use 100 or more, or 0 for no check"});
  }
  if (c.memory_pressure.max_suspends_per_minute == 0) {
    out.push_back({{"memory_pressure.max_suspends_per_minute"},
                   "0 would never suspend; to turn memory overcommit off, set memory_pressure.wait_ms: 0"});
  }
  if (!IsLogLevel(c.log_level)) {
    out.push_back({{"log_level"}, Quote(c.log_level) + " is not a log level; want one of " + kLogLevels});
  }
  return out;
}

}  // namespace gpuslice::config
