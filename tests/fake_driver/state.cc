#include "state.h"

#include <atomic>
#include <mutex>

#include "entry_points.h"

namespace fake_cuda {
namespace {

std::mutex& Mutex() {
  static std::mutex* mu = new std::mutex;  // never destroyed: see fake_gpus.cc
  return *mu;
}

std::atomic<bool> g_initialized{false};

}  // namespace

Locked::Locked() { Mutex().lock(); }
Locked::~Locked() { Mutex().unlock(); }

CUresult Enter(const char* fn) {
  CountCall(fn);
  return g_initialized.load(std::memory_order_acquire) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

void EnterUninitialized(const char* fn) { CountCall(fn); }

void MarkInitialized() { g_initialized.store(true, std::memory_order_release); }

}  // namespace fake_cuda
