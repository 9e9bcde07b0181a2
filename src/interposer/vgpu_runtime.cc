#include "interposer/vgpu_runtime.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

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

// The mappings live as long as the process: hooks may run during exit.
port::MappedFile* g_limits_file = nullptr;
port::MappedFile* g_ledger_file = nullptr;

// A ledger in this process's own memory, used when the shared one is
// unusable: the limit still holds for this process alone.
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
  atexit(&DetachAtExit);
  pthread_atfork(nullptr, nullptr, &ForkChild);
  instance_.store(runtime, std::memory_order_release);
  return runtime;
}

bool VgpuRuntime::Attach(const char* dir) {
  for (int8_t& slot : device_slot_) slot = kUncapped;
  const std::string d(dir);
  auto limits = port::MappedFile::Open(d + "/limits", sizeof(core::Limits), port::MappedFile::Access::kReadOnly);
  Status valid = limits.ok() ? core::ValidateLimits(*static_cast<const core::Limits*>(limits->data()), d)
                             : limits.status();
  if (!valid.ok()) {
    port::Log(port::LogLevel::kError, "cannot read vGPU limits, so NO MEMORY LIMIT IS ENFORCED: %s",
              valid.message().c_str());
    return false;
  }
  if (!allocations_.Init()) {
    port::Log(port::LogLevel::kError, "cannot map the allocation table, so NO MEMORY LIMIT IS ENFORCED");
    return false;
  }
  g_limits_file = new port::MappedFile(std::move(limits.value()));
  limits_ = static_cast<const core::Limits*>(g_limits_file->data());

  auto ledger = port::MappedFile::Open(d + "/ledger", sizeof(core::Ledger), port::MappedFile::Access::kReadWrite);
  Status ledger_valid = ledger.ok() ? core::ValidateLedger(*static_cast<const core::Ledger*>(ledger->data()), d)
                                    : ledger.status();
  if (ledger_valid.ok()) {
    g_ledger_file = new port::MappedFile(std::move(ledger.value()));
    ledger_region_ = static_cast<core::Ledger*>(g_ledger_file->data());
  } else {
    port::Log(port::LogLevel::kError,
              "the vGPU's shared ledger is unusable (%s); this process enforces its limit on its own usage only",
              ledger_valid.message().c_str());
    ledger_region_ = PrivateLedger();
    if (ledger_region_ == nullptr) return false;
  }
  ledger_ = core::MemoryLedger(limits_, ledger_region_);
  const port::ProcessProbe& probe = port::SystemProcessProbe();
  if (Status s = ledger_.Attach(probe.Self(), probe); !s.ok()) {
    port::Log(port::LogLevel::kError, "%s; this process enforces its limit on its own usage only",
              s.message().c_str());
    ledger_region_ = PrivateLedger();
    if (ledger_region_ == nullptr) return false;
    ledger_ = core::MemoryLedger(limits_, ledger_region_);
    if (!ledger_.Attach(probe.Self(), probe).ok()) return false;
  }
  port::Log(port::LogLevel::kInfo, "joined vGPU '%s' (%s)", limits_->name, dir);
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

void VgpuRuntime::DetachAtExit() {
  VgpuRuntime* r = instance_.load(std::memory_order_acquire);
  if (r != nullptr && r != Disabled()) r->ledger_.Detach();
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
  const port::ProcessProbe& probe = port::SystemProcessProbe();
  if (!r->ledger_.Attach(probe.Self(), probe).ok()) {
    port::Log(port::LogLevel::kError, "forked child could not join the vGPU ledger; its allocations will be refused");
  }
}

}  // namespace gpuslice::interposer
