#include "k8s/gpu_sources.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "port/nvml_library.h"

extern char** environ;

namespace gpuslice::k8s {
namespace {

constexpr int kCommandTimeoutMs = 30000;

// Runs argv, returns its stdout when it exits 0 within the timeout.
StatusOr<std::string> RunAndCapture(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::Error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return Status::Error("cannot run " + argv[0]);
  }
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kCommandTimeoutMs);
  bool timed_out = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p = {fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) < 0 && errno != EINTR) break;
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (16u << 20)) break;
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return Status::Error(argv[0] + " " + argv[1] + " did not finish in 30 s");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::Error(argv[0] + " " + argv[1] + " failed (status " + std::to_string(status) + ")");
  }
  return out;
}

class NodeGpuDiscovery final : public GpuDiscovery {
 public:
  NodeGpuDiscovery(std::string exe, std::string node, std::string state_dir)
      : exe_(std::move(exe)), node_(std::move(node)), state_dir_(std::move(state_dir)) {}

  StatusOr<NodeTopology> Discover(std::string* document) override {
    if (!exe_.empty()) {
      auto out = RunAndCapture({exe_, "devices", "--json", "--state-dir", state_dir_});
      if (out.ok()) {
        auto topo = ParseTopology(*out);
        if (topo.ok()) {
          std::string doc = *out;
          while (!doc.empty() && isspace(static_cast<unsigned char>(doc.back()))) doc.pop_back();
          *document = doc;
          return topo;
        }
        spdlog::warn(
            "`gpuslice devices --json` printed an unusable document ({}); "
            "describing the GPUs from NVML without links",
            topo.status().message());
      } else {
        spdlog::warn("{}; describing the GPUs from NVML without links", out.status().message());
      }
    }
    auto nvml = port::NvmlLibrary::Open();
    if (!nvml.ok()) return nvml.status();
    auto gpus = nvml.value()->ListGpus();
    if (!gpus.ok()) return gpus.status();
    NodeTopology topo;
    topo.node = node_;
    for (const port::GpuInfo& g : *gpus) {
      topo.gpus.push_back({g.index, g.uuid_text, g.name, g.memory_total_bytes, ""});
    }
    *document = TopologyToJson(topo);
    return ParseTopology(*document);
  }

 private:
  std::string exe_;
  std::string node_;
  std::string state_dir_;
};

class NvmlHealthSource final : public HealthSource {
 public:
  NvmlHealthSource(std::string exe, std::string state_dir) : exe_(std::move(exe)), state_dir_(std::move(state_dir)) {}

  StatusOr<std::set<std::string>> HealthyGpus() override {
    // A fresh NVML session per poll: a session opened before a GPU fell off
    // the bus may keep answering from stale state.
    auto nvml = port::NvmlLibrary::Open();
    if (!nvml.ok()) return nvml.status();
    auto gpus = nvml.value()->ListGpus();
    if (!gpus.ok()) return gpus.status();
    std::set<std::string> healthy;
    for (const port::GpuInfo& g : *gpus) healthy.insert(g.uuid_text);
    if (!exe_.empty()) {
      // XID health lives in the node daemon; `devices --json` without one
      // answers from NVML with every GPU healthy, which removes nothing.
      auto out = RunAndCapture({exe_, "devices", "--json", "--state-dir", state_dir_});
      if (out.ok()) {
        for (const std::string& uuid : UnhealthyGpusInDevicesJson(*out)) healthy.erase(uuid);
      } else if (!warned_) {
        warned_ = true;
        spdlog::warn("GPU health from XID errors unknown ({}); using NVML's alone", out.status().message());
      }
    }
    return healthy;
  }

 private:
  const std::string exe_;
  const std::string state_dir_;
  bool warned_ = false;
};

}  // namespace

std::unique_ptr<GpuDiscovery> NewGpuDiscovery(std::string gpuslice_exe, std::string node_name, std::string state_dir) {
  return std::make_unique<NodeGpuDiscovery>(std::move(gpuslice_exe), std::move(node_name), std::move(state_dir));
}

std::unique_ptr<HealthSource> NewNvmlHealthSource(std::string gpuslice_exe, std::string state_dir) {
  return std::make_unique<NvmlHealthSource>(std::move(gpuslice_exe), std::move(state_dir));
}

std::set<std::string> UnhealthyGpusInDevicesJson(const std::string& document) {
  std::set<std::string> out;
  const nlohmann::json doc = nlohmann::json::parse(document, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("gpus") || !doc["gpus"].is_array()) return out;
  for (const nlohmann::json& g : doc["gpus"]) {
    if (!g.is_object()) continue;
    const auto healthy = g.find("healthy");
    const auto uuid = g.find("uuid");
    // Absent (an older daemon): healthy, as before XIDs were watched.
    if (healthy == g.end() || !healthy->is_boolean() || healthy->get<bool>()) continue;
    if (uuid != g.end() && uuid->is_string()) out.insert(uuid->get<std::string>());
  }
  return out;
}

uint32_t DeviceMinor(const TopologyGpu& gpu, const std::string& proc_root) {
  // NVML writes "00000000:19:00.0"; the driver's directory is "0000:19:00.0".
  std::string bus = gpu.pci_bus_id;
  std::transform(bus.begin(), bus.end(), bus.begin(), [](unsigned char c) { return std::tolower(c); });
  const size_t colon = bus.find(':');
  if (colon != std::string::npos && colon > 4) bus = bus.substr(colon - 4);
  if (!bus.empty()) {
    std::ifstream in(proc_root + "/driver/nvidia/gpus/" + bus + "/information");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("Device Minor:", 0) == 0) {
        const size_t at = line.find_first_not_of(" \t", 13);
        if (at == std::string::npos) break;
        const std::string digits = line.substr(at);
        uint32_t minor = 0;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), minor);
        if (ec == std::errc() && end != digits.data()) return minor;
        break;
      }
    }
  }
  return gpu.index;
}

std::string SelfExecutable() {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  exe[n] = '\0';
  return exe;
}

}  // namespace gpuslice::k8s
