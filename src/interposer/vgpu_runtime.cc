#include "interposer/vgpu_runtime.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "core/state_handout.h"
#include "core/vgpu_layout.h"
#include "interposer/driver_table.h"
#include "port/clock.h"
#include "port/log.h"
#include "port/mapped_file.h"
#include "port/process.h"

namespace gpuslice::interposer {

std::atomic<VgpuRuntime*> VgpuRuntime::instance_{nullptr};

namespace {

std::mutex g_create_mutex;   // process-local; first use only
std::mutex g_devices_mutex;  // process-local; until devices are mapped
std::mutex g_join_mutex;     // process-local; RetryJoin, a refused allocation's slow path

// The mappings live as long as the process: hooks may run during exit.
port::MappedFile* g_limits_file = nullptr;
port::MappedFile* g_ledger_file = nullptr;

// A ledger in this process's own memory, never attached to, used when the
// shared one is unusable: it keeps the lifetime counters somewhere.
core::Ledger* PrivateLedger() {
  void* p = mmap(nullptr, sizeof(core::Ledger), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* ledger = static_cast<core::Ledger*>(p);
  ledger->header = {core::kLedgerMagic, core::kLayoutVersion, sizeof(core::Ledger)};
  return ledger;
}

}  // namespace

VgpuRuntime* VgpuRuntime::Create() {
  std::lock_guard<std::mutex> lock(g_create_mutex);
  if (VgpuRuntime* r = instance_.load(std::memory_order_acquire); r != nullptr) {
    return r == Disabled() ? nullptr : r;
  }
  const char* dir = getenv("GPUSLICE_VGPU_DIR");
  if (dir == nullptr || *dir == '\0') {
    instance_.store(Disabled(), std::memory_order_release);
    return nullptr;
  }
  auto* runtime = new (std::nothrow) VgpuRuntime();
  if (runtime == nullptr || !runtime->Attach(dir)) {
    delete runtime;
    instance_.store(Disabled(), std::memory_order_release);
    return nullptr;
  }
  pthread_atfork(nullptr, nullptr, &ForkChild);
  instance_.store(runtime, std::memory_order_release);
  return runtime;
}

namespace {

// What a process of a vGPU whose limits cannot be trusted sees: no devices
// (each CUDA device is then outside the vGPU, so its memory is refused).
core::Limits* RefusingLimits(const std::string& dir) {
  void* p = mmap(nullptr, sizeof(core::Limits), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* limits = static_cast<core::Limits*>(p);
  limits->header = {core::kLimitsMagic, core::kLayoutVersion, sizeof(core::Limits)};
  const size_t slash = dir.find_last_of('/');
  snprintf(limits->name, sizeof limits->name, "%s", dir.substr(slash == std::string::npos ? 0 : slash + 1).c_str());
  return limits;
}

// A test seam: GPUSLICE_TEST_ALLOCATION_TABLE_LOG2 makes this process's
// allocation table smaller (never larger), so that tests can fill it. A
// process that sets it only has its own allocations refused sooner.
uint32_t AllocationTableLog2() {
  const char* v = getenv("GPUSLICE_TEST_ALLOCATION_TABLE_LOG2");
  const long n = v != nullptr ? strtol(v, nullptr, 10) : 0;
  return n >= 1 && n < static_cast<long>(AllocationTable::kCapacityLog2) ? static_cast<uint32_t>(n)
                                                                          : AllocationTable::kCapacityLog2;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

bool VgpuRuntime::Attach(const char* dir) {
  for (int8_t& slot : device_slot_) slot = kUncapped;
  const std::string d(dir);
  auto limits = port::MappedFile::Open(d + "/limits", sizeof(core::Limits), port::MappedFile::Access::kReadOnly);
  Status valid = limits.ok() ? core::ValidateLimits(*static_cast<const core::Limits*>(limits->data()), d)
                             : limits.status();
  if (!valid.ok() && !Exists(d + "/limits")) {
    // FIXME(issue 11): a process pointed at no vGPU runs unlimited; the
    // binding of a process to its vGPU is another part of the issue.
    port::Log(port::LogLevel::kError, "cannot read vGPU limits, so NO MEMORY LIMIT IS ENFORCED: %s",
              valid.message().c_str());
    return false;
  }
  if (!allocations_.Init(AllocationTableLog2())) {
    port::Log(port::LogLevel::kError, "cannot map the allocation table, so NO MEMORY LIMIT IS ENFORCED");
    return false;
  }
  if (!valid.ok()) {
    // The vGPU exists but its limits are damaged (a flipped byte, a
    // truncation): whatever limit it had cannot be known, so no device
    // memory is granted. Everything else runs.
    port::Log(port::LogLevel::kError,
              "DEVICE MEMORY IS REFUSED: %s. Until it is made again, every device allocation of this process "
              "fails with CUDA_ERROR_OUT_OF_MEMORY",
              valid.message().c_str());
    limits_ = RefusingLimits(d);
    ledger_region_ = PrivateLedger();
    if (limits_ == nullptr || ledger_region_ == nullptr) return false;
    ledger_ = core::MemoryLedger(limits_, ledger_region_);  // never attached: every charge fails
    memory_refused_ = true;
    return true;
  }
  g_limits_file = new port::MappedFile(std::move(limits.value()));
  limits_ = static_cast<const core::Limits*>(g_limits_file->data());

  StatusOr<port::MappedFile> ledger = Status::Error("");
  if (!Exists(d + "/ledger") && core::HandsOutState(d)) {
    // A daemon-made vGPU: its ledger is a sealed memfd from the state
    // keeper, which nobody can truncate under this mapping. A socket that
    // does not answer leaves this process's memory unaccountable, so it is
    // refused below, as for a corrupt ledger (memory fails closed).
    auto handed = core::FetchState(d);
    ledger = handed.ok() ? port::MappedFile::FromFd(handed->ledger.get(), sizeof(core::Ledger),
                                                    port::MappedFile::Access::kReadWrite, "the vGPU's ledger")
                         : StatusOr<port::MappedFile>(handed.status());
  } else {
    ledger = port::MappedFile::Open(d + "/ledger", sizeof(core::Ledger), port::MappedFile::Access::kReadWrite);
  }
  Status ledger_valid = ledger.ok() ? core::ValidateLedger(*static_cast<const core::Ledger*>(ledger->data()), d)
                                    : ledger.status();
  if (!ledger_valid.ok()) {
    // A private ledger would let each process have the whole limit (one
    // flipped byte gave 4 x 64 MiB in a 64 MiB vGPU): refuse instead.
    port::Log(port::LogLevel::kError,
              "DEVICE MEMORY IS REFUSED: the vGPU's shared ledger is unusable (%s). Until it is made again, every "
              "device allocation of this process fails with CUDA_ERROR_OUT_OF_MEMORY",
              ledger_valid.message().c_str());
    ledger_region_ = PrivateLedger();  // for the lifetime counters only
    if (ledger_region_ == nullptr) return false;
    ledger_ = core::MemoryLedger(limits_, ledger_region_);  // never attached: every charge fails
    return true;
  }
  g_ledger_file = new port::MappedFile(std::move(ledger.value()));
  ledger_region_ = static_cast<core::Ledger*>(g_ledger_file->data());
  ledger_shared_ = true;
  ledger_ = core::MemoryLedger(limits_, ledger_region_);
  const port::ProcessProbe& probe = port::SystemProcessProbe();
  if (Status s = ledger_.Attach(probe.Self(), probe); !s.ok()) {
    // Without a slot the process's usage would be invisible to the others.
    // It keeps trying to join as it allocates (RetryJoin).
    port::Log(port::LogLevel::kError,
              "DEVICE MEMORY IS REFUSED until a slot frees up: %s. Device allocations of this process fail with "
              "CUDA_ERROR_OUT_OF_MEMORY meanwhile",
              s.message().c_str());
    return true;
  }
  port::Log(port::LogLevel::kInfo, "joined vGPU '%s' (%s)", limits_->name, dir);
  return true;
}

bool VgpuRuntime::RetryJoin() {
  if (!ledger_shared_) return false;
  std::lock_guard<std::mutex> lock(g_join_mutex);
  if (ledger_.attached()) return true;
  const port::ProcessProbe& probe = port::SystemProcessProbe();
  if (!ledger_.Attach(probe.Self(), probe).ok()) return false;
  port::Log(port::LogLevel::kWarn, "joined vGPU '%s' at last: its device memory is no longer refused", limits_->name);
  return true;
}

namespace {

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi and
// CUDA_VISIBLE_DEVICES spell it.
void FormatUuid(const CUuuid& uuid, char (&out)[41]) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  snprintf(out, sizeof out, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

}  // namespace

void VgpuRuntime::MapDevices() {
  std::lock_guard<std::mutex> lock(g_devices_mutex);
  if (devices_mapped_.load(std::memory_order_acquire)) return;
  int count = 0;
  // Before cuInit the driver answers CUDA_ERROR_NOT_INITIALIZED; try again on
  // a later call rather than caching a wrong answer.
  if (GPUSLICE_REAL(cuDeviceGetCount)(&count) != CUDA_SUCCESS) return;
  if (memory_refused_) {  // said once, when the limits were read
    for (CUdevice dev = 0; dev < count && dev < kMaxCudaDevices; ++dev) device_slot_[dev] = kOutside;
    devices_mapped_.store(true, std::memory_order_release);
    return;
  }
  for (CUdevice dev = 0; dev < count && dev < kMaxCudaDevices; ++dev) {
    CUuuid uuid;
    if (GPUSLICE_REAL(cuDeviceGetUuid_v2)(&uuid, dev) != CUDA_SUCCESS) {
      device_slot_[dev] = kOutside;
      port::Log(port::LogLevel::kWarn,
                "CUDA device %d: its UUID cannot be read, so it cannot be matched to vGPU '%s'; "
                "its device memory is refused",
                dev, limits_->name);
      continue;
    }
    for (uint32_t i = 0; i < limits_->device_count && i < core::kMaxDevices; ++i) {
      if (memcmp(limits_->devices[i].uuid, uuid.bytes, 16) == 0) device_slot_[dev] = static_cast<int8_t>(i);
    }
    if (device_slot_[dev] == kUncapped) {
      // Seen when the application widened the CUDA_VISIBLE_DEVICES that
      // gpuslice set. Unlimited memory there would escape the vGPU.
      device_slot_[dev] = kOutside;
      char text[41];
      FormatUuid(uuid, text);
      port::Log(port::LogLevel::kWarn,
                "CUDA device %d (%s) is not part of vGPU '%s' (was CUDA_VISIBLE_DEVICES changed?); "
                "its device memory is refused",
                dev, text, limits_->name);
    }
  }
  devices_mapped_.store(true, std::memory_order_release);
}

int VgpuRuntime::CurrentDeviceSlot(CUdevice* device_out) {
  const int slot = CurrentMemorySlot(device_out);
  return slot == kOutside ? kUncapped : slot;
}

int VgpuRuntime::CurrentMemorySlot(CUdevice* device_out) {
  CUdevice dev = -1;
  if (GPUSLICE_REAL(cuCtxGetDevice)(&dev) != CUDA_SUCCESS) return kUncapped;
  if (device_out != nullptr) *device_out = dev;
  return MemorySlot(dev);
}

void VgpuRuntime::ReapDeadProcesses(bool force) {
  const uint64_t now = port::MonotonicNanos();
  uint64_t last = last_reap_ns_.load(std::memory_order_relaxed);
  if (!force && now - last < 100'000'000ull) return;
  if (!last_reap_ns_.compare_exchange_strong(last, now) && !force) return;
  ledger_.ReapDeadProcesses(port::SystemProcessProbe());
}

namespace {
__attribute__((constructor)) void DetachAtExitLast() { atexit(&VgpuRuntime::DetachAtExit); }
}  // namespace

void VgpuRuntime::DetachAtExit() {
  VgpuRuntime* r = instance_.load(std::memory_order_acquire);
  if (r == nullptr || r == Disabled()) return;
  // Memory still charged is still held: the driver frees it after this
  // handler, in libcuda's teardown or when the kernel closes the process's
  // descriptors. Given back now, it would be in no ledger until then: the
  // vGPU's other processes could allocate past its limit, and the audit
  // would take the process for one that bypassed the library (on an H200,
  // PyTorch trainings holding 11.5 GiB were found so at exit;
  // docs/benchmarks.md, "Teardown seen as an escape"). So a slot that
  // charges anything is left to the reapers, which free it once the
  // process is gone; `gpuslice run` reaps as its command ends.
  for (uint32_t device = 0; device < core::kMaxDevices; ++device) {
    if (r->ledger_.MyUsedBytes(device) != 0) return;
  }
  r->ledger_.Detach();
}

void VgpuRuntime::ForkChild() {
  // The child shares the parent's mappings but not its GPU memory: it must
  // neither touch the parent's slot nor free the parent's allocations. It
  // claims a slot of its own on its next allocation.
  VgpuRuntime* r = instance_.load(std::memory_order_acquire);
  if (r == nullptr || r == Disabled()) return;
  r->ledger_.ForgetSlotAfterFork();
  r->allocations_.Clear();
  r->pools_.Clear();
  if (!r->ledger_shared_) return;  // its memory stays refused, as the parent's
  const port::ProcessProbe& probe = port::SystemProcessProbe();
  if (!r->ledger_.Attach(probe.Self(), probe).ok()) {
    port::Log(port::LogLevel::kError,
              "DEVICE MEMORY IS REFUSED: this forked child could not join vGPU '%s', whose %u ledger slots are all "
              "taken; its device allocations fail with CUDA_ERROR_OUT_OF_MEMORY until a slot frees up (split the "
              "work across vGPUs)",
              r->limits_->name, core::kMaxProcesses);
  }
}

}  // namespace gpuslice::interposer
