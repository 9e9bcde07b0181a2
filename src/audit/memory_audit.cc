#include "audit/memory_audit.h"

#include <signal.h>
#include <sys/stat.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpuslice::audit {
namespace {

// Far more than any real process tree is deep; bounds a walk through a table
// that changes under it.
constexpr int kMaxAncestry = 256;

std::string Mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

class ProcTable final : public ProcessTable {
 public:
  uint32_t ParentOf(uint32_t pid) const override {
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    FILE* f = fopen(path, "r");
    if (f == nullptr) return 0;
    char buf[1024];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
    // read after the last ')'.
    const char* close = nullptr;
    for (const char* p = buf; *p != '\0'; ++p) {
      if (*p == ')') close = p;
    }
    unsigned ppid = 0;
    char state = 0;
    if (close == nullptr || sscanf(close + 1, " %c %u", &state, &ppid) != 2) return 0;
    return ppid;
  }

  std::optional<NamespacedPid> InNamespace(uint32_t pid) const override {
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/ns/pid", pid);
    struct stat st {};
    if (stat(path, &st) != 0) return std::nullopt;
    snprintf(path, sizeof path, "/proc/%u/status", pid);
    FILE* f = fopen(path, "r");
    if (f == nullptr) return std::nullopt;
    char line[256];
    std::optional<NamespacedPid> out;
    while (fgets(line, sizeof line, f) != nullptr) {
      if (strncmp(line, "NSpid:", 6) != 0) continue;
      // "NSpid:\t<in our namespace>\t...\t<in its own>": the last is its own.
      unsigned last = 0;
      for (char* tok = strtok(line + 6, " \t\n"); tok != nullptr; tok = strtok(nullptr, " \t\n")) {
        last = static_cast<unsigned>(strtoul(tok, nullptr, 10));
      }
      if (last != 0) out = NamespacedPid{static_cast<uint64_t>(st.st_ino), last};
      break;
    }
    fclose(f);
    return out;
  }
};

class SignalActions final : public ProcessActions {
 public:
  bool Stop(uint32_t pid) override { return kill(static_cast<pid_t>(pid), SIGSTOP) == 0; }
  bool Continue(uint32_t pid) override { return kill(static_cast<pid_t>(pid), SIGCONT) == 0; }
  bool Kill(uint32_t pid) override { return kill(static_cast<pid_t>(pid), SIGKILL) == 0; }
};

}  // namespace

StatusOr<AuditAction> ParseAuditAction(const std::string& text) {
  if (text == "report") return AuditAction::kReport;
  if (text == "deny") return AuditAction::kDeny;
  if (text == "kill") return AuditAction::kKill;
  return Status::Error("'" + text + "' is not an audit action; write report, deny or kill");
}

const char* AuditActionName(AuditAction action) {
  switch (action) {
    case AuditAction::kReport: return "report";
    case AuditAction::kDeny: return "deny";
    case AuditAction::kKill: return "kill";
  }
  return "?";
}

const char* ViolationKindName(Violation::Kind kind) {
  switch (kind) {
    case Violation::Kind::kUnaccounted: return "unaccounted";
    case Violation::Kind::kOverLimit: return "over_limit";
    case Violation::Kind::kUnmanaged: return "unmanaged";
    case Violation::Kind::kUnattributed:
      return "unattributed";
  }
  return "?";
}

namespace {

std::string What(const Violation& v) {
  switch (v.kind) {
    case Violation::Kind::kUnaccounted:
      return "process " + std::to_string(v.pid) + " of vGPU '" + v.vgpu + "' holds " + Mib(v.used_bytes) + " on GPU " +
             std::to_string(v.gpu_index) + " but is in no ledger of it (it bypassed the gpuslice library)";
    case Violation::Kind::kOverLimit:
      return "vGPU '" + v.vgpu + "' holds " + Mib(v.used_bytes) + " on GPU " + std::to_string(v.gpu_index) +
             ", over its limit and context allowance of " + Mib(v.allowed_bytes) + "; its process " +
             std::to_string(v.pid) + " holds the most that its ledger slot does not show";
    case Violation::Kind::kUnmanaged:
      return "process " + std::to_string(v.pid) + " holds " + Mib(v.used_bytes) + " on GPU " +
             std::to_string(v.gpu_index) + " and belongs to no vGPU";
    case Violation::Kind::kUnattributed:
      return "GPU " + std::to_string(v.gpu_index) + " holds " + Mib(v.used_bytes) +
             " that NVML bills to no compute process, over the allowance of " + Mib(v.allowed_bytes) +
             ": most likely memory an exported file descriptor (cuMemExportToShareableHandle) keeps after the "
             "processes that made it exited (or a graphics process's), for which no vGPU is charged. The "
             "descriptor's holders have /dev/nvidiactl open (ls -l /proc/*/fd); the memory goes when they close it";
  }
  return "";
}

}  // namespace

std::string Describe(const Violation& v) { return What(v) + "; action: " + AuditActionName(v.action); }

std::string DescribeFound(const Violation& v, uint64_t grace_ns) {
  const char* done = v.action == AuditAction::kKill   ? "killed"
                     : v.action == AuditAction::kDeny ? "stopped"
                                                      : "reported";
  char grace[32];
  snprintf(grace, sizeof grace, "%.1f s", static_cast<double>(grace_ns) / 1e9);
  return "found: " + What(v) + "; it is " + done + " if this lasts " + grace;
}

