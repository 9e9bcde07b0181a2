#include "interposer/holder.h"

#include <stdlib.h>

#include <mutex>
#include <string_view>

#include "core/shared_word.h"
#include "interposer/driver_table.h"
#include "interposer/event_markers.h"
#include "port/clock.h"
#include "port/log.h"

namespace gpuslice::interposer::holder {

std::atomic<uint32_t> g_watch{0};

namespace {

// The kernel, from holder_kernel.ptx (embedded at build time).
constexpr char kHolderPtx[] =
#include "holder_ptx.inc"
    ;

enum class Residency { kOff, kSpan, kAlways };

// Read once, at first use. Not limits: an LC process may only hold its own
// context, and these only say when and how long. Off by default: on an H100
// every way of holding measured slower than not holding (holder.h).
struct Settings {
  bool hint = false;
  Residency residency = Residency::kOff;
  uint64_t linger_ns = 2'000'000;
};

Settings ReadSettings() {
  Settings s;
  if (const char* v = getenv("GPUSLICE_LC_HOLDER"); v != nullptr && *v != '\0') {
    // A comma-separated list of: hint, span, always.
    std::string_view rest(v);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (item == "hint") s.hint = true;
      else if (item == "span" && s.residency == Residency::kOff) s.residency = Residency::kSpan;
      else if (item == "always") s.residency = Residency::kAlways;
      else if (item != "off" && item != "span") {
        port::Log(port::LogLevel::kWarn, "GPUSLICE_LC_HOLDER=%s: '%.*s' is not hint, span, always or off; ignored",
                  v, static_cast<int>(item.size()), item.data());
      }
    }
  }
  if (const char* v = getenv("GPUSLICE_LC_LINGER_US"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const unsigned long long us = strtoull(v, &end, 10);
    if (end == v || *end != '\0' || us < 10 || us > 200'000) {
      port::Log(port::LogLevel::kWarn, "GPUSLICE_LC_LINGER_US=%s is not a whole number of microseconds in "
                "10..200000; using 2000", v);
    } else {
      s.linger_ns = us * 1000;
    }
  }
  return s;
}

const Settings& GetSettings() {
  static const Settings settings = ReadSettings();
  return settings;
}

// One context's holder machinery. Set up once under g_setup_mutex; `context`
// is published last, so a lock-free reader that finds it sees the rest.
struct ContextHolder {
  std::atomic<CUcontext> context{nullptr};
  CUdevice device = -1;
  CUfunction kernel = nullptr;
  CUstream stream = nullptr;
  uint32_t* release_word = nullptr;  // pinned host memory the kernel polls
  CUdeviceptr release_word_device = 0;
  std::atomic<uint64_t> covered_until_ns{0};  // a running holder's bound, by the host clock (a lower bound)
  std::atomic<bool> launching{false};
};
constexpr int kMaxContexts = 16;
ContextHolder g_contexts[kMaxContexts];
std::mutex g_setup_mutex;  // process-local; first holder of a context only
std::atomic<bool> g_unavailable_logged{false};
std::atomic<int> g_span_depth{0};

void LogUnavailable(const char* what, CUresult r) {
  if (g_unavailable_logged.exchange(true)) return;
  port::Log(port::LogLevel::kWarn, "pre-preemption and residency are off in this process: %s failed (CUDA error "
            "%d); latency-critical work still runs, with the slower switch", what, static_cast<int>(r));
}

ContextHolder* Find(CUcontext context) {
  for (ContextHolder& h : g_contexts) {
    if (h.context.load(std::memory_order_acquire) == context) return &h;
  }
  return nullptr;
}

// Slow path: module, stream and release word for `context` (current).
ContextHolder* SetUp(CUcontext context) {
  std::lock_guard<std::mutex> lock(g_setup_mutex);
  if (ContextHolder* h = Find(context)) return h;
  // One failure turns holders off for good: no retry on every launch.
  if (g_unavailable_logged.load(std::memory_order_relaxed)) return nullptr;
  ContextHolder* slot = nullptr;
  for (ContextHolder& h : g_contexts) {
    if (h.context.load(std::memory_order_relaxed) == nullptr) {
      slot = &h;
      break;
    }
  }
  if (slot == nullptr) {
    LogUnavailable("a free holder slot (more than 16 contexts)", CUDA_ERROR_OUT_OF_MEMORY);
    return nullptr;
  }
  const uint64_t t0 = port::MonotonicNanos();
  CUmodule module = nullptr;
  CUresult r = GPUSLICE_REAL(cuModuleLoadData)(&module, kHolderPtx);
  if (r != CUDA_SUCCESS) return LogUnavailable("loading the holder kernel", r), nullptr;
  r = GPUSLICE_REAL(cuModuleGetFunction)(&slot->kernel, module, "gpuslice_holder");
  if (r != CUDA_SUCCESS) return LogUnavailable("finding the holder kernel", r), nullptr;
  // Non-blocking: the legacy default stream must never wait for a holder.
  // Highest priority: its one block is placed before queued LC blocks.
  int least = 0, greatest = 0;
  GPUSLICE_REAL(cuCtxGetStreamPriorityRange)(&least, &greatest);
  r = GPUSLICE_REAL(cuStreamCreateWithPriority)(&slot->stream, CU_STREAM_NON_BLOCKING, greatest);
  if (r != CUDA_SUCCESS) return LogUnavailable("creating the holder's stream", r), nullptr;
  void* word = nullptr;
  r = GPUSLICE_REAL(cuMemHostAlloc)(&word, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
  if (r != CUDA_SUCCESS) return LogUnavailable("allocating the release word", r), nullptr;
  slot->release_word = static_cast<uint32_t*>(word);
  *slot->release_word = 0;
  r = GPUSLICE_REAL(cuMemHostGetDevicePointer_v2)(&slot->release_word_device, word, 0);
  if (r != CUDA_SUCCESS) return LogUnavailable("mapping the release word", r), nullptr;
  GPUSLICE_REAL(cuCtxGetDevice)(&slot->device);
  slot->covered_until_ns.store(0, std::memory_order_relaxed);
  slot->context.store(context, std::memory_order_release);
  port::Log(port::LogLevel::kInfo, "holder kernel ready in a context of device %d (%.1f ms)", slot->device,
            (port::MonotonicNanos() - t0) / 1e6);
  return slot;
}

ContextHolder* Current(bool set_up) {
  CUcontext context = nullptr;
  if (GPUSLICE_REAL(cuCtxGetCurrent)(&context) != CUDA_SUCCESS || context == nullptr) return nullptr;
  ContextHolder* h = Find(context);
  return h != nullptr || !set_up ? h : SetUp(context);
}

void ReleaseOne(ContextHolder& h) {
  core::FetchAddRelease(*h.release_word, 1);
  h.covered_until_ns.store(0, std::memory_order_relaxed);
}

// Whether a holder was launched (not if another thread is launching one).
bool Launch(ContextHolder& h, uint64_t bound_ns, uint64_t now) {
  if (h.launching.exchange(true, std::memory_order_acquire)) return false;
  uint32_t armed = core::LoadAcquire(*h.release_word);
  CUdeviceptr word = h.release_word_device;
  uint64_t bound = bound_ns;
  void* params[] = {&word, &armed, &bound};
  const CUresult r = GPUSLICE_REAL(cuLaunchKernel)(h.kernel, 1, 1, 1, 1, 1, 1, 0, h.stream, params, nullptr);
  if (r == CUDA_SUCCESS) h.covered_until_ns.store(now + bound_ns, std::memory_order_relaxed);
  h.launching.store(false, std::memory_order_release);
  if (r != CUDA_SUCCESS) {
    LogUnavailable("launching the holder", r);
    return false;
  }
  return true;
}

// Residency: a holder covers at least the next half linger.
void Cover(ContextHolder& h) {
  const uint64_t linger_ns = GetSettings().linger_ns;
  const uint64_t now = port::MonotonicNanos();
  if (h.covered_until_ns.load(std::memory_order_relaxed) > now + linger_ns / 2) return;
  Launch(h, linger_ns, now);
}

}  // namespace

void Hint(uint64_t bound_ns) {
  if (!GetSettings().hint || markers::Capturing()) return;
  ContextHolder* h = Current(true);
  if (h != nullptr && Launch(*h, bound_ns, port::MonotonicNanos())) {
    g_watch.fetch_or(kReleaseOnLaunch, std::memory_order_release);
  }
}

void SpanBegin() {
  if (GetSettings().residency == Residency::kOff) return;
  if (g_span_depth.fetch_add(1, std::memory_order_acq_rel) == 0) {
    g_watch.fetch_or(kResidencySpan, std::memory_order_release);
  }
  if (markers::Capturing()) return;
  if (ContextHolder* h = Current(true)) Cover(*h);
}

void SpanEnd() {
  if (GetSettings().residency == Residency::kOff) return;
  int depth = g_span_depth.load(std::memory_order_relaxed);
  while (depth > 0 && !g_span_depth.compare_exchange_weak(depth, depth - 1, std::memory_order_acq_rel)) {
  }
  if (depth == 1) {
    g_watch.fetch_and(~kResidencySpan, std::memory_order_release);
    if ((g_watch.load(std::memory_order_relaxed) & kResidencyAlways) == 0) Release();
  }
}

void Release() {
  for (ContextHolder& h : g_contexts) {
    if (h.context.load(std::memory_order_acquire) != nullptr) ReleaseOne(h);
  }
}

void OnLaunch() {
  const uint32_t watch = g_watch.load(std::memory_order_acquire);
  if ((watch & kReleaseOnLaunch) != 0 &&
      (g_watch.fetch_and(~kReleaseOnLaunch, std::memory_order_acq_rel) & kReleaseOnLaunch) != 0) {
    Release();
  }
  if ((watch & (kResidencySpan | kResidencyAlways)) == 0 || markers::Capturing()) return;
  if (ContextHolder* h = Current(true)) Cover(*h);
}

void Tick(bool latency_critical, bool gpu_shared) {
  if (GetSettings().residency != Residency::kAlways) return;
  const bool on = latency_critical && gpu_shared;
  const bool was = (g_watch.load(std::memory_order_relaxed) & kResidencyAlways) != 0;
  if (on == was) return;
  if (on) {
    g_watch.fetch_or(kResidencyAlways, std::memory_order_release);
  } else {
    g_watch.fetch_and(~kResidencyAlways, std::memory_order_release);
    if (g_span_depth.load(std::memory_order_relaxed) == 0) Release();
  }
  port::Log(port::LogLevel::kInfo, "latency-critical residency %s", on ? "on: the GPU is shared" : "off");
}

void ForgetContext(CUcontext context) {
  std::lock_guard<std::mutex> lock(g_setup_mutex);
  if (ContextHolder* h = Find(context)) {
    ReleaseOne(*h);  // the word is freed with the context; holders end with it too
    h->context.store(nullptr, std::memory_order_release);
  }
}

void ForgetDevice(CUdevice device) {
  std::lock_guard<std::mutex> lock(g_setup_mutex);
  for (ContextHolder& h : g_contexts) {
    if (h.context.load(std::memory_order_acquire) != nullptr && h.device == device) {
      ReleaseOne(h);
      h.context.store(nullptr, std::memory_order_release);
    }
  }
}

void AfterFork() {
  for (ContextHolder& h : g_contexts) h.context.store(nullptr, std::memory_order_relaxed);
  g_watch.store(0, std::memory_order_relaxed);
  g_span_depth.store(0, std::memory_order_relaxed);
}

}  // namespace gpuslice::interposer::holder
