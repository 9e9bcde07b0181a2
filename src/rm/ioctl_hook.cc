#include "rm/ioctl_hook.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <mutex>

#include "port/log.h"
#include "rm/got_patch.h"

namespace gpuslice::rm {
namespace {

std::atomic<void*> g_original{nullptr};     // what libcuda's patched import called
std::atomic<void*> g_export_next{nullptr};  // what the exported ioctl forwards to
std::atomic<bool> g_installed{false};
std::mutex g_install_mutex;  // process-local; install only
TsgRegistry g_registry;
__thread int t_device_hint = -1;
std::atomic<uint64_t> g_ioctls{0};
std::atomic<uint64_t> g_rm_allocs{0};
const void* g_exported_hook = nullptr;  // set under g_install_mutex

int CallOriginal(int fd, unsigned long request, void* arg) {
  void* fn = g_original.load(std::memory_order_acquire);
  // Never reached before the original is stored (PatchImport's order); the
  // raw system call is only a guard against a null call.
  if (__builtin_expect(fn == nullptr, 0)) return static_cast<int>(syscall(SYS_ioctl, fd, request, arg));
  return reinterpret_cast<IoctlFn>(fn)(fd, request, arg);
}

std::atomic<GroupsChanged> g_groups_observer{nullptr};

// Looks at what an ioctl made or freed, after it returned.
void AfterIoctl(int fd, unsigned long request, void* arg, int rc) {
  g_ioctls.fetch_add(1, std::memory_order_relaxed);
  // Only the two escapes that make and free objects are looked at; every
  // other ioctl costs one compare.
  if (IoctlType(request) != kIoctlMagic || (IoctlNr(request) != kEscRmAlloc && IoctlNr(request) != kEscRmFree)) return;
  const int saved = errno;
  if (IoctlNr(request) == kEscRmAlloc) {
    const uint64_t n = g_rm_allocs.fetch_add(1, std::memory_order_relaxed);
    // GPUSLICE_LOG=debug shows the first allocations as the driver made them.
    if (n < 64 && arg != nullptr && IoctlSize(request) == sizeof(Nvos64) && port::LogEnabled(port::LogLevel::kDebug)) {
      const auto* a = static_cast<const Nvos64*>(arg);
      port::Log(port::LogLevel::kDebug, "RM alloc fd %d rc %d class 0x%x handle 0x%x status 0x%x params %u B", fd, rc,
                a->hClass, a->hObjectNew, a->status, a->paramsSize);
    }
  }
  const uint64_t epoch = g_registry.epoch();
  g_registry.Observe(fd, request, arg, rc, t_device_hint);
  if (g_registry.epoch() != epoch) {
    if (const GroupsChanged observer = g_groups_observer.load(std::memory_order_acquire)) observer();
  }
  errno = saved;
}

// Scheduling controls refused, and slices rewritten, so far: each kind is
// logged once.
std::atomic<uint64_t> g_refused{0};
std::atomic<uint64_t> g_rewritten{0};      // the driver's own
std::atomic<uint64_t> g_app_rewritten{0};  // the application's
std::atomic<SliceAdvisor> g_slice_advisor{nullptr};
// The rewrite this thread's SET_TIMESLICE in flight carries (RewriteSlice,
// SettleRewrittenSlice).
struct Rewrite {
  bool pending = false;
  int device = -1;
  uint64_t passed = 0;
};
__thread Rewrite t_rewrite;

// The executable code of the NVIDIA driver's own libraries (libcuda*,
// libnvidia-*), where an ioctl may come from unquestioned. Appended to,
// never changed: an entry is written, then published by the count.
struct CodeRange {
  uintptr_t begin, end;
};
constexpr int kMaxDriverRanges = 64;
CodeRange g_driver_code[kMaxDriverRanges];
std::atomic<int> g_driver_code_count{0};
std::mutex g_driver_code_mutex;  // process-local; writers only

bool IsNvidiaLibrary(const dl_phdr_info* info);

int NoteDriverCodeOf(dl_phdr_info* info, size_t, void*) {
  if (!IsNvidiaLibrary(info)) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    const CodeRange r{info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz};
    const int n = g_driver_code_count.load(std::memory_order_relaxed);
    bool known = false;
    for (int k = 0; k < n; ++k) known = known || (g_driver_code[k].begin == r.begin && g_driver_code[k].end == r.end);
    if (known || n == kMaxDriverRanges) continue;
    g_driver_code[n] = r;
    g_driver_code_count.store(n + 1, std::memory_order_release);
  }
  return 0;
}

void NoteDriverCode() {
  std::lock_guard<std::mutex> lock(g_driver_code_mutex);
  dl_iterate_phdr(&NoteDriverCodeOf, nullptr);
}

bool InDriverCode(const void* address) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  const int n = g_driver_code_count.load(std::memory_order_acquire);
  for (int k = 0; k < n; ++k) {
    if (a >= g_driver_code[k].begin && a < g_driver_code[k].end) return true;
  }
  return false;
}

