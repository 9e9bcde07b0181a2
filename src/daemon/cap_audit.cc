#include "daemon/cap_audit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace gpuslice::daemon {
namespace {

// Others' samples below this share of a pass still leave a vGPU alone: a
// process that only allocated, or a monitoring tool's context, is sampled
// at 0-1%.
constexpr double kOthersIdleShare = 0.01;
// A pass shorter than this says too little to fit a throttle's duty by.
constexpr double kMinFitSeconds = 0.2;

// The throttle of a vGPU on one GPU.
std::string ThrottleName(const std::string& vgpu, uint32_t gpu_index) { return vgpu + "@" + std::to_string(gpu_index); }

}  // namespace

std::string Describe(const OverCap& o) {
  std::string pids;
  for (uint32_t pid : o.pids) pids += (pids.empty() ? "" : ",") + std::to_string(pid);
  if (o.tampered) {
    return fmt::format(
        "vGPU '{}' process {} on GPU {} was running at the end of its throttle's stop window in {} periods in a row: "
        "another process continues it (SIGCONT); killed (audit.over_cap)",
        o.vgpu, pids, o.gpu_index, CapThrottle::kTamperPeriods);
  }
  std::string what = fmt::format(
      "vGPU '{}' used {:.1f}% of GPU {} while alone there, over its compute cap of {:.1f}% (processes {}): its library "
      "does not hold its cap",
      o.vgpu, o.used * 100, o.gpu_index, o.allowed * 100, pids.empty() ? "none seen" : pids);
  switch (o.action) {
    case CapAction::kReport:
      return what + "; reported (audit.over_cap)";
    case CapAction::kKill:
      return what + "; killed (audit.over_cap)";
    case CapAction::kThrottle:
      return what +
             fmt::format("; throttled from outside to run {:.0f}% of each period (audit.over_cap){}", o.duty * 100,
                         o.at_floor ? ", and still over: its work is queued deeper than a throttle's period" : "");
  }
  return what;
}

ComputeCapAudit::ComputeCapAudit(CapAuditConfig config, const audit::ProcessTable* table,
                                 audit::ProcessActions* actions, CapThrottle* throttle, IsMember is_member)
    : config_(config), table_(table), actions_(actions), throttle_(throttle), is_member_(std::move(is_member)) {}

void ComputeCapAudit::Forget(const Key& key) {
  auto it = tracks_.find(key);
  if (it == tracks_.end()) return;
  if (it->second.throttled && throttle_ != nullptr) throttle_->Clear(ThrottleName(key.first, key.second));
  tracks_.erase(it);
}

