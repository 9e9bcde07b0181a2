#include "daemon/daemon.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "core/board_roster.h"
#include "core/vgpu_store.h"
#include "daemon/audit_inputs.h"
#include "daemon/board_sampler.h"
#include "daemon/cap_audit.h"
#include "daemon/cap_throttle.h"
#include "daemon/control_listener.h"
#include "daemon/control_service.h"
#include "daemon/control_socket.h"
#include "daemon/gpu_health.h"
#include "daemon/instance_lock.h"
#include "daemon/memory_pressure_service.h"
#include "daemon/metrics_exporter.h"
#include "daemon/node_audit.h"
#include "daemon/occupancy_watch.h"
#include "daemon/power_cap_enforcer.h"
#include "daemon/process_holds.h"
#include "daemon/slice_audit.h"
#include "daemon/socket_path.h"
#include "daemon/utilization_sampler.h"
#include "metrics/http_server.h"
#include "metrics/registry.h"
#include "node/checkpoint_driver.h"
#include "node/gpu_health_file.h"
#include "node/node_devices.h"
#include "node/node_schedule.h"
#include "node/policy_file.h"
#include "node/schedule_worker.h"
#include "node/state_keeper_client.h"
#include "node/vgpu_manager.h"
#include "port/clock.h"
#include "port/mutex.h"
#include "port/nvml_library.h"

namespace gpuslice::daemon {
namespace {

constexpr int kStartError = 2;
constexpr auto kSampleInterval = std::chrono::seconds(1);
// How often memory overcommit looks for processes waiting for room on a full
// GPU (daemon/memory_pressure_service.h): a small part of a suspend's time.
constexpr auto kMemoryPressureInterval = std::chrono::milliseconds(50);

int Fail(const std::string& message) {
  spdlog::error("{}", message);
  return kStartError;
}

// The housekeeping thread: GC and XID events every reap interval; compute,
// energy and LC latency sampling, then the power caps, every second. Stops
// (and joins) on destruction.
class Housekeeper {
 public:
  Housekeeper(node::VgpuManager* manager, UtilizationSampler* sampler, NodeAudit* audit, OccupancyWatch* occupancy,
              SliceAudit* slices, ComputeCapAudit* caps, MetricsExporter* exporter, node::StateKeeperClient* keeper,
              std::chrono::milliseconds interval, port::NvmlLibrary* nvml, GpuHealth* health, PowerCapEnforcer* power)
      : manager_(manager),
        sampler_(sampler),
        audit_(audit),
        occupancy_(occupancy),
        slices_(slices),
        caps_(caps),
        exporter_(exporter),
        keeper_(keeper),
        interval_(interval),
        nvml_(nvml),
        health_(health),
        power_(power) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Housekeeper() {
    {
      port::MutexLock lock(&mu_);
      stop_ = true;
    }
    cv_.NotifyAll();
    thread_.join();
  }

 private:
  void Loop() {
    auto next_sample = std::chrono::steady_clock::now();
    port::MutexLock lock(&mu_);
    while (!stop_) {
      lock.Unlock();
      // A keeper that died is replaced, and given every vGPU's state, within
      // a reap interval: until then new processes of those vGPUs are refused
      // device memory.
      if (Status s = keeper_->Check(); !s.ok()) spdlog::error("state keeper: {}", s.message());
      const node::GcResult gc = manager_->CollectGarbage();
      if (exporter_ != nullptr && gc.reaped_processes > 0) exporter_->CountReaped(gc.reaped_processes);
      if (health_ != nullptr && nvml_ != nullptr) {
        // Only what is queued (timeout 0): this thread must not block here.
        // NVML is used from this thread only, so the sampler is never raced.
        for (int i = 0; i < 64; ++i) {
          auto e = nvml_->NextXid(0);
          if (!e) break;
          if (e->gpu_index) {
            health_->OnXid(*e->gpu_index, e->xid, GpuHealth::Clock::now());
          } else {
            // As NVIDIA's device plugin does: an XID of no known GPU may be
            // any GPU's, so it counts against every one.
            for (const auto& g : manager_->devices().gpus) health_->OnXid(g.index, e->xid, GpuHealth::Clock::now());
          }
        }
        health_->Tick(GpuHealth::Clock::now());
      }
      // Between the passes of every second, while a tenant's group was
      // just set back: acted on within a reap interval if it raises it again.
      if (slices_ != nullptr && std::chrono::steady_clock::now() < next_sample &&
          slices_->Watching(port::MonotonicNanos())) {
        AuditSlices();
      }
      if (std::chrono::steady_clock::now() >= next_sample) {
        sampler_->Sample();
        if (caps_ != nullptr) AuditCaps();
        if (power_ != nullptr) power_->Pass(std::chrono::steady_clock::now());
        manager_->SampleLcLatency();
        if (audit_ != nullptr) audit_->Pass(port::MonotonicNanos());
        occupancy_->Pass(port::MonotonicNanos());
        if (slices_ != nullptr) AuditSlices();
        next_sample = std::chrono::steady_clock::now() + kSampleInterval;
      }
      lock.Lock();
      cv_.WaitFor(&mu_, interval_, [this] {
        mu_.AssertHeld();
        return stop_;
      });
    }
  }

