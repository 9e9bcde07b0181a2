#include "cli/run_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/child_process.h"
#include "cli/commands.h"
#include "cli/run_via_daemon.h"
#include "cli/session_audit.h"
#include "core/byte_size.h"
#include "core/memory_ledger.h"
#include "core/vgpu_store.h"
#include "daemon/control_socket.h"
#include "daemon/daemon_client.h"
#include "daemon/socket_path.h"
#include "node/flag_values.h"
#include "node/node_devices.h"
#include "node/node_schedule.h"
#include "node/policy_file.h"
#include "node/power_cap_file.h"
#include "port/driver_locator.h"
#include "port/nvml_library.h"
#include "port/process.h"

extern char** environ;

namespace gpuslice::cli {
namespace {

constexpr int kGpusliceError = 2;
constexpr int kReapIntervalMs = 200;  // dead processes' memory is back within 1 s

int Fail(const std::string& message) {
  std::cerr << "gpuslice: " << message << "\n";
  return kGpusliceError;
}

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

// The vGPU's timeslices depend on every vGPU on its GPUs: recompute them
// whenever this run changes that set. A failure leaves the previous slices
// in place (the command still runs), so it is a warning, not an error.
void Reschedule(const core::VgpuStore& store) {
  // With the node's stored policy: the daemon's constants (policy_file.h).
  auto config = node::LoadPolicyConfig(store.root());
  Status s = config.ok() ? node::ApplyNodeSchedule(store, config.value()) : config.status();
  if (!s.ok()) {
    std::cerr << "gpuslice: warning: compute shares not updated: " << s.message() << "\n";
  }
}

}  // namespace

int RunCommand(const RunOptions& options) {
  if (options.command.empty()) {
    return Fail("no command given; write it after --, e.g. gpuslice run --memory 4GiB -- python3 train.py");
  }
  // The same parsers as `set` and the daemon path (node/flag_values.h).
  uint64_t memory_limit = core::kUnlimited;
  if (!options.memory.empty()) {
    auto parsed = node::ParseMemoryFlag("--memory", options.memory);
    if (!parsed.ok()) return Fail(parsed.status().message());
    memory_limit = parsed.value();
  }
  uint32_t compute_share = 100, compute_cap = 0;
  if (!options.compute.empty()) {
    auto pct = node::ParsePercentFlag("--compute", options.compute);
    if (!pct.ok()) return Fail(pct.status().message());
    compute_share = pct.value();
  }
  if (!options.compute_cap.empty()) {
    auto pct = node::ParsePercentFlag("--compute-cap", options.compute_cap);
    if (!pct.ok()) return Fail(pct.status().message());
    compute_cap = pct.value() == 100 ? 0 : pct.value();
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
  // A daemon answering on the socket creates or joins the vGPU
  // (run_via_daemon.h); without one, everything below runs standalone.
  const std::string socket = daemon::DefaultSocketPath(options.state_dir);
  // gRPC's threads must start with the forwarded signals blocked, or a
  // SIGTERM could kill this process and orphan the command.
  if (daemon::SocketAnswers(socket)) BlockSupervisedSignals();
  if (auto client = daemon::DaemonClient::ConnectIfRunning(socket)) {
    const std::string real_nvml = port::LocateRealNvml(nullptr);
    return RunViaDaemon(*client, options, name, [&](const std::string& dir, const std::vector<port::GpuInfo>& gpus) {
      return ChildEnvironment(options, dir, library, real_driver, real_nvml, gpus);
    });
  }
  auto nvml = port::NvmlLibrary::Open();
  if (!nvml.ok()) return Fail(nvml.status().message());
  auto all_gpus = nvml.value()->ListGpus();
  if (!all_gpus.ok()) return Fail(all_gpus.status().message());
  node::NodeDevices devices;
  devices.gpus = std::move(all_gpus.value());
  auto gpus = devices.Select(options.gpus);
  if (!gpus.ok()) return Fail(gpus.status().message());
  core::VgpuStore store(options.state_dir.empty() ? core::VgpuStore::DefaultRoot() : options.state_dir);
  // A level name means what the daemon would make of it: the node's levels
  // are stored in the state directory (node/policy_file.h).
  uint32_t level = core::LevelWord(core::Priority::kBestEffort, 0);
  if (!options.priority.empty()) {
    auto levels = node::LoadLevels(store.root());
    if (!levels.ok()) return Fail(levels.status().message());
    auto word = node::ParseLevelFlag("--priority", options.priority, levels.value());
    if (!word.ok()) return Fail(word.status().message());
    level = word.value();
  }

  core::VgpuSpec spec;
  spec.name = name;
  for (const auto& g : gpus.value()) {
    core::DeviceSpec d;
    d.uuid = g.uuid;
    d.memory_limit_bytes = memory_limit;
    d.compute_share_pct = compute_share;
    d.compute_cap_pct = compute_cap;
    d.priority = core::LevelClass(level);
    d.priority_rank = core::LevelRank(level);
    spec.devices.push_back(d);
  }
  const bool spec_is_explicit = !options.memory.empty() || !options.gpus.empty();
  bool created = false;
  auto dir = store.CreateOrJoin(spec, spec_is_explicit, &created);
  if (!dir.ok()) return Fail(dir.status().message());
  auto membership = store.HoldMembership(name);
  if (!membership.ok()) return Fail(membership.status().message());
  auto handle = core::VgpuHandle::Open(dir.value(), port::MappedFile::Access::kReadOnly);
  if (!handle.ok()) return Fail(handle.status().message());
  if (power_cap && created) {
    // Fail open: only the daemon measures energy, so without one the cap is
    // stored (and held once a daemon starts) but the command runs uncapped.
    if (Status s = node::StorePowerCap(dir.value(), {*power_cap, compute_cap}); !s.ok()) {
      std::cerr << "gpuslice: warning: power cap not stored: " << s.message() << "\n";
    }
    std::cerr << "gpuslice: warning: no daemon answers; --power-cap is held only while `gpuslice daemon` runs\n";
  }
  const bool compute_is_explicit = !options.compute.empty() || !options.compute_cap.empty() || !options.priority.empty();
  if (!created && compute_is_explicit) {
    const core::DeviceLimit& d = handle->limits().devices[0];
    if (d.compute_share_pct != compute_share || d.compute_cap_pct != compute_cap ||
        d.priority != level) {
      close(membership.value());
      return Fail("vGPU '" + name + "' already exists with --compute " + std::to_string(d.compute_share_pct) +
                  (d.compute_cap_pct != 0 ? " --compute-cap " + std::to_string(d.compute_cap_pct) : "") +
                  " --priority " + (core::LevelClass(d.priority) == core::Priority::kLatencyCritical ? "lc" : "be") +
                  (core::LevelRank(d.priority) != 0 ? "+" + std::to_string(core::LevelRank(d.priority)) : "") +
                  "; join it without --compute/--compute-cap/--priority, or pick another --name");
    }
  }
  Reschedule(store);

  const std::vector<port::GpuInfo> vgpu_gpus = gpus.value();
  const std::string real_nvml = port::LocateRealNvml(nullptr);
  nvml.value().reset();  // NVML stays out of the child and of the wait
  auto child = ChildProcess::Spawn(
      options.command, ChildEnvironment(options, dir.value(), library, real_driver, real_nvml, vgpu_gpus));
  if (!child.ok()) {
    close(membership.value());
    auto removed = store.RemoveIfUnused(name);
    if (removed.ok() && removed.value()) Reschedule(store);
    std::cerr << "gpuslice: " << child.status().message() << "\n";
    return 127;
  }
  core::MemoryLedger ledger(&handle->limits(), &handle->ledger());
  SessionAudit audit(&handle.value(), AuditConfigOf(options.audit));
  const int status = child->Supervise(kReapIntervalMs, [&] {
    ledger.ReapDeadProcesses(port::SystemProcessProbe());
    audit.Tick();
  });
  ledger.ReapDeadProcesses(port::SystemProcessProbe());
  close(membership.value());
  auto removed = store.RemoveIfUnused(name);
  if (!removed.ok()) std::cerr << "gpuslice: warning: " << removed.status().message() << "\n";
  else if (removed.value()) Reschedule(store);
  return status;
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
                  "by tightening its compute cap (needs `gpuslice daemon`)");
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
