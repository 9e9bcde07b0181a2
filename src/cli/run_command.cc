#include "cli/run_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/child_process.h"
#include "cli/cli_output.h"
#include "cli/commands.h"
#include "cli/run_via_daemon.h"
#include "cli/vgpu_session.h"
#include "core/vgpu_store.h"
#include "daemon/daemon_client.h"
#include "daemon/gpu_usage_meter.h"
#include "daemon/power_cap_enforcer.h"
#include "daemon/socket_path.h"
#include "daemon/utilization_sampler.h"
#include "node/flag_values.h"
#include "node/power_cap_file.h"
#include "node/standalone_node.h"
#include "node/vgpu_manager.h"
#include "port/driver_locator.h"
#include "port/fd_passing.h"
#include "port/nvml_library.h"

extern char** environ;

namespace gpuslice::cli {
namespace {

constexpr int kReapIntervalMs = 200;  // dead processes' memory is back within 1 s

// Where libgpuslice-cuda.so lives: $GPUSLICE_LIBRARY_DIR, else ../lib next
// to this executable (the build tree and `make install` layout alike).
std::string LibraryDir() {
  if (const char* dir = getenv("GPUSLICE_LIBRARY_DIR"); dir != nullptr && *dir != '\0') return dir;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  exe[n] = '\0';
  std::string path(exe);
  path = path.substr(0, path.rfind('/'));  // .../bin
  return path.substr(0, path.rfind('/')) + "/lib";
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The child's environment: ours, with the vGPU and the library added.
std::vector<std::string> ChildEnvironment(const RunOptions& options, const std::string& vgpu_dir,
                                          const std::string& library, const std::string& real_driver,
                                          const std::string& real_nvml, const std::vector<port::GpuInfo>& gpus) {
  std::vector<std::string> env;
  std::string preload, library_path;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string key = entry.substr(0, entry.find('='));
    const std::string value = entry.substr(entry.find('=') + 1);
    if (key == "LD_PRELOAD") preload = value;
    else if (key == "LD_LIBRARY_PATH") library_path = value;
    else if (key == "GPUSLICE_VGPU_DIR" || key == "GPUSLICE_REAL_DRIVER" || key == "GPUSLICE_REAL_NVML") continue;
    else if (key == "CUDA_VISIBLE_DEVICES" && !options.gpus.empty()) continue;
    else env.push_back(entry);
  }
  env.push_back("GPUSLICE_VGPU_DIR=" + vgpu_dir);
  env.push_back("GPUSLICE_REAL_DRIVER=" + real_driver);
  if (!real_nvml.empty()) env.push_back("GPUSLICE_REAL_NVML=" + real_nvml);
  if (!options.gpus.empty()) {
    // UUIDs, not indices: CUDA's default device order need not be NVML's.
    std::string visible;
    for (const auto& g : gpus) visible += (visible.empty() ? "" : ",") + g.uuid_text;
    env.push_back("CUDA_VISIBLE_DEVICES=" + visible);
  }
  if (options.inject == InjectMode::kPreload) {
    preload = library + "/libgpuslice-cuda.so" + (preload.empty() ? "" : ":" + preload);
  } else {
    library_path = library + "/shim" + (library_path.empty() ? "" : ":" + library_path);
  }
  if (!preload.empty()) env.push_back("LD_PRELOAD=" + preload);
  if (!library_path.empty()) env.push_back("LD_LIBRARY_PATH=" + library_path);
  return env;
}

// No daemon: the daemon's own manager, opened in this process on the
// node's stored policy and levels (node/standalone_node.h), so the vGPU is
// made with the same checks and bytes, and the node's timeslices are
// recomputed with the same constants, as through the daemon.
int RunStandalone(const RunOptions& options, const std::string& name, node::CreateOptions create,
                  const ChildEnvironmentFn& environment) {
  auto opened = node::StandaloneNode::Open(options.state_dir);
  if (!opened.ok()) return Fail(opened.status().message());
  node::StandaloneNode& node = *opened.value();
  // Without NVML nothing can be created; its own reason names the fix.
  if (!node.devices_problem().empty()) return Fail(node.devices_problem());
  create.name = name;
  create.gpus = options.gpus;
  create.priority_level = options.priority;  // resolved by the node's stored levels
  create.suspendable = options.suspendable;
  create.join_existing = true;
  create.client_pid = static_cast<uint32_t>(getpid());
  node::CreateResult made;
  if (node::ApiStatus s = node.manager().Create(create, &made); !s.ok()) return Fail(s.message());
  // Our claim on the vGPU (client_pid) ends with the run; it goes once
  // unused, and the manager reschedules the node when it does.
  VgpuSession session{node.store().root(), name, made.dir, made.gpu_uuids, kReapIntervalMs, [&] {
                        bool deleted = false;
                        node::ApiStatus s =
                            node.manager().Delete(name, /*if_unused=*/true, create.client_pid, &deleted);
                        if (!s.ok()) std::cerr << "gpuslice: warning: " << s.message() << "\n";
                      }};
  // A power cap (given here, or later by `set`): this supervisor holds it
  // for its own vGPU once a second, as the daemon's housekeeping does for
  // all (measure, then decide and write the budget:
  // daemon/power_cap_enforcer.h). Nothing is measured until there is one.
  std::unique_ptr<port::NvmlLibrary> nvml;
  std::optional<daemon::GpuUsageMeter> usage;
  std::optional<daemon::UtilizationSampler> sampler;
  std::optional<daemon::PowerCapEnforcer> power;
  bool nvml_failed = false;
  session.each_second = [&] {
    if (!power) {
      if (nvml_failed || !node::LoadPowerCap(made.dir)) return;
      auto opened = port::NvmlLibrary::Open();
      if (!opened.ok()) {
        nvml_failed = true;
        std::cerr << "gpuslice: warning: the power cap is NOT held: " << opened.status().message() << "\n";
        return;
      }
      nvml = std::move(opened.value());
      usage.emplace();
      sampler.emplace(nvml.get(), &node.manager(), &*usage);
      power.emplace(&*usage, &node.manager(), name);
    }
    sampler->Sample();
    power->Pass(std::chrono::steady_clock::now());
  };
  return RunInVgpu(session, options, environment);
}

}  // namespace

int RunCommand(const RunOptions& options) {
  if (options.command.empty()) {
    return Fail("no command given; write it after --, e.g. gpuslice run --memory 4GiB -- python3 train.py");
  }
  // The same parsers as `set` and the daemon path (node/flag_values.h).
  node::CreateOptions create;
  if (!options.memory.empty()) {
    auto parsed = node::ParseMemoryFlag("--memory", options.memory);
    if (!parsed.ok()) return Fail(parsed.status().message());
    create.memory_limit_bytes = parsed.value();
  }
  if (!options.compute.empty()) {
    auto pct = node::ParsePercentFlag("--compute", options.compute);
    if (!pct.ok()) return Fail(pct.status().message());
    create.compute_share_pct = pct.value();
  }
  if (!options.compute_cap.empty()) {
    auto pct = node::ParsePercentFlag("--compute-cap", options.compute_cap);
    if (!pct.ok()) return Fail(pct.status().message());
    create.compute_cap_pct = pct.value();
  }
  std::optional<double> power_cap;
  if (!options.power_cap.empty()) {
    auto watts = node::ParsePowerFlag("--power-cap", options.power_cap, /*allow_none=*/false);
    if (!watts.ok()) return Fail(watts.status().message());
    power_cap = watts.value();
  }
  const std::string name = options.name.empty() ? "run-" + std::to_string(getpid()) : options.name;
  if (Status s = core::VgpuStore::ValidateName(name); !s.ok()) return Fail("--name: " + s.message());

  const std::string library = LibraryDir();
  const std::string library_file =
      library + (options.inject == InjectMode::kPreload ? "/libgpuslice-cuda.so" : "/shim/libcuda.so.1");
  if (!IsFile(library_file)) {
    return Fail("the gpuslice library is missing at " + library_file +
                "; reinstall gpuslice or set GPUSLICE_LIBRARY_DIR to the directory holding libgpuslice-cuda.so");
  }
  const std::string real_driver = port::LocateRealCudaDriver(nullptr);
  if (real_driver.empty()) {
    return Fail("no NVIDIA driver found (libcuda.so.1 is not installed); install the NVIDIA driver, "
                "or set GPUSLICE_REAL_DRIVER to its libcuda.so.1");
  }
  const std::string real_nvml = port::LocateRealNvml(nullptr);
  auto environment = [&](const std::string& dir, const std::vector<port::GpuInfo>& gpus) {
    return ChildEnvironment(options, dir, library, real_driver, real_nvml, gpus);
  };
  // A daemon answering on the socket creates or joins the vGPU
  // (run_via_daemon.h); without one, the same manager runs in this process.
  const std::string socket = daemon::DefaultSocketPath(options.state_dir);
  // gRPC's threads must start with the forwarded signals blocked, or a
  // SIGTERM could kill this process and orphan the command.
  if (port::UnixSocketAnswers(socket)) BlockSupervisedSignals();
  if (auto client = daemon::DaemonClient::ConnectIfRunning(socket)) {
    if (std::optional<int> code = RunViaDaemon(*client, options, name, environment)) return *code;
  }
  if (options.suspendable) {
    // Fail open: without a daemon nothing suspends anyone; the run goes on.
    std::cerr << "gpuslice: warning: no daemon answers; --suspendable takes effect only through `gpuslice daemon`\n";
  }
  // Without a daemon, this run's supervisor holds its own power cap.
  if (power_cap) create.power_cap_watts = *power_cap;
  return RunStandalone(options, name, create, environment);
}

}  // namespace gpuslice::cli

