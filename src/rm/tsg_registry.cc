#include "rm/tsg_registry.h"

#include "port/log.h"

namespace gpuslice::rm {

void TsgRegistry::Observe(int fd, unsigned long request, const void* arg, int rc, int device_hint) {
  if (rc != 0 || arg == nullptr || IoctlType(request) != kIoctlMagic) return;
  const uint32_t nr = IoctlNr(request);
  const uint32_t size = IoctlSize(request);
  if (nr == kEscRmAlloc) {
    NvHandle root, object;
    uint32_t klass, status, params_size;
    uint64_t params;
    if (size == sizeof(Nvos64)) {
      const auto* a = static_cast<const Nvos64*>(arg);
      root = a->hRoot, object = a->hObjectNew, klass = a->hClass, status = a->status;
      params = a->pAllocParms, params_size = a->paramsSize;
    } else if (size == sizeof(Nvos21)) {
      const auto* a = static_cast<const Nvos21*>(arg);
      root = a->hRoot, object = a->hObjectNew, klass = a->hClass, status = a->status;
      params = a->pAllocParms, params_size = a->paramsSize;
    } else {
      return;
    }
    if (klass != kClassChannelGroup || status != kNvOk) return;
    // engineType is an input the caller filled in; an allocation without
    // parameters is not one we can classify, so it is left alone. The size
    // is not checked: driver 580's libcuda passes paramsSize 0 (RM knows each
    // class's parameter struct; measured on an H200), and the struct of a
    // channel group is always longer than four words.
    (void)params_size;
    if (params == 0) return;
    const uint32_t engine = reinterpret_cast<const uint32_t*>(params)[kChannelGroupEngineTypeWord];
    Add({fd, root, object, engine, device_hint, 0});
  } else if (nr == kEscRmFree && size == sizeof(Nvos00)) {
    const auto* a = static_cast<const Nvos00*>(arg);
    if (a->status == kNvOk) Remove(fd, a->hRoot, a->hObjectOld);
  }
}

void TsgRegistry::Add(const TsgRef& tsg) {
  for (Slot& s : slots_) {
    uint32_t expected = 0;
    if (!s.state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
    s.seq.fetch_add(1, std::memory_order_acq_rel);  // odd: being written
    s.fd = tsg.fd;
    s.client = tsg.client;
    s.handle = tsg.handle;
    s.engine_type = tsg.engine_type;
    s.device = tsg.device;
    s.serial = next_serial_.fetch_add(1, std::memory_order_relaxed);
    s.seq.fetch_add(1, std::memory_order_release);  // even: stable
    s.state.store(2, std::memory_order_release);
    epoch_.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  if (!overflow_logged_.exchange(true)) {
    port::Log(port::LogLevel::kWarn, "more than %u channel groups in this process; the rest keep the driver's "
              "default timeslice", kCapacity);
  }
}

void TsgRegistry::Remove(int fd, NvHandle client, NvHandle object) {
  // Freeing a client frees everything under it, its TSGs included.
  bool removed = false;
  for (Slot& s : slots_) {
    if (s.state.load(std::memory_order_acquire) != 2) continue;
    if (s.fd != fd || s.client != client || (s.handle != object && object != client)) continue;
    uint32_t expected = 2;
    if (!s.state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
    s.seq.fetch_add(2, std::memory_order_acq_rel);  // readers that copied it mid-way retry
    s.state.store(0, std::memory_order_release);
    removed = true;
  }
  if (removed) epoch_.fetch_add(1, std::memory_order_acq_rel);
}

uint32_t TsgRegistry::Snapshot(TsgRef* out, uint32_t max) const {
  uint32_t n = 0;
  for (const Slot& s : slots_) {
    if (n == max) break;
    for (int attempt = 0; attempt < 4; ++attempt) {
      const uint64_t before = s.seq.load(std::memory_order_acquire);
      if (before & 1) continue;
      if (s.state.load(std::memory_order_acquire) != 2) break;
      TsgRef copy{s.fd, s.client, s.handle, s.engine_type, s.device, s.serial};
      std::atomic_thread_fence(std::memory_order_acquire);
      if (s.seq.load(std::memory_order_relaxed) == before && s.state.load(std::memory_order_acquire) == 2) {
        out[n++] = copy;
        break;
      }
    }
  }
  return n;
}

void TsgRegistry::Clear() {
  for (Slot& s : slots_) {
    s.seq.fetch_add(2, std::memory_order_acq_rel);
    s.state.store(0, std::memory_order_release);
  }
  epoch_.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace gpuslice::rm