  // Every vGPU process's channel groups against its slice ceiling.
  void AuditSlices() {
    std::vector<uint32_t> indices;
    for (const port::GpuInfo& g : manager_->devices().gpus) indices.push_back(g.index);
    auto listed = GpuProcessesOf(nvml_, indices);
    std::vector<node::VgpuView> views;
    if (listed.ok() && manager_->List("", &views).ok()) slices_->Pass(views, listed.value(), port::MonotonicNanos());
  }

  // Every capped vGPU's measured use against its cap, from the samples the
  // sampler just took.
  void AuditCaps() {
    std::vector<node::VgpuView> views;
    if (!manager_->List("", &views).ok()) return;
    for (const OverCap& over : caps_->Pass(sampler_->last_pass(), views, port::MonotonicNanos())) {
      if (!over.found && !(over.at_floor && !told_at_floor_.count(over.vgpu))) continue;
      if (over.at_floor) told_at_floor_.insert(over.vgpu);
      spdlog::warn("compute-cap audit: {}", Describe(over));
      if (exporter_ != nullptr && over.found) exporter_->CountViolation(over.vgpu, "over_cap");
    }
  }

  node::VgpuManager* const manager_;
  UtilizationSampler* const sampler_;
  NodeAudit* const audit_;
  OccupancyWatch* const occupancy_;
  SliceAudit* const slices_;
  ComputeCapAudit* const caps_;
  std::set<std::string> told_at_floor_;  // vGPUs whose throttle was said to be at its floor
  MetricsExporter* const exporter_;
  node::StateKeeperClient* const keeper_;
  const std::chrono::milliseconds interval_;
  port::NvmlLibrary* const nvml_;
  GpuHealth* const health_;
  PowerCapEnforcer* const power_;
  port::Mutex mu_;
  port::CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

void SetLogLevel(const std::string& level) {
  // stderr: the journal takes it under systemd, and stdout stays clean.
  spdlog::set_default_logger(spdlog::stderr_color_mt("gpuslice-daemon"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ gpuslice-daemon: %v");
  spdlog::set_level(spdlog::level::from_str(level));
}


// Unhealthy GPUs outlive the daemon (node/gpu_health_file.h): marked again
// at start, by UUID, and stored at every change.
void RestoreGpuHealth(const std::string& state_dir, const node::NodeDevices& devices, GpuHealth* health) {
  auto stored = node::LoadUnhealthyGpus(state_dir);
  if (!stored.ok()) {
    spdlog::error("{}; every GPU starts healthy", stored.status().message());
    return;
  }
  for (const node::UnhealthyGpu& u : stored.value()) {
    auto g = std::find_if(devices.gpus.begin(), devices.gpus.end(),
                          [&](const port::GpuInfo& gpu) { return gpu.uuid_text == u.uuid; });
    if (g == devices.gpus.end()) {
      spdlog::warn("{} was marked unhealthy (XID {}) and is not on this node any more; forgotten", u.uuid, u.xid);
      continue;
    }
    health->Restore(g->index, u.xid, GpuHealth::Clock::from_time_t(static_cast<std::time_t>(u.since_unix_seconds)));
  }
}

void StoreGpuHealth(const std::string& state_dir, const node::NodeDevices& devices,
                    const std::map<uint32_t, GpuHealth::State>& snapshot) {
  std::vector<node::UnhealthyGpu> unhealthy;
  for (const auto& [index, state] : snapshot) {
    if (state.healthy) continue;
    for (const port::GpuInfo& g : devices.gpus) {
      if (g.index != index) continue;
      unhealthy.push_back({g.uuid_text, state.last_xid,
                           static_cast<int64_t>(GpuHealth::Clock::to_time_t(state.last_critical))});
      break;
    }
  }
  if (Status s = node::StoreUnhealthyGpus(state_dir, unhealthy); !s.ok()) {
    spdlog::warn("{}; a restarted daemon would offer the unhealthy GPUs again", s.message());
  }
}
}  // namespace

int RunDaemon(const config::DaemonConfig& config) {
  // Stop signals are taken by sigwait at the end; block them before any
  // thread starts (the schedule worker, metrics, gRPC) so that every thread
  // inherits the mask and none can die of a SIGTERM meant for the sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  SetLogLevel(config.log_level);
  const std::string state_dir = config.state_dir.empty() ? core::VgpuStore::DefaultRoot() : config.state_dir;
  // A socket path left at its built-in default follows the state directory
  // (socket_path.h), so a daemon with its own state directory never collides
  // with the system one.
  const std::string socket_path =
      config.socket.path == config::DaemonConfig{}.socket.path ? DefaultSocketPath(state_dir) : config.socket.path;

  std::optional<gid_t> group;
  if (!config.socket.group.empty()) {
    auto gid = LookupGroup(config.socket.group);
    if (!gid.ok()) return Fail(gid.status().message());
    group = gid.value();
  }
  // Pods' vGPU directories are open to every uid (k8s/pod_state_dir.h):
  // opened to a group, this directory would let its users reach them.
  std::error_code probe;
  if (group && std::filesystem::exists(state_dir + "/" + core::kPodsMarker, probe)) {
    return Fail("the state directory " + state_dir + " holds Kubernetes pods' vGPUs, which socket.group '" +
                config.socket.group +
                "' would let its users reach; give the daemon a state_dir of its own, or no "
                "socket.group");
  }
  std::error_code ec;
  std::filesystem::create_directories(state_dir + "/vgpus", ec);
  if (ec) {
    return Fail("cannot create the state directory " + state_dir + ": " + ec.message() +
                "; set state_dir (or GPUSLICE_STATE_DIR) to a writable directory");
  }
  // Group members reach the socket and their vGPUs' files through the state
  // directory, but may not list it.
  chmod(state_dir.c_str(), group ? 0710 : 0700);
  if (group && chown(state_dir.c_str(), static_cast<uid_t>(-1), *group) != 0) {
    return Fail("cannot give " + state_dir + " to group " + config.socket.group +
                "; run the daemon as root or as a member of that group");
  }
  auto instance = InstanceLock::Acquire(state_dir);
  if (!instance.ok()) return Fail(instance.status().message());
  if (Status s = PrepareSocketPath(socket_path); !s.ok()) return Fail(s.message());

  auto nvml = port::NvmlLibrary::Open();
  if (!nvml.ok()) return Fail(nvml.status().message());
  auto devices = node::DiscoverNodeDevices(*nvml.value());
  if (!devices.ok()) return Fail(devices.status().message());
  for (const auto& g : devices->gpus) {
    spdlog::info("GPU {}: {} {} ({} MiB, {})", g.index, g.name, g.uuid_text, g.memory_total_bytes >> 20,
                 g.pci_bus_id.empty() ? "no PCI id" : g.pci_bus_id);
  }

  // Every vGPU this daemon makes keeps its ledger and boards in sealed
  // memory held by the state keeper, so no tenant can truncate them under
  // anyone (core/state_handout.h). The keeper outlives this process: a
  // restarted daemon finds it, with everything it held.
  auto keeper = node::StateKeeperClient::Connect(state_dir, "/proc/self/exe", {group ? 0660u : 0600u, group});
  if (!keeper.ok()) return Fail(keeper.status().message());
  // Its own descriptor of every vGPU's state, to hand a new keeper if this
  // one dies.
  keeper.value()->Adopt();
  core::VgpuStore store(state_dir);
  store.set_state_publisher(keeper.value().get());
  const policy::TimeslicePolicyConfig timeslices = config.timeslices;
  // Standalone commands (no daemon answering) schedule with these constants.
  if (Status s = node::StorePolicyConfig(state_dir, timeslices); !s.ok()) return Fail(s.message());
  // ... and resolve `--priority NAME` through these levels.
  if (Status s = node::StoreLevels(state_dir, config.levels_yaml); !s.ok()) return Fail(s.message());
  // ... and give the Kubernetes plugins' vGPUs its overcommit wait.
  if (Status s = node::StoreMemoryWait(state_dir, config.memory_pressure.wait_ms); !s.ok()) return Fail(s.message());
  auto levels = node::LoadLevels(state_dir);
  if (!levels.ok()) return Fail(levels.status().message());
  // Which vGPUs have a process on each GPU (OccupancyWatch, below): beside
  // an LC, the schedule counts only those as contenders.
  node::OccupancyCell occupancy;
  node::ScheduleWorker schedule(node::ScheduleWorker::NodeSchedule(store, timeslices, &occupancy));
  node::ManagerOptions options;
  options.default_memory_bytes = config.defaults.memory_bytes;
  options.default_compute_pct = config.defaults.compute_pct;
  options.default_priority = config.defaults.priority;
  options.levels = levels.value();
  options.group = group;
  options.memory_wait_ms = config.memory_pressure.wait_ms;
  options.max_memory_overcommit_pct = config.memory_pressure.max_overcommit_pct;
  node::VgpuManager manager(store, &devices.value(), &schedule, options);
  const size_t adopted = manager.Adopt();
  // The checkpoint API (suspend/resume). Opened once; without it the rest
  // of the daemon serves, and a suspend says why it cannot.
  std::string no_checkpoint;
  std::unique_ptr<node::CheckpointDriver> checkpoint = node::OpenCheckpointDriver(&no_checkpoint);
  if (checkpoint == nullptr) spdlog::info("suspend/resume unavailable: {}", no_checkpoint);
  manager.SetCheckpointDriver(checkpoint.get(), no_checkpoint);
  // Before serving: a vGPU a killed daemon left mid-suspend runs again.
  if (const size_t recovered = manager.RecoverSuspends(); recovered > 0) {
    spdlog::warn("recovered {} vGPU(s) from an interrupted suspend or resume", recovered);
  }

  DaemonIdentity identity;
  identity.pid = static_cast<uint32_t>(getpid());
  identity.version = "0.1.0";
  identity.start_time_unix_seconds = static_cast<int64_t>(time(nullptr));
  identity.state_dir = state_dir;
  identity.socket_path = socket_path;

  GpuUsageMeter usage;
  GpuHealth health(std::chrono::seconds(config.health.xid_quiet_period_s));
  RestoreGpuHealth(state_dir, devices.value(), &health);
  health.OnChange([&state_dir, &devices](const std::map<uint32_t, GpuHealth::State>& snapshot) {
    StoreGpuHealth(state_dir, devices.value(), snapshot);
  });
  if (Status s = nvml.value()->WatchXids(); !s.ok()) spdlog::warn("{}", s.message());
  metrics::Registry registry;
  std::unique_ptr<metrics::MetricsHttpServer> metrics_server;
  std::optional<MetricsExporter> exporter;
  if (config.metrics.enabled) {
    auto e = MetricsExporter::Create(&registry, &manager, identity.start_time_unix_seconds, &usage, &health);
    if (!e.ok()) return Fail(e.status().message());
    exporter.emplace(std::move(e.value()));
    metrics::HttpServerOptions http;
    http.address = config.metrics.address;
    http.allow_remote = config.metrics.allow_remote;
    metrics_server = std::make_unique<metrics::MetricsHttpServer>(&registry, http);
    if (Status s = metrics_server->Start(); !s.ok()) return Fail("metrics: " + s.message());
    identity.metrics_address = metrics_server->bound_address();
  }

  // The daemon accepts connections itself, to know who calls
  // (control_listener.h), and hands each to gRPC.
  auto listener = ControlListener::Listen(socket_path);
  if (!listener.ok()) return Fail(listener.status().message());
  ControlService service(&manager, &devices.value(), &identity, &usage, &health);
  ControlListener* callers = listener.value().get();
  service.set_caller_source([callers](const grpc::ServerContext& context) -> std::optional<uid_t> {
    const std::optional<ControlListener::Caller> caller = callers->CallerOf(context);
    if (!caller) return std::nullopt;
    return caller->uid;
  });
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    unlink(socket_path.c_str());
    return Fail("cannot start the control API's gRPC server");
  }
  if (Status s = RestrictSocket(socket_path, group); !s.ok()) {
    server->Shutdown();
    unlink(socket_path.c_str());
    return Fail(s.message());
  }

  // Which vGPU runs, from the boards, while paced vGPUs share a GPU.
  std::vector<BoardSampler::Gpu> board_gpus;
  for (const auto& g : devices->gpus) board_gpus.push_back({g.index, g.uuid});
  node::StateKeeperClient* board_source = keeper.value().get();
  BoardSampler boards(
      board_gpus, [board_source](const core::GpuUuid& uuid) { return board_source->MapBoard(uuid); },
      state_dir + "/" + core::kRosterDirName + "/" + core::kRosterFileName, timeslices.be_shares);
  UtilizationSampler sampler(nvml.value().get(), &manager, &usage, &boards);
  PowerCapEnforcer power_caps(&usage, &manager);
  // Who holds which tenant process stopped: an audit's deny outlasts the
  // cap throttle's duty cycle (process_holds.h).
  ProcessHolds holds(&audit::SystemProcessActions(), ProcessStartTicks, state_dir + "/audit-denied");
  std::optional<NodeAudit> audit;
  if (config.audit.action || config.audit.unmanaged) {
    audit::AuditConfig c;
    // An action that is off still has its violations found; they are only reported.
    c.action = config.audit.action.value_or(audit::AuditAction::kReport);
    c.unmanaged_action = config.audit.unmanaged.value_or(audit::AuditAction::kReport);
    c.grace_ns = static_cast<uint64_t>(config.audit.grace_ms) * 1'000'000;
    c.context_allowance_bytes = config.audit.context_allowance_bytes;
    MetricsExporter* counts = exporter ? &*exporter : nullptr;
    audit.emplace(c, nvml.value().get(), &manager, &audit::SystemProcessTable(), holds.for_audits(),
                  [counts](const audit::Violation& v) {
                    if (counts != nullptr) counts->CountViolation(v.vgpu, audit::ViolationKindName(v.kind));
                  });
  }
  // Memory overcommit: its own thread (a suspend blocks for seconds) and its
  // own NVML handle (NvmlLibrary is one thread's at a time).
  std::unique_ptr<port::NvmlLibrary> pressure_nvml;
  std::optional<MemoryPressureService> pressure;
  if (config.memory_pressure.wait_ms > 0) {
    auto opened = port::NvmlLibrary::Open();
    if (!opened.ok()) return Fail("memory_pressure: " + opened.status().message());
    pressure_nvml = std::move(opened.value());
    node::MemoryPressureOptions o;
    o.min_run_after_resume = std::chrono::seconds(config.memory_pressure.min_run_after_resume_s);
    o.max_suspends_per_minute = config.memory_pressure.max_suspends_per_minute;
    o.resume_headroom_bytes = config.memory_pressure.resume_headroom_bytes;
    const std::vector<port::GpuInfo> gpus = devices->gpus;
    port::NvmlLibrary* nvml_for_pressure = pressure_nvml.get();
    pressure.emplace(
        &manager,
        [gpus, nvml_for_pressure] {
          std::map<std::string, uint64_t> free;
          for (const port::GpuInfo& g : gpus) {
            if (auto bytes = nvml_for_pressure->FreeMemoryBytes(g.index)) free[g.uuid_text] = *bytes;
          }
          return free;
        },
        o, kMemoryPressureInterval);
    spdlog::info(
        "memory overcommit on: a full GPU's allocations wait up to {} ms while --suspendable vGPUs of lower "
        "levels are suspended",
        config.memory_pressure.wait_ms);
  }
  OccupancyWatch occupancy_watch(nvml.value().get(), &manager, &audit::SystemProcessTable(), &occupancy, &schedule,
                                 uint64_t{config.be_idle_after_ms} * 1'000'000);
  // Tenants' channel groups held to their slice ceilings (slice_audit.h),
  // through RM controls on their own descriptors.
  static rm::SystemRmIoctl rm_ioctl(&::ioctl);
  std::optional<SliceAudit> slice_audit;
  if (config.audit.raised_slice || config.audit.hidden_groups) {
    MetricsExporter* counts = exporter ? &*exporter : nullptr;
    // An action that is off for raised slices still sets them back, as
    // report does; `off` for both turns the audit off.
    SliceAuditActions actions{config.audit.raised_slice.value_or(audit::AuditAction::kReport),
                              config.audit.hidden_groups};
    slice_audit.emplace(actions, &SystemTenantDescriptors(), &rm_ioctl, &audit::SystemProcessTable(),
                        holds.for_audits(), [counts](const std::string& vgpu, const char* kind) {
                          if (counts != nullptr) counts->CountViolation(vgpu, kind);
                        });
  }
  // Capped vGPUs held to their caps from outside (cap_audit.h). First, what
  // a daemon that died mid-throttle left stopped runs again, unless an audit
  // denied it (process_holds.h).
  const std::string throttle_leftovers = state_dir + "/cap-throttle";
  if (int n = CapThrottle::ContinueLeftovers(throttle_leftovers, holds.for_throttle()); n > 0) {
    spdlog::warn("continued {} process(es) a previous daemon's compute-cap throttle left stopped", n);
  }
  std::optional<CapThrottle> cap_throttle;
  std::optional<ComputeCapAudit> cap_audit;
  if (config.audit.over_cap) {
    CapAuditConfig c;
    c.action = *config.audit.over_cap;
    c.margin = config.audit.over_cap_margin_pct / 100.0;
    c.window_ns = uint64_t{config.audit.over_cap_window_s} * 1'000'000'000;
    if (c.action == audit::CapAction::kThrottle) cap_throttle.emplace(holds.for_throttle(), throttle_leftovers);
    cap_audit.emplace(c, &audit::SystemProcessTable(), holds.for_audits(), cap_throttle ? &*cap_throttle : nullptr,
                      MapsLedgerOf);
  }
  std::optional<Housekeeper> housekeeper;
  housekeeper.emplace(&manager, &sampler, audit ? &*audit : nullptr, &occupancy_watch,
                      slice_audit ? &*slice_audit : nullptr, cap_audit ? &*cap_audit : nullptr,
                      exporter ? &*exporter : nullptr, keeper.value().get(),
                      std::chrono::milliseconds(std::max<uint32_t>(config.reap_interval_ms, 10)), nvml.value().get(),
                      &health, &power_caps);
  // Last: no return between here and the end leaves the loop running
  // against a server that is gone.
  listener.value()->Start(server.get());
  spdlog::info("serving on unix:{} (state {}, {} GPU(s), {} vGPU(s) adopted, shares by {}, {} turns{}{})", socket_path,
               state_dir, devices->gpus.size(), adopted, policy::ShareModeName(timeslices.be_shares),
               policy::TurnStyleName(timeslices.be_turns),
               identity.metrics_address.empty() ? "" : ", metrics on http://",
               identity.metrics_address.empty() ? "" : identity.metrics_address + "/metrics");

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("stopping on signal {}", signal_number);
  listener.value()->Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  housekeeper.reset();
  pressure.reset();
  if (metrics_server) metrics_server->Stop();
  unlink(socket_path.c_str());
  return 0;
}

}  // namespace gpuslice::daemon
