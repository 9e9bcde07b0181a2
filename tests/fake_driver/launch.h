// launch.h — the fake's kernel launches: a launch counts (graphs add their
// kernel nodes when launched), and, when a test asks for it, takes GPU time
// and is written down where every process of the test can read it.
//
// Environment (read once, at the first launch):
//   FAKE_KERNEL_US=N    each kernel this process launches runs N µs, after
//                       the ones it launched before (one timeline per
//                       process, whatever the stream or device: under
//                       gpuslice's GPU turns one vGPU's work has the GPU at a
//                       time). At most kQueuedKernels wait to run; a launch
//                       beyond them blocks until one is done, as a full
//                       launch queue does. Events recorded after a kernel
//                       complete when it does (cuEventQuery says
//                       CUDA_ERROR_NOT_READY until then), and
//                       cuStreamSynchronize/cuEventSynchronize wait for it
//                       (streams.h). Kernel nodes of graphs, gpuslice's
//                       holder kernel and cuCtxSynchronize are not part of
//                       this model. Unset or 0 (the default): a kernel is
//                       done the moment it is launched.
//   FAKE_LAUNCH_STALL=EVERY:US  every EVERY-th kernel launch of this process
//                       stalls US µs (at most 1 s) before its kernel is
//                       queued: a thread descheduled after gpuslice's gate
//                       let the launch through and before it reached the GPU.
//                       Unset (the default): no stalls.
//   FAKE_GPU_RECORD=PATH  a file (created if missing) in which every process
//                       given the same PATH records its kernel launches, as
//                       struct GpuRecord: what the one GPU of a test was asked
//                       to run, and whether two processes' work met on it.
//                       Unset (the default): nothing is recorded.
//
// Thread-safe and lock-free, except the record (a spinlock in the file,
// held for a few loads and stores); never allocates after the first launch.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_LAUNCH_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_LAUNCH_H_

#include <cstdint>

namespace fake_cuda {

void AddLaunches(uint64_t count);
uint64_t LaunchCount();
void ResetLaunchCount();

inline constexpr uint64_t kQueuedKernels = 64;

// CLOCK_MONOTONIC, ns.
uint64_t NowNs();
// When all kernels this process has launched so far are done (CLOCK_MONOTONIC
// ns; in the past, or 0, when nothing is left to run).
uint64_t WorkDoneAtNs();
// Blocks until `at_ns` has passed (at once for 0 or a past time).
void WaitUntilNs(uint64_t at_ns);

// The layout of FAKE_GPU_RECORD, 64 bytes, native endianness.
struct GpuRecord {
  uint64_t lock;          // 0 free, 1 held
  uint64_t launches;      // kernels launched by all processes
  uint64_t hand_changes;  // launches whose previous launch was another process's
  uint64_t overlaps;      // ... made while that process's kernels were still to finish
  uint64_t last_pid;      // the process of the latest launch
  uint64_t last_done_ns;  // when the work of that process is done
  uint64_t reserved[2];
};
static_assert(sizeof(GpuRecord) == 64);

}  // namespace fake_cuda

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_LAUNCH_H_
