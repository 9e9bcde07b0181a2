// checkpoint_driver.h — the CUDA driver's checkpoint API on another process
// (cuCheckpointProcessLock/Checkpoint/Restore/Unlock/GetState), as the
// daemon's suspend and resume of a vGPU use it (vgpu_suspender.h).
//
// An interface so that the suspend sequence is tested with a scripted fake;
// OpenCheckpointDriver() is the real one: libcuda opened with dlopen by
// absolute path (port/driver_locator.h; tests point $GPUSLICE_REAL_DRIVER at
// the fake driver), the entry points typed from cuda.h. The daemon needs no
// CUDA context for these calls, and makes none.
//
// Thread-safe: the driver serialises calls on one pid; calls block up to
// the lock's timeout (lock) or until the target acted (the others).
#ifndef GPUSLICE_NODE_CHECKPOINT_DRIVER_H_
#define GPUSLICE_NODE_CHECKPOINT_DRIVER_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpuslice::node {

// CUprocessState, without cuda.h in this header.
enum class ProcessCheckpointState { kRunning, kLocked, kCheckpointed, kFailed, kUnknown };

const char* ProcessCheckpointStateName(ProcessCheckpointState s);

// The outcome of one call: ok, or the driver's CUresult and its name.
struct CheckpointResult {
  int code = 0;         // CUresult; 0 = CUDA_SUCCESS
  std::string error;    // "CUDA_ERROR_TIMEOUT", ...; "" when ok
  bool ok() const { return code == 0; }
  bool timed_out() const;
};

class CheckpointDriver {
 public:
  virtual ~CheckpointDriver() = default;
  // Waits for the process's calls in flight, up to `timeout` (0: forever),
  // then blocks all its further CUDA calls.
  virtual CheckpointResult Lock(uint32_t pid, std::chrono::milliseconds timeout) = 0;
  // Copies a locked process's device memory to host memory and releases it.
  virtual CheckpointResult Checkpoint(uint32_t pid) = 0;
  // Takes device memory back and copies the contents in; the process stays locked.
  virtual CheckpointResult Restore(uint32_t pid) = 0;
  // The same onto other GPUs: each pair (old UUID, new UUID), one for every
  // GPU the process checkpointed (CUcheckpointRestoreArgs::gpuPairs). The
  // default answers that this driver cannot.
  using GpuPair = std::pair<std::array<uint8_t, 16>, std::array<uint8_t, 16>>;
  virtual CheckpointResult RestoreOnto(uint32_t pid, const std::vector<GpuPair>& pairs);
  virtual CheckpointResult Unlock(uint32_t pid) = 0;
  virtual ProcessCheckpointState State(uint32_t pid) = 0;
};

// The driver through dlopen. Null, with `*error` set, when libcuda cannot
// be found or lacks the checkpoint API (a driver older than 555).
std::unique_ptr<CheckpointDriver> OpenCheckpointDriver(std::string* error);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_CHECKPOINT_DRIVER_H_
