// memory_audit.h — the backstop no process can fool: what the GPU itself says
// each process holds, checked against the vGPUs' ledgers and limits.
//
// Every other memory check of gpuslice runs inside the application: the
// library charges a ledger slot before each allocation. A process that never
// loads the library (it dropped LD_PRELOAD, or unset GPUSLICE_VGPU_DIR before
// its first CUDA call), or that rewrites its own ledger slot, escapes them.
// The audit does not run in the application. About once a second its owner
// (a `gpuslice run` supervisor for its own vGPU, the daemon for every vGPU it
// sees) gives it the driver's per-process memory (NVML) and the ledgers, and
// it finds:
//   - kUnaccounted: a GPU process of a vGPU's session (a descendant of a
//     session root: a supervisor that made itself the child subreaper, so
//     no descendant can leave its tree while it lives) that is in no ledger
//     of that vGPU;
//   - kOverLimit: a vGPU whose processes on one GPU hold more than its limit
//     there plus a context allowance per process (the driver's own memory
//     for a context, which no allocation call makes and no ledger counts);
//     the process acted on is the one with the most memory its slot has not
//     charged;
//   - kUnmanaged: a GPU process in no vGPU at all (its session root is gone,
//     or it never had one), on a GPU the owner manages;
//   - kUnattributed: a GPU whose used memory exceeds what NVML bills its
//     processes by more than an allowance: memory that outlived every
//     process that made it, held by an exported file descriptor alone
//     (docs/benchmarks.md, "Exported device memory"). No process or vGPU
//     can be named, so it is only ever reported.
// A violation is acted on once it has lasted `grace_ns`: NVML and the
// ledgers are read at different moments, and a process starting up is
// briefly in neither. Actions: report (a log line, a count), deny (SIGSTOP:
// the process keeps its memory but runs nothing until an operator resumes
// or kills it), kill (SIGKILL). Each violation is acted on once.
//
// Not thread-safe: one owner calls Check. Allocates; reads /proc through the
// ProcessTable seam and signals through ProcessActions, so tests script both.
#ifndef GPUSLICE_AUDIT_MEMORY_AUDIT_H_
#define GPUSLICE_AUDIT_MEMORY_AUDIT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/status.h"

