// `gpuslice top`: a live view per GPU and vGPU, redrawn every interval:
// GPU health, memory used/limit, compute share target and measured (GPU
// time over the daemon's last few seconds), attributed watts, priority, the
// timeslice in force, processes, denials, LC request latency p99, and the
// task API's levels (tasks, p50/p99, SLO misses, failures). --once /
// --iterations N print that many frames and exit (for scripts and captures);
// --json prints one JSON object per frame and line.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "cli/cli_output.h"
#include "cli/commands.h"
#include "cli/node_snapshot.h"
#include "core/byte_size.h"
#include "core/lc_latency.h"
#include "daemon/socket_path.h"

namespace gpuslice::cli {
namespace {

namespace pb = control::v1;

struct TopOptions {
  bool once = false;
  int iterations = 0;  // 0: until interrupted
  int interval_ms = 1000;
  bool json = false;
  std::string state_dir;
  std::string socket;
};

std::string Clock() {
  const time_t now = time(nullptr);
  tm local{};
  localtime_r(&now, &local);
  char buf[32];
  strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

std::string Percent(uint64_t part, uint64_t whole) {
  if (whole == 0) return "";
  return " (" + std::to_string(part * 100 / whole) + "%)";
}

bool OnGpu(const pb::Vgpu& v, uint32_t gpu_index) {
  for (const auto& d : v.devices()) {
    if (d.has_gpu_index() && d.gpu_index() == gpu_index) return true;
  }
  return false;
}

// The task API's levels of the GPU's vGPUs (docs/task-api.md): one row per
// vGPU and level; nothing when no vGPU there ran a task.
std::string TaskLevelTable(const NodeSnapshot& s, uint32_t gpu_index) {
  std::vector<std::vector<std::string>> rows = {
      {"  VGPU", "TASK LEVEL", "TASKS", "P50", "P99", "SLO MISSES", "FAILED"}};
  for (const auto& v : s.vgpus) {
    if (!OnGpu(v, gpu_index)) continue;
    for (const auto& t : v.task_levels()) {
      const pb::LcLatency& l = t.latency();
      rows.push_back({"  " + v.name(), t.level(), std::to_string(l.requests()),
                      LatencyText(l.has_p50_seconds(), l.p50_seconds()),
                      LatencyText(l.has_p99_seconds(), l.p99_seconds()), std::to_string(t.slo_misses()),
                      std::to_string(t.failed())});
    }
  }
  return rows.size() == 1 ? "" : "\n" + FormatColumns(rows);
}

std::string Frame(const NodeSnapshot& s) {
  std::string out = "gpuslice top  node " + s.devices.node() + "  " +
                    (s.daemon_pid != 0 ? "daemon pid " + std::to_string(s.daemon_pid)
                                       : std::string("no daemon: read from the state directory, nothing measured")) +
                    "  " + Clock() + "\n";
  for (const auto& gpu : s.devices.gpus()) {
    uint64_t used = 0;
    std::vector<std::vector<std::string>> rows = {
        {"  VGPU", "PRIO", "MEMORY USED / LIMIT", "SHARE", "MEASURED", "WATTS", "SLICE", "PROCS", "DENIED", "LC P99"}};
    for (const auto& v : s.vgpus) {
      for (const auto& d : v.devices()) {
        if (!d.has_gpu_index() || d.gpu_index() != gpu.index()) continue;
        used += d.memory_used_bytes();
        const uint64_t limit = d.memory_unlimited() ? gpu.memory_total_bytes() : d.memory_limit_bytes();
        const std::string share = ComputeText(v, d);
        rows.push_back(
            {"  " + v.name() + SuspendSuffix(v), PriorityText(v),
             core::FormatByteSize(d.memory_used_bytes()) + " / " + LimitText(d) + Percent(d.memory_used_bytes(), limit),
             share, MeasuredText(d), WattsText(d.watts(), d.has_watts()),
             SliceText(d), std::to_string(v.processes_size()),
             std::to_string(v.denied_allocations()),
             LatencyText(v.lc_latency().has_p99_seconds(), v.lc_latency().p99_seconds())});
      }
    }
    out += "\nGPU " + std::to_string(gpu.index()) + "  " + gpu.name() + "  " + HealthText(gpu) + "  " +
           core::FormatByteSize(gpu.memory_total_bytes()) + ", vGPUs hold " + core::FormatByteSize(used) +
           Percent(used, gpu.memory_total_bytes()) + "\n";
    if (rows.size() == 1)
      out += "  no vGPUs\n";
    else
      out += FormatColumns(rows);
    out += TaskLevelTable(s, gpu.index());
  }
  return out;
}

// Without a daemon, each frame reads the ledgers afresh with no recent
// baseline, so its LC and task quantiles would be over each vGPU's lifetime:
// a stale p99 in a live view. Top keeps the previous frame's bucket counts
// instead and narrows the quantiles to the requests since, as the daemon
// does with its own samples.
class FrameToFrameLcWindow {
 public:
  void Apply(std::vector<pb::Vgpu>* vgpus) {
    const auto now = std::chrono::steady_clock::now();
    const double window = std::chrono::duration<double>(now - previous_at_).count();
    std::map<std::string, core::LcLatencySnapshot> seen;
    for (pb::Vgpu& v : *vgpus) {
      Narrow(v.name(), window, v.mutable_lc_latency(), &seen);
      // A level's key cannot be a vGPU's: names have no '/'.
      for (pb::TaskLevel& t : *v.mutable_task_levels())
        Narrow(v.name() + "/" + t.level(), window, t.mutable_latency(), &seen);
    }
    previous_ = std::move(seen);
    previous_at_ = now;
  }
  void Forget() { previous_.clear(); }

 private:
  void Narrow(const std::string& key, double window, pb::LcLatency* lc,
              std::map<std::string, core::LcLatencySnapshot>* seen) const {
    if (lc->bucket_counts_size() != static_cast<int>(core::kLcLatencyBuckets)) return;  // another version
    core::LcLatencySnapshot s;
    for (uint32_t i = 0; i < core::kLcLatencyBuckets; ++i) {
      s.buckets[i] = lc->bucket_counts(static_cast<int>(i));
      s.count += s.buckets[i];
    }
    s.sum_ns = static_cast<uint64_t>(std::llround(lc->sum_seconds() * 1e9));
    (*seen)[key] = s;
    auto before = previous_.find(key);
    if (before == previous_.end()) return;
    const core::LcLatencySnapshot recent = core::LcLatencyDelta(s, before->second);
    if (recent.count == 0) return;  // nothing since: the lifetime figures stand
    lc->set_p50_seconds(*core::LcLatencyQuantileSeconds(recent, 0.5));
    lc->set_p99_seconds(*core::LcLatencyQuantileSeconds(recent, 0.99));
    lc->set_window_seconds(window);
    lc->set_window_requests(recent.count);
  }

  std::map<std::string, core::LcLatencySnapshot> previous_;
  std::chrono::steady_clock::time_point previous_at_;
};

Json FrameJson(const NodeSnapshot& s) {
  Json out;
  out["time_unix_seconds"] = static_cast<int64_t>(time(nullptr));
  out["daemon_pid"] = s.daemon_pid;
  out["devices"] = DevicesJson(s.devices);
  out["vgpus"] = Json::array();
  for (const auto& v : s.vgpus) out["vgpus"].push_back(VgpuJson(v));
  return out;
}

int RunTop(const TopOptions& o) {
  if (o.interval_ms < 50 || o.interval_ms > 3600000) {
    std::cerr << "gpuslice: --interval-ms " << o.interval_ms << " is out of range; give 50 to 3600000\n";
    return 2;
  }
  if (o.iterations < 0) {
    std::cerr << "gpuslice: --iterations " << o.iterations << " is negative; give a count, or leave it out\n";
    return 2;
  }
  const int frames = o.once ? 1 : o.iterations;
  const bool redraw = !o.json && frames != 1 && isatty(STDOUT_FILENO);
  const std::string socket = o.socket.empty() ? daemon::DefaultSocketPath(o.state_dir) : o.socket;
  FrameToFrameLcWindow lc_window;
  for (int i = 0; frames == 0 || i < frames; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.interval_ms));  // the refresh period
    // Reconnect each frame: top keeps working across a daemon restart.
    auto client = daemon::DaemonClient::ConnectIfRunning(socket);
    auto snapshot = TakeNodeSnapshot(client.get(), o.state_dir, "", /*with_vgpus=*/true);
    if (!snapshot.ok()) {
      std::cerr << "gpuslice: " << snapshot.status().message() << "\n";
      return 2;
    }
    if (snapshot->daemon_pid == 0)
      lc_window.Apply(&snapshot->vgpus);
    else
      lc_window.Forget();  // the daemon's own window applies
    if (o.json) {
      std::cout << FrameJson(snapshot.value()).dump() << std::endl;
      continue;
    }
    if (redraw)
      std::cout << "\x1b[H\x1b[2J";  // home, clear
    else if (i > 0)
      std::cout << "\n";
    std::cout << Frame(snapshot.value()) << std::flush;
  }
  return 0;
}

}  // namespace

void AddTopCommand(CLI::App& app) {
  auto o = std::make_shared<TopOptions>();
  CLI::App* cmd = app.add_subcommand("top", "Live view per GPU and vGPU: memory, compute share, priority");
  cmd->add_flag("--once", o->once, "Print one frame and exit");
  cmd->add_option("--iterations", o->iterations, "Print this many frames and exit (default: until Ctrl-C)");
  cmd->add_option("--interval-ms", o->interval_ms, "Time between frames in milliseconds (default 1000)");
  cmd->add_flag("--json", o->json, "One JSON object per frame and line");
  cmd->add_option("--state-dir", o->state_dir, "State directory (default: as for run)");
  cmd->add_option("--socket", o->socket, "The daemon's socket (default: $GPUSLICE_SOCKET, <state-dir>/gpuslice.sock)");
  cmd->callback([o] { ExitCode() = RunTop(*o); });
}

}  // namespace gpuslice::cli
