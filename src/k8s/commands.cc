#include "k8s/commands.h"

#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/vgpu_store.h"
#include "k8s/device_plugin.h"
#include "k8s/dra/dra_plugin.h"
#include "k8s/extender_server.h"
#include "k8s/kube_http_client.h"
#include "k8s/library_install.h"
#include "k8s/names.h"
#include "k8s/pod_state_dir.h"
#include "k8s/vgpu_provisioner.h"
#include "node/state_keeper_client.h"

namespace gpuslice::k8s {
namespace {

constexpr int kStartupError = 2;

int Fail(const std::string& command, const std::string& message) {
  std::cerr << "gpuslice " << command << ": " << message << "\n";
  return kStartupError;
}

// The daemon's log style (daemon.cc): stderr, one line each, the level from
// GPUSLICE_LOG (error, warn, info, debug; default warn, as the library's).
void ConfigureLogging(const std::string& command) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("gpuslice-" + command));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ gpuslice-" + command + ": %v");
  const char* level = getenv("GPUSLICE_LOG");
  const spdlog::level::level_enum parsed = level == nullptr ? spdlog::level::warn : spdlog::level::from_str(level);
  spdlog::set_level(parsed == spdlog::level::off ? spdlog::level::warn : parsed);
}

// Moves `value` into `*out`, or sets command `name`'s failure and returns
// false.
template <typename T>
bool TakeOrFail(const char* name, StatusOr<T> value, T* out) {
  if (!value.ok()) {
    cli::ExitCode() = Fail(name, value.status().message());
    return false;
  }
  *out = std::move(value.value());
  return true;
}

// Starts a server with `start`, serves until SIGINT or SIGTERM, then stops
// it; sets command `name`'s exit code. The signals are blocked first, so the
// server's threads inherit the mask and only this thread receives them.
template <typename Start>
void ServeUntilTerminated(const char* name, Start start) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto server = start();
  if (!server.ok()) {
    cli::ExitCode() = Fail(name, server.status().message());
    return;
  }
  int signal = 0;
  while (sigwait(&set, &signal) != 0) {
  }
  (*server)->Stop();
  cli::ExitCode() = 0;
}

std::string DefaultLibraryDir() {
  if (const char* dir = getenv("GPUSLICE_LIBRARY_DIR"); dir != nullptr && *dir != '\0') return dir;
  std::string exe = SelfExecutable();
  exe = exe.substr(0, exe.rfind('/'));
  return exe.substr(0, exe.rfind('/')) + "/lib";
}

// The plugins' vGPUs keep their ledger and boards in sealed memory that
// the node's state keeper holds and hands out (node/state_keeper.h), open to
// the containers' processes of any uid: no container can truncate them
// under another (docs/kubernetes.md, "Shared state").
StatusOr<std::unique_ptr<VgpuProvisioner>> SealedStateProvisioner(const std::string& state_dir) {
  if (Status s = core::VgpuStore(state_dir).EnsureRoot(); !s.ok()) return s;
  if (Status s = SecurePodStateDir(state_dir); !s.ok()) return s;
  auto keeper = node::StateKeeperClient::Connect(state_dir, SelfExecutable(), {0666, std::nullopt});
  if (!keeper.ok()) {
    return Status::Error(keeper.status().message() + " (the plugin hands the vGPUs' state out through `gpuslice " +
                         "state-keeper --state-dir " + state_dir + "`; run it beside the plugin, as the manifests do)");
  }
  return NewStoreProvisioner(state_dir, std::move(keeper.value()));
}

struct KubeFlags {
  std::string url;
  std::string token_file;
  std::string ca_file;
  bool disabled = false;
};

void AddKubeFlags(CLI::App* cmd, KubeFlags* flags) {
  cmd->add_option("--kube-api-url", flags->url,
                  "Kubernetes API server (default: in-cluster, from KUBERNETES_SERVICE_HOST/PORT)");
  cmd->add_option("--kube-token-file", flags->token_file,
                  std::string("Bearer token file (default: ") + kServiceAccountDir + "/token)");
  cmd->add_option("--kube-ca-file", flags->ca_file,
                  std::string("CA bundle for the API server (default: ") + kServiceAccountDir + "/ca.crt)");
}

