#include "interposer/pool_charge.h"

#include "interposer/charge.h"
#include "interposer/driver_table.h"

namespace gpuslice::interposer {
namespace {

uint64_t Reservation(const PoolAccount& account, bool* ok) {
  const uint64_t key = account.pool.load();
  if (IsGraphPool(key)) {
    cuuint64_t value = 0;
    *ok = GPUSLICE_REAL(cuDeviceGetGraphMemAttribute)(static_cast<CUdevice>(key & ~kGraphPoolKeyBit),
                                                      CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &value) == CUDA_SUCCESS;
    return value;
  }
  return PoolAttribute(reinterpret_cast<CUmemoryPool>(key), CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, ok);
}

}  // namespace

bool SettlePool(VgpuRuntime& rt, PoolAccount& account, uint64_t precharged, bool may_reclaim) {
  bool ok = false;
  const uint64_t reserved = Reservation(account, &ok);
  if (!ok) {
    account.charged.fetch_add(precharged);
    return true;
  }
  const uint64_t before = account.charged.exchange(reserved);
  const uint32_t slot = static_cast<uint32_t>(account.slot.load());
  const uint64_t held = before + precharged;  // what the ledger has for this pool
  if (reserved <= held) {
    if (account.exported.load()) {
      account.charged.store(held);  // kept: importers may hold what the pool gave back
      if (reserved < held) SayKeptExported(rt, held - reserved);
    } else {
      rt.ledger().Uncharge(slot, held - reserved);
    }
    return true;
  }
  const uint64_t growth = reserved - held;
  const bool charged = may_reclaim ? ChargeOrRefuse(rt, static_cast<int>(slot), growth)
                                   : rt.ledger().TryCharge(slot, growth);
  if (!charged) account.charged.fetch_sub(growth);
  return charged;
}

void SettleAllPools(VgpuRuntime& rt) {
  rt.pools().ForEach([&](PoolAccount& a) {
    if (a.slot.load() != VgpuRuntime::kUncapped) SettlePool(rt, a, 0, /*may_reclaim=*/false);
  });
}

uint64_t PoolAttribute(CUmemoryPool pool, CUmemPool_attribute attr, bool* ok) {
  cuuint64_t value = 0;
  *ok = GPUSLICE_REAL(cuMemPoolGetAttribute)(pool, attr, &value) == CUDA_SUCCESS;
  return value;
}

}  // namespace gpuslice::interposer