std::vector<OverCap> ComputeCapAudit::Pass(const std::vector<SampledPass>& passes,
                                           const std::vector<node::VgpuView>& views, uint64_t now_ns) {
  // Each capped vGPU's cap per GPU, as a fraction; and the vGPUs that claim
  // each (pid namespace, pid).
  std::map<Key, double> caps;
  std::map<std::pair<uint64_t, uint32_t>, std::vector<const node::VgpuView*>> claims;
  for (const node::VgpuView& v : views) {
    for (const node::VgpuDeviceView& d : v.devices) {
      if (d.gpu_index && d.effective_compute_cap_pct > 0 && d.effective_compute_cap_pct < 100) {
        caps[{v.name, *d.gpu_index}] = d.effective_compute_cap_pct / 100.0;
      }
    }
    for (const node::VgpuProcessView& p : v.processes) claims[{p.pid_namespace, p.pid}].push_back(&v);
  }
  // A vGPU no longer capped there (or gone) is no longer audited there.
  std::vector<Key> gone;
  for (const auto& [key, track] : tracks_) {
    if (caps.count(key) == 0) gone.push_back(key);
  }
  for (const Key& key : gone) Forget(key);

  std::vector<OverCap> out;
  // Processes that fight their throttle.
  if (throttle_ != nullptr) {
    for (uint32_t pid : throttle_->TakeTampered()) {
      for (auto& [key, track] : tracks_) {
        if (!track.throttled || std::find(track.pids.begin(), track.pids.end(), pid) == track.pids.end()) continue;
        const std::string& vgpu = key.first;  // a structured binding: not capturable before C++20's clang 16
        const auto view = std::find_if(views.begin(), views.end(), [&](const auto& v) { return v.name == vgpu; });
        if (view == views.end() || !is_member_(pid, *view)) continue;
        actions_->Kill(pid);
        OverCap o;
        o.vgpu = key.first;
        o.gpu_index = key.second;
        o.allowed = caps[key];
        o.action = CapAction::kThrottle;
        o.found = o.tampered = true;
        o.duty = track.duty;
        o.pids = {pid};
        out.push_back(o);
      }
    }
  }
  for (const SampledPass& pass : passes) {
    if (pass.end_us <= pass.start_us) continue;
    const double wall = static_cast<double>(pass.end_us - pass.start_us) / 1e6;
    // Whose each sampled process is: a capped vGPU's (claimed, and mapping
    // its ledger), or anyone else's.
    std::map<std::string, double> used;                    // capped vGPU -> GPU-seconds
    std::map<std::string, std::vector<uint32_t>> pids_of;  // capped vGPU -> its pids sampled here
    double everyone = 0;
    for (const auto& [pid, seconds] : pass.pid_seconds) {
      everyone += seconds;
      const auto id = table_->InNamespace(pid);
      const auto it = id ? claims.find({id->pid_namespace, id->pid}) : claims.end();
      if (it == claims.end()) continue;
      for (const node::VgpuView* v : it->second) {
        if (caps.count({v->name, pass.gpu_index}) == 0 || !is_member_(pid, *v)) continue;
        used[v->name] += seconds;
        pids_of[v->name].push_back(pid);
        break;
      }
    }
    // A capped vGPU with processes whose samples are absent used nothing: in
    // a pass where nobody else ran either, that is alone time at 0. Its
    // idle time belongs in its window: an honest job that queues seconds of
    // work, then waits for its cap's tokens, uses its cap on average, but
    // the whole GPU in each burst.
    if (everyone <= kOthersIdleShare * wall) {
      for (const node::VgpuView& v : views) {
        if (!v.processes.empty() && caps.count({v.name, pass.gpu_index}) != 0) used.try_emplace(v.name, 0.0);
      }
    }
    for (const auto& [name, seconds] : used) {
      const Key key{name, pass.gpu_index};
      Track& track = tracks_[key];
      // A process stopped through a whole pass may have no sample in it: it
      // stays in the throttle until it no longer maps the ledger (below).
      for (uint32_t pid : pids_of[name]) {
        if (std::find(track.pids.begin(), track.pids.end(), pid) == track.pids.end()) track.pids.push_back(pid);
      }
      const double allowed = caps[key];
      const bool alone = everyone - seconds <= kOthersIdleShare * wall;
      if (alone) track.alone.push_back({now_ns, wall, seconds, allowed * wall});
      // Only the newest window of alone time, none older than max_age.
      while (!track.alone.empty() && now_ns - track.alone.front().end_ns > config_.max_age_ns) track.alone.pop_front();
      double wall_sum = 0;
      for (const Span& s : track.alone) wall_sum += s.wall_s;
      const double window_s = static_cast<double>(config_.window_ns) / 1e9;
      while (track.alone.size() > 1 && wall_sum - track.alone.front().wall_s >= window_s) {
        wall_sum -= track.alone.front().wall_s;
        track.alone.pop_front();
      }
      double used_sum = 0;
      double allowed_sum = 0;
      for (const Span& s : track.alone) {
        used_sum += s.used_s;
        allowed_sum += s.allowed_s;
      }
      const bool measured = wall_sum >= window_s;
      // Before a whole window is measured, use beyond what the whole window
      // allows is a verdict already: idle time to come cannot bring the
      // window's average back under cap + margin. An escape at the whole GPU
      // is found after (cap + margin) of a window, not a window; an honest
      // job, whose use over any stretch is its cap plus at most the queue it
      // ran ahead, passes this as it passes the whole window.
      const double allowance = allowed_sum + allowed * std::max(0.0, window_s - wall_sum) + config_.margin * window_s;
      const bool spent = !measured && used_sum > allowance;
      const double used_share = wall_sum > 0 ? used_sum / wall_sum : 0;
      const double allowed_share = wall_sum > 0 ? allowed_sum / wall_sum : allowed;
      const bool over = (measured && used_share > allowed_share + config_.margin) || spent;

      OverCap o;
      o.vgpu = name;
      o.gpu_index = pass.gpu_index;
      o.used = used_share;
      o.allowed = allowed_share;
      o.action = config_.action;
      o.pids = track.pids;
      switch (config_.action) {
        case CapAction::kReport:
          if (over) {
            o.found = !track.over;
            track.over = true;
            out.push_back(o);
          } else if (measured && used_share <= allowed_share + config_.margin / 2) {
            track.over = false;
          }
          break;
        case CapAction::kKill:
          if (over && !pids_of[name].empty()) {
            o.pids = pids_of[name];  // seen mapping its ledger in this pass
            for (uint32_t pid : o.pids) actions_->Kill(pid);
            o.found = true;
            out.push_back(o);
            track.alone.clear();  // its next verdict is on what runs after
          }
          break;
        case CapAction::kThrottle: {
          if (!track.throttled && !over) break;
          if (!track.throttled) {
            // Its use while free, over the window: the first duty that
            // brings it to the cap.
            track.duty = std::clamp(allowed_share / std::max(used_share, 1e-3), config_.min_duty, 1.0);
            track.throttled = true;
            o.found = true;
          } else if (alone && wall >= kMinFitSeconds) {
            // Fitted on this pass alone (it ran at the last duty): halfway,
            // in ratio, towards the duty that would have met the cap.
            const double ratio = std::clamp(allowed / std::max(seconds / wall, 1e-3), 0.25, 4.0);
            track.duty = std::clamp(track.duty * std::sqrt(ratio), config_.min_duty, 1.0);
          }
          track.at_floor = over && track.duty <= config_.min_duty;
          if (throttle_ != nullptr) {
            throttle_->Set(ThrottleName(name, pass.gpu_index), {track.pids, track.duty});
          }
          o.duty = track.duty;
          o.at_floor = track.at_floor;
          out.push_back(o);
          break;
        }
      }
    }
  }
  // A throttled process that has ended, or whose pid is now another
  // process's (it no longer maps the ledger), is signalled no more.
  std::map<std::string, const node::VgpuView*> by_name;
  for (const node::VgpuView& v : views) by_name[v.name] = &v;
  for (auto& [key, track] : tracks_) {
    const node::VgpuView* view = by_name[key.first];
    const size_t before = track.pids.size();
    std::erase_if(track.pids, [&](uint32_t pid) { return view == nullptr || !is_member_(pid, *view); });
    if (track.throttled && throttle_ != nullptr && track.pids.size() != before) {
      throttle_->Set(ThrottleName(key.first, key.second), {track.pids, track.duty});
    }
  }
  return out;
}

}  // namespace gpuslice::daemon
