#include "state.h"

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "entry_points.h"

namespace fake_cuda {
namespace {

std::mutex& Mutex() {
  static std::mutex* mu = new std::mutex;  // never destroyed: see fake_gpus.cc
  return *mu;
}

std::condition_variable& Resumed() {
  static auto* cv = new std::condition_variable;
  return *cv;
}

std::atomic<bool> g_initialized{false};
// Written under the mutex; read under it by Locked() and lock-free by
// CheckpointState().
std::atomic<CUprocessState> g_checkpoint_state{CU_PROCESS_STATE_RUNNING};

}  // namespace

Locked::Locked() {
  // Taken with the mutex, so a call in flight finishes before a lock
  // succeeds and no call starts while the process is held.
  std::unique_lock<std::mutex> lock(Mutex());
  Resumed().wait(lock, [] { return g_checkpoint_state.load(std::memory_order_relaxed) == CU_PROCESS_STATE_RUNNING; });
  lock.release();
}
Locked::Locked(NoCheckpointWait) { Mutex().lock(); }
Locked::~Locked() { Mutex().unlock(); }

CUresult Enter(const char* fn) {
  CountCall(fn);
  return g_initialized.load(std::memory_order_acquire) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

void EnterUninitialized(const char* fn) { CountCall(fn); }

void MarkInitialized() { g_initialized.store(true, std::memory_order_release); }

CUprocessState CheckpointState() { return g_checkpoint_state.load(std::memory_order_acquire); }

void SetCheckpointState(const Locked&, CUprocessState state) {
  g_checkpoint_state.store(state, std::memory_order_release);
  Resumed().notify_all();
}

}  // namespace fake_cuda
