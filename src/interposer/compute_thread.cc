#include "interposer/compute_thread.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <mutex>

#include "interposer/driver_patching.h"
#include "interposer/lc_activity.h"
#include "interposer/observers.h"
#include "interposer/pacer.h"
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

// One tick: each job in turn (compute_thread.h). Returns the nanoseconds
// until the next, as the pacer wants them.
uint64_t RunJobs(VgpuRuntime* rt, LibraryWatch& watch) {
  const uint64_t sleep_ns = pacer::Tick(rt);  // GPU turns
  lc_activity::Tick(rt);                      // an LC process's bursts
  ApplyTimeslicesOnce(rt);                    // one comparison unless something changed
  OnComputeTick(rt->latency_critical(), pacer::g_active.load(std::memory_order_acquire));  // observers.h
  watch.Tick(port::MonotonicNanos() / 1'000'000);  // libraries the driver loaded since
  return sleep_ns;
}

void* ThreadMain(void* arg) {
  auto* rt = static_cast<VgpuRuntime*>(arg);
  pacer::Start(rt);
  LibraryWatch watch(port::MonotonicNanos() / 1'000'000);
  for (;;) pacer::SleepBetweenTicks(RunJobs(rt, watch));
  return nullptr;
}

void ForkChild() {
  // The child has no thread and none of the parent's TSGs (CUDA does not
  // survive fork); its own first context starts both afresh.
  rm::Registry().Clear();
  pacer::AfterFork();
  ObserversAfterFork();
  g_started.store(false, std::memory_order_release);
  ForgetAppliedTimeslices();
  lc_activity::AfterFork();
}

}  // namespace

void PrepareCompute(VgpuRuntime* runtime) {
  if (runtime == nullptr) return;
  rm::SetSliceAdvisor(&AdviseComputeSlice);  // before any context: libcuda sets its groups' slices as it makes them
  rm::SetGroupsObserver(&PublishChannelGroupsNow);  // the slice audit learns of a group as it is made
  PatchDriver();
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
  pthread_setname_np(thread, "gpuslice-tick");  // 15 characters at most, or the name is refused
  g_started.store(true, std::memory_order_release);
}

}  // namespace gpuslice::interposer
