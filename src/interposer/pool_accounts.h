// pool_accounts.h — what each stream-ordered memory pool of this process is
// charged for.
//
// A pool's device footprint is its reservation, not the sum of its live
// allocations: an allocation may be served from memory the pool already
// holds, and a free leaves the memory reserved until the driver releases it
// at a synchronisation (above the release threshold) or on cuMemPoolTrimTo.
// So each pool is charged exactly its CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
// re-read after every allocation from it, after trims, and before the vGPU
// is declared full (hooks_pools.cc).
//
// A device's graph-memory pool (where CUDA graphs' memory nodes allocate) is
// accounted the same way, by CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, under
// the key GraphPoolKey(device) (hooks_graphs.cc).
//
// A fixed array of 256 accounts, process-local and lock-free: slots are
// claimed by CAS on the pool handle. Pools beyond 256 are refused at creation.
#ifndef GPUSLICE_INTERPOSER_POOL_ACCOUNTS_H_
#define GPUSLICE_INTERPOSER_POOL_ACCOUNTS_H_

#include <atomic>
#include <cstdint>

namespace gpuslice::interposer {

struct PoolAccount {
  std::atomic<uint64_t> pool{0};     // CUmemoryPool; 0 = free account
  std::atomic<uint64_t> charged{0};  // bytes of this pool's reservation in the ledger
  std::atomic<int32_t> slot{-1};     // ledger device slot
  // Exported (cuMemPoolExportToShareableHandle): its charge never shrinks
  // until the process exits, since importers keep what it held (charge.h).
  std::atomic<bool> exported{false};
};

// Pool handles are pointers; graph pools take keys no pointer can have.
inline constexpr uint64_t kGraphPoolKeyBit = 1ull << 63;
inline uint64_t GraphPoolKey(int device) { return kGraphPoolKeyBit | static_cast<uint32_t>(device); }
inline bool IsGraphPool(uint64_t key) { return (key & kGraphPoolKeyBit) != 0; }

class PoolAccounts {
 public:
  static constexpr int kMaxPools = 256;

  PoolAccount* Find(uint64_t pool) {
    for (PoolAccount& a : accounts_) {
      if (a.pool.load(std::memory_order_acquire) == pool) return &a;
    }
    return nullptr;
  }

  PoolAccount* FindOrAdd(uint64_t pool, int slot) {
    if (PoolAccount* a = Find(pool)) return a;
    for (PoolAccount& a : accounts_) {
      uint64_t expected = 0;
      if (a.pool.load(std::memory_order_relaxed) == 0 &&
          a.pool.compare_exchange_strong(expected, pool, std::memory_order_acq_rel)) {
        a.charged.store(0, std::memory_order_relaxed);
        a.exported.store(false, std::memory_order_relaxed);
        a.slot.store(slot, std::memory_order_release);
        return &a;
      }
      if (expected == pool) return &a;  // another thread added it first
    }
    return nullptr;
  }

  void Remove(PoolAccount* a) {
    a->slot.store(-1, std::memory_order_relaxed);
    a->charged.store(0, std::memory_order_relaxed);
    a->exported.store(false, std::memory_order_relaxed);
    a->pool.store(0, std::memory_order_release);
  }

  template <typename Fn>
  void ForEach(Fn fn) {
    for (PoolAccount& a : accounts_) {
      if (a.pool.load(std::memory_order_acquire) != 0) fn(a);
    }
  }

  void Clear() {
    for (PoolAccount& a : accounts_) Remove(&a);
  }

 private:
  PoolAccount accounts_[kMaxPools];
};

}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_POOL_ACCOUNTS_H_