StatusOr<std::unique_ptr<KubeApi>> MakeKubeApi(const KubeFlags& flags) {
  KubeClientConfig config;
  config.server = flags.url;
  config.token_file = flags.token_file;
  config.ca_file = flags.ca_file;
  if (Status s = CompleteFromCluster(config); !s.ok()) return s;
  return NewKubeHttpClient(config);
}

void AddDevicePluginCommand(CLI::App& app) {
  struct Flags {
    DevicePluginOptions options;
    KubeFlags kube;
    std::string inject = "preload";
    std::string policy = "binpack";
    std::string liveness = "pod-resources";
    std::string pod_resources_socket = kDefaultPodResourcesSocket;
    std::string cgroup_root = "/sys/fs/cgroup";
    std::string gpuslice_exe;
    int health_interval_s = 10;
    int reclaim_interval_s = 30;
    int reclaim_grace_s = 60;
    bool no_nvidia_visible_devices = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("device-plugin",
                                     "Serve gpuslice.io/vcore and gpuslice.io/vmemory to the kubelet (runs on each "
                                     "GPU node, see docs/kubernetes.md)");
  cmd->add_option("--node-name", f->options.node_name, "This node's Kubernetes name (default: $NODE_NAME)")
      ->envname("NODE_NAME");
  cmd->add_option("--dra-registry-dir", f->options.dra_registry_dir,
                  "The kubelet's plugin registration directory; refuse to start while gpuslice's DRA plugin serves "
                  "there (empty: skip the check)")
      ->capture_default_str();
  cmd->add_option("--kubelet-dir", f->options.plugin_dir, "The kubelet's device-plugins directory")
      ->capture_default_str();
  cmd->add_option("--state-dir", f->options.state_dir,
                  "vGPU state directory (default: $GPUSLICE_STATE_DIR, else /run/gpuslice)");
  cmd->add_option("--library-dir", f->options.container.library_dir,
                  "Host directory holding libgpuslice-cuda.so and shim/ (default: ../lib beside this binary)");
  cmd->add_option("--inject", f->inject,
                  "How containers load the library: preload (LD_PRELOAD) or libpath (libcuda.so.1 first on "
                  "LD_LIBRARY_PATH)")
      ->check(CLI::IsMember({"preload", "libpath"}))
      ->capture_default_str();
  cmd->add_option("--container-driver-path", f->options.container.container_driver_path,
                  "GPUSLICE_REAL_DRIVER inside containers (empty: let the library search)")
      ->capture_default_str();
  cmd->add_option("--cdi-dir", f->options.container.cdi_dir,
                  "Write each container's CDI spec here and name it in Allocate, for runtimes with CDI (the host's "
                  "/var/run/cdi, mounted at the same path; preload mode only); empty: mounts and env only");
  cmd->add_option("--ld-library-path-rest", f->options.container.ld_library_path_rest,
                  "In libpath mode, what follows the shim on the container's LD_LIBRARY_PATH")
      ->capture_default_str();
  cmd->add_flag("--no-nvidia-visible-devices", f->no_nvidia_visible_devices,
                "Do not set NVIDIA_VISIBLE_DEVICES (when the NVIDIA container runtime is not used)");
  cmd->add_option("--dev-root", f->options.container.dev_root, "Where the host's NVIDIA device nodes are")
      ->capture_default_str();
  cmd->add_option("--proc-root", f->options.proc_root, "The host's /proc (needs hostPID)")->capture_default_str();
  cmd->add_option("--policy", f->policy, "GPU choice when the scheduler made none: binpack or spread")
      ->check(CLI::IsMember({"binpack", "spread"}))
      ->capture_default_str();
  cmd->add_option("--pod-liveness", f->liveness, "How gone pods are found: pod-resources or cgroup")
      ->check(CLI::IsMember({"pod-resources", "cgroup"}))
      ->capture_default_str();
  cmd->add_option("--pod-resources-socket", f->pod_resources_socket, "The kubelet's pod-resources socket")
      ->capture_default_str();
  cmd->add_option("--cgroup-root", f->cgroup_root, "The host's cgroup filesystem")->capture_default_str();
  cmd->add_option("--health-interval", f->health_interval_s, "Seconds between GPU health checks")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--reclaim-interval", f->reclaim_interval_s, "Seconds between looks for gone pods")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--reclaim-grace", f->reclaim_grace_s, "Seconds a new vGPU is never reclaimed")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  cmd->add_option("--gpuslice", f->gpuslice_exe,
                  "The gpuslice binary whose `devices --json` describes the GPUs (default: this one)");
  AddKubeFlags(cmd, &f->kube);

  cmd->callback([f] {
    const char* name = "device-plugin";
    ConfigureLogging(name);
    DevicePluginOptions options = f->options;
    if (options.state_dir.empty()) {
      const char* env = getenv("GPUSLICE_STATE_DIR");
      options.state_dir = env != nullptr && *env != '\0' ? env : "/run/gpuslice";
    }
    if (options.container.library_dir.empty()) options.container.library_dir = DefaultLibraryDir();
    options.container.inject = f->inject == "preload" ? InjectMode::kPreload : InjectMode::kLibraryPath;
    options.container.set_nvidia_visible_devices = !f->no_nvidia_visible_devices;
    options.container.proc_root = options.proc_root;
    options.policy = f->policy == "spread" ? PackingPolicy::kSpread : PackingPolicy::kBinpack;
    options.health_interval = std::chrono::seconds(f->health_interval_s);
    options.reclaim_interval = std::chrono::seconds(f->reclaim_interval_s);
    options.reclaim_grace = std::chrono::seconds(f->reclaim_grace_s);

    DevicePluginParts parts;
    const std::string exe = f->gpuslice_exe.empty() ? SelfExecutable() : f->gpuslice_exe;
    parts.discovery = NewGpuDiscovery(exe, options.node_name, options.state_dir);
    parts.health = NewNvmlHealthSource(exe, options.state_dir);
    if (!TakeOrFail(name, MakeKubeApi(f->kube), &parts.api)) return;
    parts.liveness =
        f->liveness == "cgroup" ? NewCgroupLiveness(f->cgroup_root) : NewPodResourcesLiveness(f->pod_resources_socket);
    if (!TakeOrFail(name, SealedStateProvisioner(options.state_dir), &parts.provisioner)) return;
    ServeUntilTerminated(name, [&] { return DevicePlugin::Start(options, std::move(parts)); });
  });
}

