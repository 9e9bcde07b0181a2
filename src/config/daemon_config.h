// daemon_config.h — the node daemon's configuration: the struct, and the
// parser of its versioned YAML file (/etc/gpuslice/config.yaml or --config).
//
// Every key is documented in docs/configuration.md; the precedence is CLI
// flag, then environment, then file, then the defaults written below. The
// daemon calls LoadDaemonConfig (or ParseDaemonConfig), then
// ApplyEnvironment, then its own flags, then ValidateDaemonConfig once more.
//
// Errors are one line, `FILE:LINE: KEY: REASON; FIX`, e.g.
//   config.yaml:7: metrics.address: "0.0.0.0:9400" is not a loopback
//   address; set metrics.allow_remote: true to serve other hosts
// Unknown keys are errors, not warnings: a misspelt key would otherwise
// silently leave a default in force.
//
// Pure functions apart from LoadDaemonConfig's file read; thread-safe; they
// allocate. They never throw: yaml-cpp's exceptions are caught inside.
#ifndef GPUSLICE_CONFIG_DAEMON_CONFIG_H_
#define GPUSLICE_CONFIG_DAEMON_CONFIG_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "audit/cap_action.h"
#include "audit/memory_audit.h"
#include "core/status.h"
#include "core/vgpu_layout.h"
#include "policy/timeslice_policy.h"

namespace gpuslice::config {

inline constexpr char kDefaultConfigPath[] = "/etc/gpuslice/config.yaml";
// The only schema version so far; `version:` is required in the file.
inline constexpr int kConfigVersion = 1;

struct DaemonConfig {
  // Where vGPU state lives. Empty: resolved as `gpuslice run` does
  // ($GPUSLICE_STATE_DIR, $XDG_RUNTIME_DIR/gpuslice, /run/gpuslice).
  std::string state_dir;
  struct Socket {
    std::string path = "/run/gpuslice/gpuslice.sock";
    // Group allowed to use the control API besides the owner; empty: owner only.
    std::string group;
  } socket;
  struct Metrics {
    bool enabled = true;
    std::string address = "127.0.0.1:9400";  // host:port, [v6]:port
    // A non-loopback address is refused unless this is true.
    bool allow_remote = false;
  } metrics;
  // Applied to vGPUs created without an explicit value.
  struct Defaults {
    std::optional<uint64_t> memory_bytes;  // unset: the whole GPU
    uint32_t compute_pct = 100;            // 1..100
    core::Priority priority = core::Priority::kBestEffort;
  } defaults;
  policy::TimeslicePolicyConfig timeslices;
  // The node's priority levels, as the YAML document `levels: [...]`
  // (task/task_levels.h; docs/configuration.md); "": the default levels.
  // `gpuslice run/set --priority NAME` and the control API resolve names
  // through them.
  std::string levels_yaml;
  // The memory audit (audit/memory_audit.h): nullopt = off.
  struct Audit {
    std::optional<audit::AuditAction> action = audit::AuditAction::kKill;       // unaccounted, over_limit
    std::optional<audit::AuditAction> unmanaged = audit::AuditAction::kReport;  // GPU processes of no vGPU
    // A process that raises its channel groups' slices above its vGPU's
    // ceiling again after the daemon set them back (daemon/slice_audit.h).
    std::optional<audit::AuditAction> raised_slice = audit::AuditAction::kKill;
    // A process on a GPU with no channel group the slice audit can read.
    std::optional<audit::AuditAction> hidden_groups = audit::AuditAction::kReport;
    // A capped vGPU that NVML sees use more than its compute cap plus
    // over_cap_margin_pct of a GPU while alone there (daemon/cap_audit.h).
    std::optional<audit::CapAction> over_cap = audit::CapAction::kThrottle;
    uint32_t over_cap_margin_pct = 10;
    // Seconds of alone time a verdict judges (daemon/cap_audit.h).
    uint32_t over_cap_window_s = 30;
    uint32_t grace_ms = 1000;
    uint64_t context_allowance_bytes = 1ull << 30;
  } audit;
  // GPU health (daemon/gpu_health.h): a GPU marked unhealthy by a critical
  // XID is healthy again after this long without another; 0 (the default,
  // NVIDIA's device plugin's convention): only `gpuslice devices
  // --clear-health` (or a daemon restart) brings it back.
  struct Health {
    uint32_t xid_quiet_period_s = 0;
  } health;
  // Memory overcommit (node/memory_pressure.h): an allocation that finds its
  // GPU full waits up to wait_ms while the daemon suspends `--suspendable`
  // vGPUs of lower levels; 0 (the default): it fails at once, and nothing is
  // suspended for memory.
  struct MemoryPressure {
    uint32_t wait_ms = 0;
    uint32_t min_run_after_resume_s = 30;
    uint32_t max_suspends_per_minute = 6;
    uint64_t resume_headroom_bytes = 256ull << 20;
    // Admission: the memory limits on one GPU may add up to this percentage
    // of its memory; 0 (the default): not checked.
    uint32_t max_overcommit_pct = 0;
  } memory_pressure;
  // Beside an LC, a best-effort process the driver lists on a GPU stops
  // contending for it once it has run nothing there for this long
  // (daemon/occupancy_watch.h, ProcessActivity); 0: it contends while listed.
  // `timeslices.best_effort.idle_after_ms`.
  uint32_t be_idle_after_ms = 10000;
  uint32_t reap_interval_ms = 200;  // how often dead processes are looked for
  std::string log_level = "info";   // trace, debug, info, warn, error, off
};

// Parses a whole config document. `file_name` only prefixes error messages.
// An empty document (or only comments) is an error: `version: 1` is required.
StatusOr<DaemonConfig> ParseDaemonConfig(std::string_view yaml, const std::string& file_name);

// Reads and parses `path`. A missing or unreadable file is an error naming it.
StatusOr<DaemonConfig> LoadDaemonConfig(const std::string& path);

// Overrides fields from the environment, the middle layer of the precedence:
//   GPUSLICE_STATE_DIR, GPUSLICE_SOCKET, GPUSLICE_SOCKET_GROUP,
//   GPUSLICE_METRICS_ADDRESS, GPUSLICE_LOG (the library's variable too).
// An unset or empty variable changes nothing.
// `getenv` is injectable for tests (default: ::getenv). Values are validated
// as the file's are; errors name the variable.
Status ApplyEnvironment(DaemonConfig& config, const std::function<const char*(const char*)>& getenv = nullptr);

// Checks cross-field rules (e.g. a non-loopback metrics address needs
// allow_remote) and ranges; used after CLI flags are applied. `origin`
// prefixes messages ("--metrics-address", a file name, ...).
Status ValidateDaemonConfig(const DaemonConfig& config, const std::string& origin);

}  // namespace gpuslice::config

#endif  // GPUSLICE_CONFIG_DAEMON_CONFIG_H_
