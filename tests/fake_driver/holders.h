// holders.h — the fake GPU's model of gpuslice's holder kernel
// (src/interposer/holder.h gives its contract): a launch of a function named
// "gpuslice_holder" with (const uint32_t* release_word, uint32_t armed_value,
// uint64_t bound_ns) "runs" until *release_word != armed_value or bound_ns
// have passed. Nothing runs in the background: whether a holder is still
// running is read from the word and the clock when asked. cuCtxSynchronize
// waits for running holders, as a GPU's would, and counts that it had to.
//
// Thread-safe (its own mutex, never held while waiting).
//
// Modelled only when gpuslice is built with -DGPUSLICE_EXPERIMENTAL_HOLDER=ON
// (holders.cc is compiled then); otherwise these are empty inlines, a holder
// launch is an ordinary kernel of no length and the counts stay 0.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_HOLDERS_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_HOLDERS_H_

#include <cstdint>

namespace fake_cuda {

inline constexpr const char kHolderKernelName[] = "gpuslice_holder";

// What the test API reports (fake_cuda_api.h).
struct HolderCounts {
  uint64_t launched = 0;
  uint64_t running = 0;   // released: no, bound passed: no
  uint64_t released = 0;  // the word changed
  uint64_t expired = 0;   // the bound passed first (as far as the fake can tell)
  uint64_t last_bound_ns = 0;
  uint64_t syncs_waited = 0;
};

#if GPUSLICE_EXPERIMENTAL_HOLDER
// A launch of the holder kernel with its raw kernel parameters.
void LaunchHolder(void** params);
HolderCounts CountHolders();
// cuCtxSynchronize: returns once no holder runs.
void WaitForHolders();
void ResetHolders();
#else
inline void LaunchHolder(void**) {}
inline HolderCounts CountHolders() { return {}; }
inline void WaitForHolders() {}
inline void ResetHolders() {}
#endif

}  // namespace fake_cuda

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_HOLDERS_H_