// A SET_TIMESLICE `c` on descriptor `fd`: on one of the process's compute
// channel groups, its value becomes the advisor's. Returns whether it did.
bool RewriteSlice(int fd, Nvos54* c, bool from_driver) {
  const SliceAdvisor advisor = g_slice_advisor.load(std::memory_order_acquire);
  if (advisor == nullptr || c->params == 0 || c->paramsSize < sizeof(uint64_t)) return false;
  TsgRef tsgs[TsgRegistry::kCapacity];
  const uint32_t n = g_registry.Snapshot(tsgs, TsgRegistry::kCapacity);
  for (uint32_t i = 0; i < n; ++i) {
    const TsgRef& t = tsgs[i];
    if (t.fd != fd || t.client != c->hClient || t.handle != c->hObject) continue;
    if (t.engine_type != kEngineTypeGraphics) return false;
    const uint64_t want = advisor(t.device);
    if (want == 0) return false;
    auto* value = reinterpret_cast<uint64_t*>(static_cast<uintptr_t>(c->params));
    std::atomic<uint64_t>& count = from_driver ? g_rewritten : g_app_rewritten;
    if (count.fetch_add(1, std::memory_order_relaxed) == 0) {
      const int saved = errno;
      port::Log(from_driver ? port::LogLevel::kInfo : port::LogLevel::kWarn,
                "%s set channel group 0x%x's timeslice to %llu us; passed on as %llu us, the vGPU's%s",
                from_driver ? "the driver" : "this process", c->hObject, static_cast<unsigned long long>(*value),
                static_cast<unsigned long long>(want),
                from_driver ? "" : " (its channel groups' scheduling is gpuslice's: docs/design.md, \"Threat model\")");
      errno = saved;
    }
    *value = want;
    t_rewrite = {true, t.device, want};
    return true;
  }
  return false;
}

// A rewritten SET_TIMESLICE is on its way to the driver with the advice it
// read. The applier stores a new slice before it sets it, so a pass that
// ran meanwhile (an LC has just come) set the new one first, and this SET,
// landing after, would put the old one back until the pass's next check
// (500 ms later): a BE group beside a live LC at 10 ms. Once the SET has
// returned, it is made again while the advice has moved since, a few times
// at most (each round needs another pass to land in the gap). The caller
// sees the first call's result. `next`: where the SET went (null: the
// system call).
void SettleRewrittenSlice(int fd, unsigned long request, Nvos54* c, int rc, IoctlFn next) {
  if (!t_rewrite.pending) return;
  t_rewrite.pending = false;
  const SliceAdvisor advisor = g_slice_advisor.load(std::memory_order_acquire);
  if (advisor == nullptr || rc != 0 || c->status != kNvOk) return;
  auto* value = reinterpret_cast<uint64_t*>(static_cast<uintptr_t>(c->params));
  const int saved = errno;
  for (int round = 0; round < 3; ++round) {
    const uint64_t now = advisor(t_rewrite.device);
    if (now == 0 || now == t_rewrite.passed) break;
    *value = now;
    t_rewrite.passed = now;
    if (next != nullptr) {
      next(fd, request, c);
    } else {
      syscall(SYS_ioctl, fd, request, c);
    }
  }
  c->status = kNvOk;
  errno = saved;
}

