// checkpoint.h — the fake driver's model of the CUDA checkpoint API
// (cuCheckpointProcessLock/Checkpoint/Restore/Unlock/GetState/
// GetRestoreThreadId), across processes.
//
// The real driver lets one process (gpuslice's daemon) lock, checkpoint,
// restore and unlock another process's CUDA state by pid. The fake runs
// inside both processes, so the two halves meet in files under
// $FAKE_CHECKPOINT_DIR (unset: every cuCheckpoint* call answers
// CUDA_ERROR_NOT_SUPPORTED and nothing below starts):
//   <pid>.req    "SEQ OP TIMEOUT_MS [OLD NEW]..." written (by rename) by the caller
//   <pid>.ack    "SEQ CUresult" written by the target when it has acted
//   <pid>.state  "CUprocessState TID" written by the target at start and each change
//   <pid>.fail, any.fail   injected failures, one per line, read at each request:
//                "lock timeout" (waits TIMEOUT_MS as if a call never finished,
//                then CUDA_ERROR_TIMEOUT, the process left RUNNING),
//                "lock error", "checkpoint error" (stays LOCKED),
//                "restore error" (goes FAILED), "unlock error"
// The target's side is a watcher thread that cuInit starts (never dlopen):
// it polls <pid>.req every 2 ms. A lock takes the driver's one mutex, so it
// waits for calls in flight; while the process is not RUNNING every call
// blocks in Locked() (state.h). A checkpoint returns all the process's device
// memory (the per-process file that the fake NVML reads drops to 0) and a
// restore takes it back, on the devices that the GPU UUID pairs name.
//
// Thread-safe. The caller's functions block up to the request's deadline.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_CHECKPOINT_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_CHECKPOINT_H_

namespace fake_cuda {

// Starts the watcher once, when $FAKE_CHECKPOINT_DIR is set. Called by cuInit.
void StartCheckpointWatcher();

}  // namespace fake_cuda

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_CHECKPOINT_H_