void AddSchedulerExtenderCommand(CLI::App& app) {
  struct Flags {
    ExtenderServerConfig server;
    KubeFlags kube;
    std::string policy = "binpack";
    int reservation_ttl_s = 600;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("scheduler-extender",
                                     "Serve kube-scheduler's extender protocol: filter, prioritize and bind pods that "
                                     "ask for gpuslice resources (see docs/kubernetes.md)");
  cmd->add_option("--listen", f->server.listen, "host:port to serve on")->capture_default_str();
  cmd->add_flag("--allow-remote", f->server.allow_remote,
                "Allow a non-loopback --listen (the protocol has no authentication)");
  cmd->add_option("--url-prefix", f->server.url_prefix, "Path prefix of the verbs (the scheduler's urlPrefix path)")
      ->capture_default_str();
  cmd->add_option("--policy", f->policy, "Packing of GPU shares: binpack or spread")
      ->check(CLI::IsMember({"binpack", "spread"}))
      ->capture_default_str();
  cmd->add_option("--reservation-ttl", f->reservation_ttl_s,
                  "Seconds a bound pod's GPUs stay reserved if its node never reports it")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  AddKubeFlags(cmd, &f->kube);

  cmd->callback([f] {
    const char* name = "scheduler-extender";
    ConfigureLogging(name);
    ExtenderConfig config;
    config.policy = f->policy == "spread" ? PackingPolicy::kSpread : PackingPolicy::kBinpack;
    config.reservation_ttl = std::chrono::seconds(f->reservation_ttl_s);
    std::unique_ptr<KubeApi> api;
    if (!TakeOrFail(name, MakeKubeApi(f->kube), &api)) return;
    Extender extender(config, api.get());
    ServeUntilTerminated(name, [&] { return ExtenderServer::Start(f->server, &extender); });
  });
}

void AddDraPluginCommand(CLI::App& app) {
  struct Flags {
    dra::DraPluginOptions options;
    KubeFlags kube;
    std::string gpuslice_exe;
    int health_interval_s = 10;
    bool no_nvidia_visible_devices = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("dra-plugin",
                                     "Serve the kubelet's Dynamic Resource Allocation API for driver gpu.gpuslice.io: "
                                     "ResourceSlices, vGPUs per claim, CDI specs (see docs/kubernetes.md)");
  cmd->add_option("--node-name", f->options.node_name, "This node's Kubernetes name (default: $NODE_NAME)")
      ->envname("NODE_NAME");
  cmd->add_option("--driver", f->options.driver, "The DRA driver name")->capture_default_str();
  cmd->add_option("--registry-dir", f->options.registry_dir, "The kubelet's plugin registration directory")
      ->capture_default_str();
  cmd->add_option("--plugins-dir", f->options.plugins_dir, "The kubelet's plugins directory (socket in <dir>/<driver>)")
      ->capture_default_str();
  cmd->add_option("--cdi-dir", f->options.cdi_dir, "Where CDI specs are written")->capture_default_str();
  cmd->add_option("--device-plugin-dir", f->options.device_plugin_dir,
                  "The kubelet's device-plugins directory; refuse to start while gpuslice's device plugin serves "
                  "there (empty: skip the check)")
      ->capture_default_str();
  cmd->add_option("--state-dir", f->options.state_dir,
                  "vGPU state directory (default: $GPUSLICE_STATE_DIR, else /run/gpuslice)");
  cmd->add_option("--library-dir", f->options.container.library_dir,
                  "Host directory holding libgpuslice-cuda.so (default: ../lib beside this binary)");
  cmd->add_option("--container-driver-path", f->options.container.container_driver_path,
                  "GPUSLICE_REAL_DRIVER inside containers (empty: let the library search)")
      ->capture_default_str();
  cmd->add_flag("--no-nvidia-visible-devices", f->no_nvidia_visible_devices,
                "Do not set NVIDIA_VISIBLE_DEVICES (when the NVIDIA container runtime is not used)");
  cmd->add_option("--dev-root", f->options.container.dev_root, "Where the host's NVIDIA device nodes are")
      ->capture_default_str();
  cmd->add_option("--proc-root", f->options.container.proc_root, "The host's /proc (needs hostPID)")
      ->capture_default_str();
  cmd->add_option("--health-interval", f->health_interval_s, "Seconds between GPU health checks")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--gpuslice", f->gpuslice_exe,
                  "The gpuslice binary whose `devices --json` describes the GPUs (default: this one)");
  AddKubeFlags(cmd, &f->kube);

  cmd->callback([f] {
    const char* name = "dra-plugin";
    ConfigureLogging(name);
    dra::DraPluginOptions options = f->options;
    if (options.state_dir.empty()) {
      const char* env = getenv("GPUSLICE_STATE_DIR");
      options.state_dir = env != nullptr && *env != '\0' ? env : "/run/gpuslice";
    }
    if (options.container.library_dir.empty()) options.container.library_dir = DefaultLibraryDir();
    options.container.set_nvidia_visible_devices = !f->no_nvidia_visible_devices;
    options.health_interval = std::chrono::seconds(f->health_interval_s);

    dra::DraPluginParts parts;
    const std::string exe = f->gpuslice_exe.empty() ? SelfExecutable() : f->gpuslice_exe;
    parts.discovery = NewGpuDiscovery(exe, options.node_name, options.state_dir);
    parts.health = NewNvmlHealthSource(exe, options.state_dir);
    if (!TakeOrFail(name, MakeKubeApi(f->kube), &parts.api)) return;
    if (!TakeOrFail(name, SealedStateProvisioner(options.state_dir), &parts.provisioner)) return;
    ServeUntilTerminated(name, [&] { return dra::DraPlugin::Start(options, std::move(parts)); });
  });
}

void AddInstallLibraryCommand(CLI::App& app) {
  struct Flags {
    std::string from;
    std::string to;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "install-library", "Copy the library that the plugins mount into containers to the node (init container)");
  cmd->add_option("--from", f->from, "The image's library directory (default: ../lib beside this binary)");
  cmd->add_option("--to", f->to, "The node's library directory, as the plugins' --library-dir")->required();
  cmd->callback([f] {
    const std::string from = f->from.empty() ? DefaultLibraryDir() : f->from;
    if (Status s = InstallLibrary(from, f->to); !s.ok()) {
      cli::ExitCode() = Fail("install-library", s.message());
      return;
    }
    std::cout << "installed the library from " << from << " in " << f->to << "\n";
    cli::ExitCode() = 0;
  });
}

}  // namespace

void AddCommands(CLI::App& app) {
  AddDevicePluginCommand(app);
  AddDraPluginCommand(app);
  AddInstallLibraryCommand(app);
  AddSchedulerExtenderCommand(app);
}

}  // namespace gpuslice::k8s
