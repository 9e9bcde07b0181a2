// The checkpoint API through dlopen (checkpoint_driver.h).
#include "node/checkpoint_driver.h"

#include <cuda.h>
#include <dlfcn.h>

#include <cstring>

#include "port/driver_locator.h"

namespace gpuslice::node {
namespace {

using LockFn = CUresult (*)(int, CUcheckpointLockArgs*);
using CheckpointFn = CUresult (*)(int, CUcheckpointCheckpointArgs*);
using RestoreFn = CUresult (*)(int, CUcheckpointRestoreArgs*);
using UnlockFn = CUresult (*)(int, CUcheckpointUnlockArgs*);
using GetStateFn = CUresult (*)(int, CUprocessState*);
using GetErrorNameFn = CUresult (*)(CUresult, const char**);

class DlopenCheckpointDriver final : public CheckpointDriver {
 public:
  explicit DlopenCheckpointDriver(void* lib) : lib_(lib) {}
  // The library stays loaded for the daemon's life: the driver keeps
  // threads of its own.
  bool Resolve() {
    lock_ = reinterpret_cast<LockFn>(dlsym(lib_, "cuCheckpointProcessLock"));
    checkpoint_ = reinterpret_cast<CheckpointFn>(dlsym(lib_, "cuCheckpointProcessCheckpoint"));
    restore_ = reinterpret_cast<RestoreFn>(dlsym(lib_, "cuCheckpointProcessRestore"));
    unlock_ = reinterpret_cast<UnlockFn>(dlsym(lib_, "cuCheckpointProcessUnlock"));
    get_state_ = reinterpret_cast<GetStateFn>(dlsym(lib_, "cuCheckpointProcessGetState"));
    error_name_ = reinterpret_cast<GetErrorNameFn>(dlsym(lib_, "cuGetErrorName"));
    return lock_ && checkpoint_ && restore_ && unlock_ && get_state_;
  }

  CheckpointResult Lock(uint32_t pid, std::chrono::milliseconds timeout) override {
    CUcheckpointLockArgs args{};
    args.timeoutMs = static_cast<unsigned>(timeout.count());
    return Result(lock_(static_cast<int>(pid), &args));
  }
  CheckpointResult Checkpoint(uint32_t pid) override {
    return Result(checkpoint_(static_cast<int>(pid), nullptr));
  }
  CheckpointResult Restore(uint32_t pid) override { return Result(restore_(static_cast<int>(pid), nullptr)); }
  CheckpointResult RestoreOnto(uint32_t pid, const std::vector<GpuPair>& pairs) override {
    std::vector<CUcheckpointGpuPair> cu(pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i) {
      memcpy(cu[i].oldUuid.bytes, pairs[i].first.data(), 16);
      memcpy(cu[i].newUuid.bytes, pairs[i].second.data(), 16);
    }
    CUcheckpointRestoreArgs args{};
    args.gpuPairs = cu.data();
    args.gpuPairsCount = static_cast<unsigned>(cu.size());
    return Result(restore_(static_cast<int>(pid), &args));
  }
  CheckpointResult Unlock(uint32_t pid) override { return Result(unlock_(static_cast<int>(pid), nullptr)); }
  ProcessCheckpointState State(uint32_t pid) override {
    CUprocessState s{};
    if (get_state_(static_cast<int>(pid), &s) != CUDA_SUCCESS) return ProcessCheckpointState::kUnknown;
    switch (s) {
      case CU_PROCESS_STATE_RUNNING: return ProcessCheckpointState::kRunning;
      case CU_PROCESS_STATE_LOCKED: return ProcessCheckpointState::kLocked;
      case CU_PROCESS_STATE_CHECKPOINTED: return ProcessCheckpointState::kCheckpointed;
      case CU_PROCESS_STATE_FAILED: return ProcessCheckpointState::kFailed;
    }
    return ProcessCheckpointState::kUnknown;
  }

 private:
  CheckpointResult Result(CUresult r) const {
    CheckpointResult out;
    out.code = static_cast<int>(r);
    if (r == CUDA_SUCCESS) return out;
    const char* name = nullptr;
    if (error_name_ != nullptr && error_name_(r, &name) == CUDA_SUCCESS && name != nullptr) {
      out.error = name;
    } else {
      out.error = "CUresult " + std::to_string(out.code);
    }
    return out;
  }

  void* const lib_;
  LockFn lock_ = nullptr;
  CheckpointFn checkpoint_ = nullptr;
  RestoreFn restore_ = nullptr;
  UnlockFn unlock_ = nullptr;
  GetStateFn get_state_ = nullptr;
  GetErrorNameFn error_name_ = nullptr;
};

}  // namespace

CheckpointResult CheckpointDriver::RestoreOnto(uint32_t, const std::vector<GpuPair>&) {
  CheckpointResult out;
  out.code = 801;  // CUDA_ERROR_NOT_SUPPORTED
  out.error = "CUDA_ERROR_NOT_SUPPORTED";
  return out;
}

const char* ProcessCheckpointStateName(ProcessCheckpointState s) {
  switch (s) {
    case ProcessCheckpointState::kRunning: return "running";
    case ProcessCheckpointState::kLocked: return "locked";
    case ProcessCheckpointState::kCheckpointed: return "checkpointed";
    case ProcessCheckpointState::kFailed: return "failed";
    case ProcessCheckpointState::kUnknown: break;
  }
  return "unknown";
}

bool CheckpointResult::timed_out() const { return code == static_cast<int>(CUDA_ERROR_TIMEOUT); }

std::unique_ptr<CheckpointDriver> OpenCheckpointDriver(std::string* error) {
  const std::string path = port::LocateRealCudaDriver(nullptr);
  if (path.empty()) {
    *error = "no libcuda.so.1 found: install the NVIDIA driver (or set GPUSLICE_REAL_DRIVER)";
    return nullptr;
  }
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    *error = "cannot open " + path + ": " + (why ? why : "unknown");
    return nullptr;
  }
  auto driver = std::make_unique<DlopenCheckpointDriver>(lib);
  if (!driver->Resolve()) {
    *error = path + " has no checkpoint API (cuCheckpointProcess*): suspend needs driver 555 or newer";
    return nullptr;
  }
  return driver;
}

}  // namespace gpuslice::node