namespace gpuslice::cli {

void AddRunCommand(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  auto inject = std::make_shared<std::string>("preload");
  CLI::App* run = app.add_subcommand("run", "Run a command inside a vGPU (created, or joined by --name)");
  run->add_option("--memory", options->memory, "Device memory limit per GPU, e.g. 4GiB, 512MiB");
  // A string, split below: with a vector option there, CLI11 2.1 refused the
  // command's own dash arguments after `--` ("-u not expected").
  auto gpus = std::make_shared<std::string>();
  run->add_option("--gpu", *gpus, "GPUs by index or UUID, comma-separated (default: all)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Join);
  run->add_option("--name", options->name, "vGPU name; processes run with the same name share one vGPU");
  run->add_option("--inject", *inject,
                  "How the library is loaded: preload (LD_PRELOAD) or libpath (libcuda.so.1 first on "
                  "LD_LIBRARY_PATH)")
      ->check(CLI::IsMember({"preload", "libpath"}));
  run->add_option("--state-dir", options->state_dir,
                  "State directory (default: $GPUSLICE_STATE_DIR, $XDG_RUNTIME_DIR/gpuslice or /run/gpuslice)");
  run->add_option("--compute", options->compute,
                  "Compute share in percent (1-100): proportional and work-conserving; default: equal shares");
  run->add_option("--compute-cap", options->compute_cap,
                  "Hard compute ceiling in percent (1-100) of GPU time, even when the GPU is otherwise idle");
  run->add_option("--priority", options->priority,
                  "A priority level: lc (latency-critical: takes the GPU from best-effort work), be (best-effort, default), "
                  "or one of the node's levels (default: critical, high, normal, low; docs/configuration.md)");
  run->add_option("--power-cap", options->power_cap,
                  "Power cap per GPU in watts, e.g. 150: the daemon holds the vGPU's attributed power at or below it "
                  "by tightening its compute cap (held by the daemon, or without one by this run)");
  run->add_flag("--suspendable", options->suspendable,
                "Best-effort only: when a higher level finds the GPU full, the daemon may suspend this vGPU to host "
                "memory and resume it once the memory frees (memory overcommit; needs `gpuslice daemon`)");
  run->add_option("--audit", options->audit,
                  "What the memory audit does to a process of the command that holds GPU memory its vGPU does not "
                  "account (report, deny: SIGSTOP, kill; default kill), or off")
      ->check(CLI::IsMember({"report", "deny", "kill", "off"}));
  run->add_option("command", options->command, "The command and its arguments, after --")->required();
  run->callback([run, options, inject, gpus] {
    if (std::string flag = FlagGivenEmpty(*run, {"--memory", "--compute", "--compute-cap", "--priority", "--name", "--power-cap"});
        !flag.empty()) {
      ExitCode() = Fail(EmptyFlagMessage(flag));
      return;
    }
    options->inject = *inject == "libpath" ? InjectMode::kLibraryPath : InjectMode::kPreload;
    std::string gpu;
    for (char c : *gpus + ",") {  // repeated --gpu are joined by newlines
      if (c != ',' && c != '\n') {
        gpu += c;
      } else if (!gpu.empty()) {
        options->gpus.push_back(gpu);
        gpu.clear();
      }
    }
    if (!gpus->empty() && options->gpus.empty()) options->gpus.push_back("");  // --gpu ",": refused by name
    ExitCode() = RunCommand(*options);
  });
}

}  // namespace gpuslice::cli
