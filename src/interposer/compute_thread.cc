#include "interposer/compute_thread.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <mutex>

#include "interposer/driver_table.h"
#include "interposer/holder.h"
#include "interposer/lc_activity.h"
#include "interposer/pacer.h"
#include "interposer/real_dlsym.h"
#include "interposer/timeslice_applier.h"
#include "interposer/vgpu_runtime.h"
#include "port/clock.h"
#include "port/log.h"
#include "rm/ioctl_hook.h"
#include "rm/tsg_registry.h"

namespace gpuslice::interposer {
namespace {

std::mutex g_start_mutex;  // process-local; thread start only
std::atomic<bool> g_started{false};

void* ResolveDefault(const char* symbol) { return RealDlsym(RTLD_DEFAULT, symbol); }

void* ThreadMain(void* arg) {
  auto* rt = static_cast<VgpuRuntime*>(arg);
  pacer::Start(rt);
  const uint64_t started_ms = port::MonotonicNanos() / 1'000'000;
  bool watched_early = false, watched_late = false;
  for (;;) {
    // Every tick (compute_thread.h; the limits promise ≤ 100 ms from a
    // change to the hardware): the pacer, the LC's activity, then
    // timeslices, which cost one comparison when nothing changed.
    const uint64_t now_ms = port::MonotonicNanos() / 1'000'000;
    const uint64_t sleep_ns = pacer::Tick(rt);
    lc_activity::Tick(rt);
    ApplyTimeslicesOnce(rt);
    holder::Tick(rt->latency_critical(), pacer::g_active.load(std::memory_order_acquire));
    // Libraries the driver loads as it starts contexts are in by now.
    if (!watched_early && now_ms - started_ms >= 100) {
      watched_early = true;
      rm::WatchNvidiaLibraries(&ResolveDefault);
    }
    if (!watched_late && now_ms - started_ms >= 2000) {
      watched_late = true;
      rm::WatchNvidiaLibraries(&ResolveDefault);
      if (port::LogEnabled(port::LogLevel::kInfo)) {
        // Once, 2 s in: whether the hook sees the driver's ioctls at all.
        rm::TsgRef tsgs[rm::TsgRegistry::kCapacity];
        const rm::IoctlHookStats stats = rm::HookStats();
        port::Log(port::LogLevel::kInfo, "after 2 s: %u channel groups tracked; the driver made %llu ioctls, %llu "
                  "RM allocations", rm::Registry().Snapshot(tsgs, rm::TsgRegistry::kCapacity),
                  static_cast<unsigned long long>(stats.ioctls), static_cast<unsigned long long>(stats.rm_allocs));
      }
    }
    timespec ts{0, static_cast<long>(sleep_ns)};
    while (nanosleep(&ts, &ts) != 0) {
    }
  }
  return nullptr;
}

void ForkChild() {
  // The child has no thread and none of the parent's TSGs (CUDA does not
  // survive fork); its own first context starts both afresh.
  rm::Registry().Clear();
  pacer::AfterFork();
  holder::AfterFork();
  g_started.store(false, std::memory_order_release);
  ForgetAppliedTimeslices();
  lc_activity::AfterFork();
}

}  // namespace

void PrepareCompute(VgpuRuntime* runtime) {
  if (runtime == nullptr || rm::IoctlHookInstalled()) return;
  void* handle = RealDriverHandle();
  if (handle != nullptr) rm::InstallIoctlHook(handle, &ResolveDefault, ExportedIoctl());
}

void StartComputeThread(VgpuRuntime* rt) {
  if (rt == nullptr || g_started.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(g_start_mutex);
  if (g_started.load(std::memory_order_acquire)) return;
  // Runs without the ioctl hook too (then it sets no timeslice): GPU turns
  // (pacer.h) do not need it.
  static std::once_flag atfork_once;
  std::call_once(atfork_once, [] { pthread_atfork(nullptr, nullptr, &ForkChild); });
  // The thread takes none of the application's signals.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);  // Snapshot copies fit easily
  pthread_t thread;
  const int err = pthread_create(&thread, &attr, &ThreadMain, rt);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err != 0) {
    port::Log(port::LogLevel::kWarn, "cannot start the compute thread (error %d); compute shares and priority "
              "are NOT enforced for this process", err);
    return;
  }
  pthread_setname_np(thread, "gpuslice-compute");
  g_started.store(true, std::memory_order_release);
}

}  // namespace gpuslice::interposer
