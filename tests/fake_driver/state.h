// state.h — the fake driver's one lock, its initialisation flag, and the
// prologue shared by every implemented entry point.
//
// All fake-driver state (contexts, allocations, pools, streams, graphs...) is
// guarded by one process-wide mutex: this is a test double, and one lock makes
// it obviously free of lock-order bugs. A function that touches guarded state
// takes a `const Locked&`, which exists only while the mutex is held, so the
// lock contract is checked by the compiler rather than stated in prose. Only
// exported entry points construct a Locked; helpers never do, so the lock is
// never taken twice.
//
// Thread-safe. Constructing a Locked blocks on the mutex. Nothing here
// allocates after first use.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_STATE_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_STATE_H_

#include <cuda.h>

#include <cstdint>

namespace fake_cuda {

// Constructing a Locked also waits while the checkpoint model
// (checkpoint.h) holds this process locked or checkpointed, as the real
// driver blocks every CUDA call of a locked process. kNoCheckpointWait is for
// the checkpoint model itself and the fake_cuda_* test API, which must see
// state while the process is held.
class Locked {
 public:
  enum NoCheckpointWait { kNoCheckpointWait };
  Locked();
  explicit Locked(NoCheckpointWait);
  ~Locked();
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;
};

// Counts a call of entry point `fn` (its exported name: pass __func__) and
// says whether the driver can serve it: CUDA_ERROR_NOT_INITIALIZED until
// cuInit has succeeded, as with the real driver.
CUresult Enter(const char* fn);

// Counts a call of an entry point that works before cuInit (cuInit itself,
// cuDriverGetVersion, cuGetErrorString/Name, cuGetProcAddress).
void EnterUninitialized(const char* fn);

void MarkInitialized();

// The checkpoint model's process state (CUprocessState). Set only by the
// model's watcher thread; Locked() waits while it is not RUNNING.
CUprocessState CheckpointState();
void SetCheckpointState(const Locked&, CUprocessState state);

// x rounded up to a multiple of `to` (a power of two or not), saturating at
// UINT64_MAX so that absurd sizes fail the capacity check instead of wrapping.
inline uint64_t RoundUp(uint64_t x, uint64_t to) {
  const uint64_t rem = x % to;
  if (rem == 0) return x;
  const uint64_t add = to - rem;
  return x > UINT64_MAX - add ? UINT64_MAX : x + add;
}

}  // namespace fake_cuda

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_STATE_H_
