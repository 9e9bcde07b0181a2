// pool_charge.h — stream-ordered pools charged by their reservation
// (pool_accounts.h says why): each account is brought to what the driver
// reports the pool holds.
//
// Called by the pool hooks (hooks_pools.cc), graph launches and
// instantiation (hooks_graphs.cc), cuMemGetInfo (hooks_info.cc), and the
// vGPU-full slow path and context teardown (charge.cc), on the
// application's threads. Each call asks the driver for one attribute per
// pool (SettleAllPools: for every pool, a slow path); no lock, never
// allocates.
#ifndef GPUSLICE_INTERPOSER_POOL_CHARGE_H_
#define GPUSLICE_INTERPOSER_POOL_CHARGE_H_

#include <cuda.h>

#include <cstdint>

#include "interposer/pool_accounts.h"
#include "interposer/vgpu_runtime.h"

namespace gpuslice::interposer {

// Moves a pool account to the pool's current reservation. `precharged`
// bytes already in the ledger ahead of an allocation are folded in. When
// growth cannot be charged, the account keeps what the ledger holds and this
// returns false. `may_reclaim` allows the vGPU-full slow path (charge.h).
bool SettlePool(VgpuRuntime& runtime, PoolAccount& account, uint64_t precharged, bool may_reclaim);

// Re-reads this process's pool reservations, graph pools included.
void SettleAllPools(VgpuRuntime& runtime);

// One attribute of a pool; *ok is false when the driver would not say.
uint64_t PoolAttribute(CUmemoryPool pool, CUmemPool_attribute attr, bool* ok);

}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_POOL_CHARGE_H_