// An RM control that changes how one of the process's channel groups is
// scheduled (its slice, runlist interleave or realtime), which is gpuslice's
// to set. A SET_TIMESLICE on one of its compute groups passes with the
// vGPU's slice in it, whoever made it: libcuda 580 sets its new compute
// group's slice while it makes a context and fails the context if that is
// refused (docs/gpu-facts.md), so nothing here refuses what may be the
// driver's. Any other such control passes only from the driver's own code
// (`caller` in it, or null: libcuda's patched import); made by the
// application, it is refused as RM refuses an unprivileged caller, without
// reaching the driver: returns true. gpuslice's own controls never pass
// here (DriverIoctl). Costs one compare for every ioctl but RM controls.
bool FilterSchedulingControl(int fd, unsigned long request, void* arg, const void* caller) {
  if (IoctlType(request) != kIoctlMagic || IoctlNr(request) != kEscRmControl || arg == nullptr ||
      IoctlSize(request) != sizeof(Nvos54)) {
    return false;
  }
  auto* c = static_cast<Nvos54*>(arg);
  if (c->cmd != kCtrlSetTimeslice && c->cmd != kCtrlSetInterleaveLevel && c->cmd != kCtrlMakeRealtime) return false;
  bool from_driver = caller == nullptr || InDriverCode(caller);
  if (!from_driver) {
    NoteDriverCode();  // a driver library loaded since we last looked (rare: these controls are)
    from_driver = InDriverCode(caller);
  }
  if (c->cmd == kCtrlSetTimeslice && RewriteSlice(fd, c, from_driver)) return false;
  if (from_driver) return false;
  c->status = kNvErrInsufficientPermissions;
  if (g_refused.fetch_add(1, std::memory_order_relaxed) == 0) {
    const int saved = errno;
    port::Log(port::LogLevel::kWarn,
              "refused this process's RM control 0x%x on channel group 0x%x: its channel groups' scheduling is "
              "gpuslice's (docs/design.md, \"Threat model\")",
              c->cmd, c->hObject);
    errno = saved;
  }
  return true;
}

int HookedIoctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  FilterSchedulingControl(fd, request, arg, nullptr);  // only the driver's imports lead here
  const int rc = CallOriginal(fd, request, arg);
  SettleRewrittenSlice(fd, request, static_cast<Nvos54*>(arg), rc,
                       reinterpret_cast<IoctlFn>(g_original.load(std::memory_order_acquire)));
  AfterIoctl(fd, request, arg, rc);
  return rc;
}

// Our own controls go where libcuda's ioctls go: its import's original when
// that was patched, else the ioctl after our exported one.
class OriginalIoctl final : public RmIoctl {
 public:
  int Ioctl(int fd, unsigned long request, void* arg) override {
    void* fn = g_original.load(std::memory_order_acquire);
    if (fn == nullptr) fn = g_export_next.load(std::memory_order_acquire);
    if (fn == nullptr) return static_cast<int>(syscall(SYS_ioctl, fd, request, arg));
    return reinterpret_cast<IoctlFn>(fn)(fd, request, arg);
  }
};
OriginalIoctl g_driver_ioctl;

}  // namespace

int ObservedIoctl(IoctlFn next, int fd, unsigned long request, void* arg, const void* caller) {
  if (next != nullptr && g_export_next.load(std::memory_order_relaxed) == nullptr) {
    g_export_next.store(reinterpret_cast<void*>(next), std::memory_order_release);
  }
  if (FilterSchedulingControl(fd, request, arg, caller)) return 0;
  const int rc = next != nullptr ? next(fd, request, arg) : static_cast<int>(syscall(SYS_ioctl, fd, request, arg));
  SettleRewrittenSlice(fd, request, static_cast<Nvos54*>(arg), rc, next);
  AfterIoctl(fd, request, arg, rc);
  return rc;
}