const ProcessTable& SystemProcessTable() {
  static const ProcTable* table = new ProcTable;
  return *table;
}

ProcessActions& SystemProcessActions() {
  static SignalActions* actions = new SignalActions;
  return *actions;
}

std::optional<size_t> MemoryAudit::SessionOf(uint32_t pid, const std::map<uint32_t, size_t>& roots) const {
  for (int depth = 0; pid > 1 && depth < kMaxAncestry; ++depth) {
    const uint32_t parent = table_->ParentOf(pid);
    if (auto it = roots.find(parent); it != roots.end()) return it->second;
    pid = parent;
  }
  return std::nullopt;
}

std::vector<Violation> MemoryAudit::Check(const std::vector<GpuProcess>& processes,
                                          const std::vector<AuditedVgpu>& vgpus, uint64_t now_ns,
                                          const std::map<uint32_t, uint64_t>& device_used) {
  std::map<uint32_t, size_t> roots;
  std::map<uint32_t, size_t> in_ledger;
  for (size_t i = 0; i < vgpus.size(); ++i) {
    for (uint32_t root : vgpus[i].session_roots) roots[root] = i;
    for (const auto& [pid, charged] : vgpus[i].ledger) in_ledger[pid] = i;
  }
  std::map<Key, Violation> found;
  auto open = [&](Violation v) {
    const Key key{v.kind, v.vgpu, v.gpu_index, v.pid};
    found[key] = v;
  };
  // Per (vGPU, GPU): its processes' use there, and who holds the most
  // that its slot does not show.
  struct Use {
    uint64_t used = 0;
    uint32_t processes = 0;
    uint32_t worst_pid = 0;
    int64_t worst_uncharged = INT64_MIN;
  };
  std::map<std::pair<size_t, uint32_t>, Use> use;
  for (const GpuProcess& p : processes) {
    std::optional<size_t> owner;
    if (auto it = in_ledger.find(p.pid); it != in_ledger.end()) {
      owner = it->second;
    } else if (auto root = roots.find(p.pid); root != roots.end()) {
      owner = root->second;  // a session root on the GPU itself, without the library
      open({Violation::Kind::kUnaccounted, vgpus[*owner].name, p.gpu_index, p.pid, p.used_bytes});
    } else if ((owner = SessionOf(p.pid, roots))) {
      open({Violation::Kind::kUnaccounted, vgpus[*owner].name, p.gpu_index, p.pid, p.used_bytes});
    } else {
      open({Violation::Kind::kUnmanaged, "", p.gpu_index, p.pid, p.used_bytes});
      continue;
    }
    Use& u = use[{*owner, p.gpu_index}];
    u.used += p.used_bytes;
    ++u.processes;
    uint64_t charged = 0;
    if (auto l = vgpus[*owner].ledger.find(p.pid); l != vgpus[*owner].ledger.end()) {
      if (auto c = l->second.find(p.gpu_index); c != l->second.end()) charged = c->second;
    }
    const int64_t uncharged = static_cast<int64_t>(p.used_bytes) - static_cast<int64_t>(charged);
    if (uncharged > u.worst_uncharged) {
      u.worst_uncharged = uncharged;
      u.worst_pid = p.pid;
    }
  }
  for (const auto& [where, u] : use) {
    const AuditedVgpu& v = vgpus[where.first];
    auto limit = v.limit_bytes.find(where.second);
    if (limit == v.limit_bytes.end()) continue;
    const uint64_t allowed = limit->second + u.processes * config_.context_allowance_bytes;
    if (u.used > allowed) open({Violation::Kind::kOverLimit, v.name, where.second, u.worst_pid, u.used, allowed});
  }

  std::map<uint32_t, uint64_t> billed;  // per GPU: what NVML bills its processes
  for (const GpuProcess& p : processes) billed[p.gpu_index] += p.used_bytes;
  for (const auto& [gpu, used] : device_used) {
    const uint64_t beyond = used > billed[gpu] ? used - billed[gpu] : 0;
    if (beyond > config_.unattributed_allowance_bytes) {
      open({Violation::Kind::kUnattributed, "", gpu, 0, beyond, config_.unattributed_allowance_bytes});
    }
  }

  std::vector<Violation> now_open;
  std::map<Key, Violation> kept;
  for (auto& [key, v] : found) {
    auto prev = open_.find(key);
    if (prev != open_.end()) {
      v.first_seen_ns = prev->second.first_seen_ns;
      v.acted = prev->second.acted;
    } else {
      v.first_seen_ns = now_ns;
      v.found = true;
    }
    v.action = v.kind == Violation::Kind::kUnattributed ? AuditAction::kReport
               : v.kind == Violation::Kind::kUnmanaged  ? config_.unmanaged_action
                                                        : config_.action;
    if (!v.acted && now_ns - v.first_seen_ns >= config_.grace_ns) {
      v.acted = true;
      ++acted_totals_[v.vgpu];
      if (v.action == AuditAction::kDeny) actions_->Stop(v.pid);
      if (v.action == AuditAction::kKill) actions_->Kill(v.pid);
      now_open.push_back(v);
    } else {
      Violation shown = v;
      shown.acted = false;  // only this pass's actions are reported as acted
      now_open.push_back(shown);
    }
    v.found = false;
    kept.emplace(key, v);
  }
  open_ = std::move(kept);
  return now_open;
}

}  // namespace gpuslice::audit
