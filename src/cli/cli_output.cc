#include "cli/cli_output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "core/byte_size.h"

namespace gpuslice::cli {
namespace {

namespace pb = control::v1;

// nvidia-smi topo -m's legend, so the matrix reads the same.
std::string LinkCode(const pb::Link& link) {
  if (link.type() == "nvlink") return "NV" + std::to_string(link.nvlinks());
  if (link.type() == "board") return "BRD";
  if (link.type() == "pcie_single_switch") return "PIX";
  if (link.type() == "pcie_multiple_switches") return "PXB";
  if (link.type() == "pcie_host_bridge") return "PHB";
  if (link.type() == "numa_node") return "NODE";
  if (link.type() == "system") return "SYS";
  return "?";
}

Json LatencyJson(const pb::LcLatency& lc) {
  Json latency;
  latency["requests"] = lc.requests();
  latency["sum_seconds"] = lc.sum_seconds();
  latency["p50_seconds"] = lc.has_p50_seconds() ? Json(lc.p50_seconds()) : Json(nullptr);
  latency["p99_seconds"] = lc.has_p99_seconds() ? Json(lc.p99_seconds()) : Json(nullptr);
  latency["window_seconds"] = lc.has_window_seconds() ? Json(lc.window_seconds()) : Json(nullptr);
  latency["window_requests"] = lc.window_requests();
  return latency;
}

}  // namespace

int Fail(const std::string& message) {
  std::cerr << "gpuslice: " << message << "\n";
  return kGpusliceError;
}

int Fail(const std::string& who, const std::string& message) {
  std::cerr << "gpuslice " << who << ": " << message << "\n";
  return kGpusliceError;
}

std::string PriorityText(pb::Priority priority) { return priority == pb::PRIORITY_LATENCY_CRITICAL ? "lc" : "be"; }

std::string PriorityText(const pb::Vgpu& v) {
  return v.priority_rank() == 0 || v.priority_level().empty() ? PriorityText(v.priority()) : v.priority_level();
}

std::string LimitText(const pb::VgpuDevice& device) {
  return device.memory_unlimited() ? "unlimited" : core::FormatByteSize(device.memory_limit_bytes());
}

std::string RatioText(bool present, double ratio) {
  if (!present) return "-";
  return std::to_string(static_cast<int>(std::lround(ratio * 100))) + "%";
}

std::string WattsText(double watts, bool present) {
  if (!present || !std::isfinite(watts)) return "-";
  char buf[32];
  snprintf(buf, sizeof buf, watts < 10 ? "%.1f W" : "%.0f W", watts);
  return buf;
}

std::string MeasuredText(const pb::VgpuDevice& d) {
  if (d.has_measured_recent_ratio()) return RatioText(true, d.measured_recent_ratio());
  return RatioText(d.has_compute_measured_ratio(), d.compute_measured_ratio());
}

std::string ComputeText(const pb::Vgpu& v, const pb::VgpuDevice& d) {
  std::string out = std::to_string(d.compute_share_pct()) + "%";
  if (d.compute_cap_pct() != 0) out += " cap " + std::to_string(d.compute_cap_pct()) + "%";
  if (v.has_power_cap_watts()) {
    char buf[32];
    snprintf(buf, sizeof buf, " pwr %gW", v.power_cap_watts());
    out += buf;
    const uint32_t ceiling = d.compute_cap_pct() == 0 ? 100 : d.compute_cap_pct();
    if (d.power_budget_pct() != 0 && d.power_budget_pct() < ceiling) out += " now " + std::to_string(d.power_budget_pct()) + "%";
  }
  return out;
}

std::string HealthText(const pb::Gpu& g) {
  if (!g.unhealthy()) return "ok";
  return "UNHEALTHY (" + (g.health_detail().empty() ? "XID " + std::to_string(g.last_xid()) : g.health_detail()) + ")";
}

std::string LatencyText(bool present, double seconds) {
  if (!present || !std::isfinite(seconds) || seconds < 0) return "-";
  char buf[32];
  // Three significant digits or so: bucket interpolation is no finer.
  if (seconds < 1e-3)
    snprintf(buf, sizeof buf, "%.0fus", seconds * 1e6);
  else if (seconds < 10e-3)
    snprintf(buf, sizeof buf, "%.2fms", seconds * 1e3);
  else if (seconds < 1.0)
    snprintf(buf, sizeof buf, "%.0fms", seconds * 1e3);
  else
    snprintf(buf, sizeof buf, "%.2fs", seconds);
  return buf;
}

std::string FormatColumns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

Json DevicesJson(const pb::GetDevicesResponse& devices) {
  Json out;
  out["node"] = devices.node();
  out["driver_version"] = devices.driver_version();
  out["gpus"] = Json::array();
  for (const auto& g : devices.gpus()) {
    Json gpu;
    gpu["index"] = g.index();
    gpu["uuid"] = g.uuid();
    gpu["name"] = g.name();
    gpu["memory_total_bytes"] = g.memory_total_bytes();
    gpu["pci_bus_id"] = g.pci_bus_id();
    gpu["healthy"] = !g.unhealthy();
    gpu["health_detail"] = g.health_detail();
    gpu["last_xid"] = g.last_xid() != 0 ? Json(g.last_xid()) : Json(nullptr);
    gpu["xid_errors"] = Json::array();
    for (const auto& x : g.xid_errors()) {
      Json xid;
      xid["xid"] = x.xid();
      xid["count"] = x.count();
      xid["critical"] = x.critical();
      gpu["xid_errors"].push_back(xid);
    }
    out["gpus"].push_back(gpu);
  }
  out["links"] = Json::array();
  for (const auto& l : devices.links()) {
    Json link;
    link["a"] = l.a();
    link["b"] = l.b();
    link["type"] = l.type();
    link["nvlinks"] = l.nvlinks();
    out["links"].push_back(link);
  }
  return out;
}

Json VgpuJson(const pb::Vgpu& v) {
  Json out;
  out["name"] = v.name();
  out["state"] = v.state().empty() ? "ok" : v.state();  // "" from an older daemon
  if (!v.state_detail().empty()) out["state_detail"] = v.state_detail();
  out["priority"] = PriorityText(v.priority());
  out["priority_level"] = v.priority_level();
  out["priority_rank"] = v.priority_rank();
  out["persistent"] = v.persistent();
  out["suspendable"] = v.suspendable();
  out["memory_waits"] = v.memory_waits();
  out["memory_wait_bytes"] = v.memory_wait_bytes();
  out["has_members"] = v.has_members();
  out["generation"] = v.generation();
  out["dir"] = v.dir();
  out["power_cap_watts"] = v.has_power_cap_watts() ? Json(v.power_cap_watts()) : Json(nullptr);
  out["owner_uid"] = v.has_owner_uid() ? Json(v.owner_uid()) : Json(nullptr);
  // Sums over the vGPU's GPUs (each device has its own below).
  double gpu_seconds = 0, energy = 0, watts = 0;
  bool any_watts = false;
  for (const auto& d : v.devices()) {
    gpu_seconds += d.gpu_seconds();
    energy += d.energy_joules();
    if (d.has_watts()) watts += d.watts();
    any_watts = any_watts || d.has_watts();
  }
  out["gpu_seconds"] = gpu_seconds;
  out["energy_joules"] = energy;
  out["watts"] = any_watts ? Json(watts) : Json(nullptr);
  out["devices"] = Json::array();
  for (const auto& d : v.devices()) {
    Json dev;
    dev["gpu"] = d.has_gpu_index() ? Json(d.gpu_index()) : Json(nullptr);
    dev["uuid"] = d.gpu_uuid();
    dev["memory_limit_bytes"] = d.memory_unlimited() ? Json(nullptr) : Json(d.memory_limit_bytes());
    dev["memory_used_bytes"] = d.memory_used_bytes();
    dev["memory_total_bytes"] = d.memory_total_bytes();
    dev["compute_share_pct"] = d.compute_share_pct();
    dev["compute_cap_pct"] = d.compute_cap_pct();
    dev["timeslice_us"] = d.timeslice_us();
    dev["timeslice_beside_lc_us"] = d.timeslice_beside_lc_us();
    dev["applied_timeslice_us"] = d.applied_timeslice_us();
    dev["compute_measured_ratio"] = d.has_compute_measured_ratio() ? Json(d.compute_measured_ratio()) : Json(nullptr);
    dev["measured_recent_ratio"] = d.has_measured_recent_ratio() ? Json(d.measured_recent_ratio()) : Json(nullptr);
    dev["gpu_seconds"] = d.gpu_seconds();
    dev["energy_joules"] = d.energy_joules();
    dev["watts"] = d.has_watts() ? Json(d.watts()) : Json(nullptr);
    dev["effective_compute_cap_pct"] = d.effective_compute_cap_pct();
    dev["power_budget_pct"] = d.power_budget_pct();
    out["devices"].push_back(dev);
  }
  out["processes"] = Json::array();
  for (const auto& p : v.processes()) {
    Json proc;
    proc["pid"] = p.pid();
    proc["same_pid_namespace"] = p.same_pid_namespace();
    proc["memory_used_bytes"] = Json(std::vector<uint64_t>(p.memory_used_bytes().begin(), p.memory_used_bytes().end()));
    proc["applied_timeslice_us"] =
        Json(std::vector<uint64_t>(p.applied_timeslice_us().begin(), p.applied_timeslice_us().end()));
    out["processes"].push_back(proc);
  }
  out["denied_allocations"] = v.denied_allocations();
  out["reaped_processes"] = v.reaped_processes();
  out["timeslice_applications"] = v.timeslice_applications();
  out["timeslice_failures"] = v.timeslice_failures();
  out["gate_waits"] = v.gate_waits();
  out["hold_budget_spent"] = v.hold_budget_spent();
  out["lc_latency"] = LatencyJson(v.lc_latency());
  out["task_levels"] = Json::array();
  for (const auto& t : v.task_levels()) {
    Json level;
    level["level"] = t.level();
    level["latency"] = LatencyJson(t.latency());
    level["failed"] = t.failed();
    level["slo_misses"] = t.slo_misses();
    out["task_levels"].push_back(level);
  }
  Json suspend;
  suspend["state"] = v.suspend_state().empty() ? "running" : v.suspend_state();  // "" from an older daemon
  suspend["detail"] = v.suspend_detail();
  suspend["by"] = v.suspended_by();  // "": an operator; "memory_pressure": the daemon, for memory
  suspend["suspended_bytes"] = v.suspended_bytes();
  suspend["suspended_seconds_total"] = v.suspended_seconds_total();
  suspend["bytes_moved_total"] = v.suspend_bytes_moved_total();
  suspend["suspends"] = v.suspends();
  suspend["resumes"] = v.resumes();
  suspend["last_suspend_seconds"] = v.last_suspend_seconds();
  suspend["last_resume_seconds"] = v.last_resume_seconds();
  out["suspend"] = suspend;
  return out;
}

std::string DevicesTable(const pb::GetDevicesResponse& devices) {
  std::string out = "node " + devices.node() + ", NVIDIA driver " +
                    (devices.driver_version().empty() ? "unknown" : devices.driver_version()) + "\n\n";
  std::vector<std::vector<std::string>> rows = {{"GPU", "NAME", "MEMORY", "PCI BUS ID", "UUID", "HEALTH"}};
  for (const auto& g : devices.gpus()) {
    rows.push_back({std::to_string(g.index()), g.name(), core::FormatByteSize(g.memory_total_bytes()),
                    g.pci_bus_id().empty() ? "-" : g.pci_bus_id(), g.uuid(), HealthText(g)});
  }
  out += FormatColumns(rows);
  if (devices.gpus_size() > 1) {
    std::vector<std::vector<std::string>> matrix;
    std::vector<std::string> header = {""};
    for (const auto& g : devices.gpus()) header.push_back("GPU" + std::to_string(g.index()));
    matrix.push_back(header);
    for (const auto& a : devices.gpus()) {
      std::vector<std::string> row = {"GPU" + std::to_string(a.index())};
      for (const auto& b : devices.gpus()) {
        std::string code = "X";
        for (const auto& l : devices.links()) {
          if ((l.a() == a.index() && l.b() == b.index()) || (l.a() == b.index() && l.b() == a.index())) {
            code = LinkCode(l);
          }
        }
        row.push_back(code);
      }
      matrix.push_back(row);
    }
    out += "\n" + FormatColumns(matrix) +
           "\nNV#: # active NVLinks  BRD: same board  PIX: one PCIe switch  PXB: several PCIe switches\n"
           "PHB: PCIe host bridge  NODE: same NUMA node  SYS: across CPU sockets\n";
  }
  return out;
}

std::string SliceText(const pb::VgpuDevice& d) {
  auto us = [](uint64_t v) { return std::to_string(v) + "us"; };
  if (d.applied_timeslice_us() == 0) return d.timeslice_us() == 0 ? "-" : "(" + us(d.timeslice_us()) + ")";
  if (d.applied_timeslice_us() == d.timeslice_us() || d.timeslice_us() == 0) return us(d.applied_timeslice_us());
  return us(d.applied_timeslice_us()) + " (" + us(d.timeslice_us()) + ")";
}

std::string SuspendSuffix(const pb::Vgpu& v) {
  // A vGPU not running says so by its name: suspended, or on its way.
  const bool running = v.suspend_state().empty() || v.suspend_state() == "running";
  return running ? "" : " (" + v.suspend_state() + ")";
}

std::string VgpuTable(const std::vector<pb::Vgpu>& vgpus, const pb::GetDevicesResponse&) {
  if (vgpus.empty()) return "no vGPUs\n";
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "PRIO", "GPU", "MEMORY USED", "LIMIT", "COMPUTE", "MEASURED", "SLICE", "PROCS", "PIDS"}};
  for (const auto& v : vgpus) {
    std::string pids;
    for (const auto& p : v.processes()) pids += (pids.empty() ? "" : ",") + std::to_string(p.pid());
    if (v.state() == "corrupt") {  // nothing else of it can be read; `ls --json` says why
      rows.push_back({v.name() + " (corrupt)", "-", "-", "-", "-", "-", "-", "-", "-", "-"});
      continue;
    }
    for (int i = 0; i < v.devices_size(); ++i) {
      const auto& d = v.devices(i);
      const std::string compute = ComputeText(v, d);
      rows.push_back({i == 0 ? v.name() + (v.persistent() ? " (persistent)" : "") + SuspendSuffix(v) : "",
                      i == 0 ? PriorityText(v) : "", d.has_gpu_index() ? std::to_string(d.gpu_index()) : "?",
                      core::FormatByteSize(d.memory_used_bytes()), LimitText(d), compute,
                      MeasuredText(d),
                      SliceText(d),
                      i == 0 ? std::to_string(v.processes_size()) : "", i == 0 ? (pids.empty() ? "-" : pids) : ""});
    }
  }
  return FormatColumns(rows);
}

}  // namespace gpuslice::cli