bool InstallIoctlHook(void* handle, void* (*resolve)(const char*), const void* exported_hook) {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (g_installed.load(std::memory_order_acquire)) return true;
  g_exported_hook = exported_hook;
  const GotPatchResult r =
      PatchImport(handle, "ioctl", reinterpret_cast<void*>(&HookedIoctl), resolve, &g_original, exported_hook);
  if (r.patched == 0) {
    port::Log(port::LogLevel::kWarn,
              "cannot watch the CUDA driver's channel groups (%s), so compute shares and priority are NOT "
              "enforced for this process",
              r.error != nullptr ? r.error : "the driver imports no ioctl");
    return false;
  }
  g_installed.store(true, std::memory_order_release);
  NoteDriverCode();
  port::Log(port::LogLevel::kInfo, "watching the CUDA driver's RM ioctls (%d import slots)", r.patched);
  return true;
}

bool IoctlHookInstalled() { return g_installed.load(std::memory_order_acquire); }

namespace {

// libcuda* or libnvidia-*, and not ourselves (as libcuda.so.1, the
// LD_LIBRARY_PATH mode, we match the name).
bool IsNvidiaLibrary(const dl_phdr_info* info) {
  const char* path = info->dlpi_name;
  if (path == nullptr || *path == '\0') return false;
  const char* base = strrchr(path, '/');
  base = base != nullptr ? base + 1 : path;
  if (strncmp(base, "libcuda", 7) != 0 && strncmp(base, "libnvidia-", 10) != 0) return false;
  Dl_info self;
  return !(dladdr(reinterpret_cast<void*>(&HookedIoctl), &self) != 0 &&
           reinterpret_cast<uintptr_t>(self.dli_fbase) == info->dlpi_addr);
}

struct NvidiaObjects {
  static constexpr int kMax = 32;
  char paths[kMax][256];
  int count = 0;
};

int CollectNvidiaObjects(dl_phdr_info* info, size_t, void* data) {
  auto* objects = static_cast<NvidiaObjects*>(data);
  if (objects->count == NvidiaObjects::kMax || !IsNvidiaLibrary(info)) return 0;
  if (strlen(info->dlpi_name) >= sizeof objects->paths[0]) return 0;
  strcpy(objects->paths[objects->count++], info->dlpi_name);
  return 0;
}

}  // namespace

int WatchNvidiaLibraries(void* (*resolve)(const char*)) {
  if (!IoctlHookInstalled()) return 0;
  std::lock_guard<std::mutex> lock(g_install_mutex);
  NoteDriverCode();
  NvidiaObjects objects;
  dl_iterate_phdr(&CollectNvidiaObjects, &objects);
  int patched = 0;
  for (int i = 0; i < objects.count; ++i) {
    void* handle = dlopen(objects.paths[i], RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    const GotPatchResult r =
        PatchImport(handle, "ioctl", reinterpret_cast<void*>(&HookedIoctl), resolve, &g_original, g_exported_hook);
    if (r.patched > 0) {
      port::Log(port::LogLevel::kInfo, "watching the RM ioctls of %s too", objects.paths[i]);
      patched += r.patched;
    }
    dlclose(handle);
  }
  return patched;
}

TsgRegistry& Registry() { return g_registry; }

IoctlHookStats HookStats() {
  return {g_ioctls.load(std::memory_order_relaxed), g_rm_allocs.load(std::memory_order_relaxed)};
}

void SetSliceAdvisor(SliceAdvisor advisor) { g_slice_advisor.store(advisor, std::memory_order_release); }

void SetGroupsObserver(GroupsChanged observer) { g_groups_observer.store(observer, std::memory_order_release); }

RmIoctl& DriverIoctl() { return g_driver_ioctl; }

ScopedDeviceHint::ScopedDeviceHint(int device) : previous_(t_device_hint) { t_device_hint = device; }
ScopedDeviceHint::~ScopedDeviceHint() { t_device_hint = previous_; }

}  // namespace gpuslice::rm