namespace gpuslice::audit {

enum class AuditAction { kReport, kDeny, kKill };
// "report", "deny", "kill"; the error names the values.
StatusOr<AuditAction> ParseAuditAction(const std::string& text);
const char* AuditActionName(AuditAction action);

struct AuditConfig {
  AuditAction action = AuditAction::kKill;            // kUnaccounted and kOverLimit
  AuditAction unmanaged_action = AuditAction::kReport;  // kUnmanaged
  uint64_t grace_ns = 1'000'000'000;
  // What the driver keeps per context beyond the allocations a ledger sees
  // (docs/benchmarks.md, "Memory audit", measured it on an H100).
  uint64_t context_allowance_bytes = 1ull << 30;
  // What a GPU may hold beyond its processes' memory before kUnattributed:
  // the driver's own, with room (8 MiB on an H200, its 615 MiB reservation
  // apart: docs/benchmarks.md, "Exported device memory").
  uint64_t unattributed_allowance_bytes = 1ull << 30;
};

// One process's memory on one GPU, as the driver reports it.
struct GpuProcess {
  uint32_t gpu_index = 0;
  uint32_t pid = 0;  // the owner's pid namespace
  uint64_t used_bytes = 0;
};

struct AuditedVgpu {
  std::string name;
  std::map<uint32_t, uint64_t> limit_bytes;  // per GPU index; absent = no limit there
  // Processes in its ledger, and what each has charged per GPU index.
  std::map<uint32_t, std::map<uint32_t, uint64_t>> ledger;
  std::vector<uint32_t> session_roots;  // every descendant belongs to this vGPU
};

class ProcessTable {
 public:
  virtual ~ProcessTable() = default;
  // The parent's pid, or 0 when the process is gone or unreadable.
  virtual uint32_t ParentOf(uint32_t pid) const = 0;
  // The process's pid namespace (the inode of /proc/PID/ns/pid) and its pid
  // there (the last NSpid of /proc/PID/status): how a process of a container
  // knows itself, and so how its ledger slot names it. nullopt when gone.
  struct NamespacedPid {
    uint64_t pid_namespace = 0;
    uint32_t pid = 0;
  };
  virtual std::optional<NamespacedPid> InNamespace(uint32_t pid) const = 0;
};
const ProcessTable& SystemProcessTable();  // /proc/PID/stat

class ProcessActions {
 public:
  virtual ~ProcessActions() = default;
  virtual bool Stop(uint32_t pid) = 0;      // SIGSTOP
  virtual bool Continue(uint32_t pid) = 0;  // SIGCONT
  virtual bool Kill(uint32_t pid) = 0;      // SIGKILL
};
ProcessActions& SystemProcessActions();

struct Violation {
  enum class Kind { kUnaccounted, kOverLimit, kUnmanaged, kUnattributed };
  Kind kind = Kind::kUnaccounted;
  std::string vgpu;  // "" for kUnmanaged and kUnattributed
  uint32_t gpu_index = 0;
  uint32_t pid = 0;  // 0 for kUnattributed
  // The process's (kUnaccounted, kUnmanaged), the vGPU's (kOverLimit) or the
  // GPU's beyond its processes' (kUnattributed) on that GPU.
  uint64_t used_bytes = 0;
  uint64_t allowed_bytes = 0;  // kOverLimit: limit + allowance per process; kUnattributed: its allowance
  uint64_t first_seen_ns = 0;
  bool acted = false;  // acted on in this pass (each violation is acted on once, when its grace is over)
  bool found = false;  // first seen in this pass: its grace starts now
  AuditAction action = AuditAction::kReport;
};
const char* ViolationKindName(Violation::Kind kind);
// One line for logs: what, who, how much, and what was done.
std::string Describe(const Violation& v);
// One line for a violation just found: what, who, how much, and what will
// be done if it lasts `grace_ns`. Owners print it at once, so that an
// escape is told within one audit pass, not only once its grace is over.
std::string DescribeFound(const Violation& v, uint64_t grace_ns);

class MemoryAudit {
 public:
  MemoryAudit(AuditConfig config, const ProcessTable* table, ProcessActions* actions)
      : config_(config), table_(table), actions_(actions) {}

  // One pass over every GPU process. Returns the violations open now, those
  // acted on in this pass with acted = true. A violation that is gone (the
  // process exited or came within its limit) is forgotten. `device_used`:
  // each GPU's used memory (NVML), for kUnattributed; GPUs it lacks are not
  // judged so.
  std::vector<Violation> Check(const std::vector<GpuProcess>& processes, const std::vector<AuditedVgpu>& vgpus,
                               uint64_t now_ns, const std::map<uint32_t, uint64_t>& device_used = {});

  const AuditConfig& config() const { return config_; }
  // Violations acted on so far, per vGPU ("" = unmanaged processes).
  const std::map<std::string, uint64_t>& acted_totals() const { return acted_totals_; }

 private:
  using Key = std::tuple<Violation::Kind, std::string, uint32_t, uint32_t>;  // kind, vGPU, GPU, pid
  // The vGPU whose session `pid` descends from, or nullopt.
  std::optional<size_t> SessionOf(uint32_t pid, const std::map<uint32_t, size_t>& roots) const;

  const AuditConfig config_;
  const ProcessTable* const table_;
  ProcessActions* const actions_;
  std::map<Key, Violation> open_;
  std::map<std::string, uint64_t> acted_totals_;
};

}  // namespace gpuslice::audit

#endif  // GPUSLICE_AUDIT_MEMORY_AUDIT_H_
