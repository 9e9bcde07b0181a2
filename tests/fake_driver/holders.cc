// The holder-kernel model (holders.h).
#include "holders.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace fake_cuda {
namespace {

struct Holder {
  const uint32_t* word;
  uint32_t armed;
  std::chrono::steady_clock::time_point deadline;
};

struct Holders {
  std::mutex mutex;
  std::vector<Holder> all;
  uint64_t last_bound_ns = 0;
  uint64_t syncs_waited = 0;
};

Holders& Get() {
  static auto* holders = new Holders;
  return *holders;
}

bool Released(const Holder& h) {
  return std::atomic_ref<const uint32_t>(*h.word).load(std::memory_order_acquire) != h.armed;
}

}  // namespace

void LaunchHolder(void** params) {
  if (params == nullptr) return;
  const auto word = *static_cast<const uint64_t*>(params[0]);  // a device pointer: host memory in the fake
  const uint32_t armed = *static_cast<const uint32_t*>(params[1]);
  const uint64_t bound_ns = *static_cast<const uint64_t*>(params[2]);
  Holders& h = Get();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.all.push_back({reinterpret_cast<const uint32_t*>(word), armed,
                   std::chrono::steady_clock::now() + std::chrono::nanoseconds(bound_ns)});
  h.last_bound_ns = bound_ns;
}

HolderCounts CountHolders() {
  Holders& h = Get();
  std::lock_guard<std::mutex> lock(h.mutex);
  HolderCounts c;
  const auto now = std::chrono::steady_clock::now();
  for (const Holder& x : h.all) {
    ++c.launched;
    if (Released(x)) ++c.released;
    else if (now >= x.deadline) ++c.expired;
    else ++c.running;
  }
  c.last_bound_ns = h.last_bound_ns;
  c.syncs_waited = h.syncs_waited;
  return c;
}

void WaitForHolders() {
  Holders& h = Get();
  std::chrono::steady_clock::time_point until{};
  {
    std::lock_guard<std::mutex> lock(h.mutex);
    const auto now = std::chrono::steady_clock::now();
    for (const Holder& x : h.all) {
      if (!Released(x) && now < x.deadline && x.deadline > until) until = x.deadline;
    }
    if (until == std::chrono::steady_clock::time_point{}) return;
    ++h.syncs_waited;
  }
  // A GPU's synchronize blocks until the kernel ends; at the latest, its bound.
  std::this_thread::sleep_until(until);
}

void ResetHolders() {
  Holders& h = Get();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.all.clear();
  h.last_bound_ns = 0;
  h.syncs_waited = 0;
}

}  // namespace fake_cuda
