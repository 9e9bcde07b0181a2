// The checkpoint API's model (checkpoint.h): the caller's entry points and
// the target's watcher thread.
#include "checkpoint.h"

#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_gpus.h"
#include "physical.h"
#include "state.h"

namespace fake_cuda {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(2);
// How long a caller waits for a target to answer a request other than a
// lock with a timeout: long enough for a loaded CI machine, short enough
// that a wedged test fails instead of hanging.
constexpr auto kAnswerDeadline = std::chrono::seconds(30);

std::string Dir() {
  const char* d = getenv("FAKE_CHECKPOINT_DIR");
  return d == nullptr ? std::string() : std::string(d);
}

std::string PathOf(const std::string& dir, long pid, const char* suffix) {
  return dir + "/" + std::to_string(pid) + suffix;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

void WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  fputs(text.c_str(), f);
  fclose(f);
  rename(tmp.c_str(), path.c_str());
}

bool Alive(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

// --- the target's side ---------------------------------------------------------

struct Saved {
  std::array<uint64_t, fake_gpus::kMaxGpus> bytes{};  // per device, while CHECKPOINTED
};

bool Injected(const std::string& dir, const std::string& what) {
  for (const std::string& file : {PathOf(dir, getpid(), ".fail"), dir + "/any.fail"}) {
    std::string text;
    if (!ReadFile(file, &text)) continue;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (line == what) return true;
    }
  }
  return false;
}

void PublishState(const std::string& dir, CUprocessState state, long tid) {
  WriteFileAtomically(PathOf(dir, getpid(), ".state"),
                      std::to_string(static_cast<int>(state)) + " " + std::to_string(tid) + "\n");
}

int DeviceOfUuid(const CUuuid& uuid) {
  for (int i = 0; i < DeviceCount(); ++i) {
    const auto bytes = fake_gpus::Uuid(i);
    if (memcmp(bytes.data(), uuid.bytes, bytes.size()) == 0) return i;
  }
  return -1;
}

CUresult Act(const std::string& dir, const std::string& op, unsigned timeout_ms,
             const std::vector<std::pair<int, int>>& pairs, Saved* saved) {
  if (op == "lock") {
    if (Injected(dir, "lock timeout")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
      return CUDA_ERROR_TIMEOUT;
    }
    if (Injected(dir, "lock error")) return CUDA_ERROR_UNKNOWN;
    Locked locked(Locked::kNoCheckpointWait);  // waits for the call in flight, if any
    if (CheckpointState() != CU_PROCESS_STATE_RUNNING) return CUDA_ERROR_ILLEGAL_STATE;
    SetCheckpointState(locked, CU_PROCESS_STATE_LOCKED);
    return CUDA_SUCCESS;
  }
  if (op == "checkpoint") {
    Locked locked(Locked::kNoCheckpointWait);
    if (CheckpointState() != CU_PROCESS_STATE_LOCKED) return CUDA_ERROR_ILLEGAL_STATE;
    if (Injected(dir, "checkpoint error")) return CUDA_ERROR_UNKNOWN;
    for (int d = 0; d < DeviceCount(); ++d) {
      saved->bytes[d] = PhysicalUsed(locked, d);
      ReturnPhysical(locked, d, saved->bytes[d]);
    }
    SetCheckpointState(locked, CU_PROCESS_STATE_CHECKPOINTED);
    return CUDA_SUCCESS;
  }
  if (op == "restore") {
    Locked locked(Locked::kNoCheckpointWait);
    if (CheckpointState() != CU_PROCESS_STATE_CHECKPOINTED) return CUDA_ERROR_ILLEGAL_STATE;
    if (Injected(dir, "restore error")) {
      SetCheckpointState(locked, CU_PROCESS_STATE_FAILED);
      return CUDA_ERROR_UNKNOWN;
    }
    // As the real driver: with pairs, every checkpointed GPU must be named.
    std::array<int, fake_gpus::kMaxGpus> target{};
    for (int d = 0; d < fake_gpus::kMaxGpus; ++d) target[d] = pairs.empty() ? d : -1;
    for (const auto& [from, to] : pairs) {
      if (from < 0 || to < 0) return CUDA_ERROR_INVALID_VALUE;
      target[from] = to;
    }
    for (int d = 0; d < DeviceCount(); ++d) {
      if (saved->bytes[d] > 0 && target[d] < 0) return CUDA_ERROR_INVALID_VALUE;
    }
    for (int d = 0; d < DeviceCount(); ++d) {
      if (saved->bytes[d] > 0 && !TakePhysical(locked, target[d], saved->bytes[d])) {
        SetCheckpointState(locked, CU_PROCESS_STATE_FAILED);
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
    }
    saved->bytes.fill(0);
    SetCheckpointState(locked, CU_PROCESS_STATE_LOCKED);
    return CUDA_SUCCESS;
  }
  if (op == "unlock") {
    Locked locked(Locked::kNoCheckpointWait);
    if (CheckpointState() != CU_PROCESS_STATE_LOCKED) return CUDA_ERROR_ILLEGAL_STATE;
    if (Injected(dir, "unlock error")) return CUDA_ERROR_UNKNOWN;
    SetCheckpointState(locked, CU_PROCESS_STATE_RUNNING);
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

void Watch(std::string dir) {
  const long tid = syscall(SYS_gettid);
  Saved saved;
  std::string last_seq;
  PublishState(dir, CheckpointState(), tid);
  const std::string req_path = PathOf(dir, getpid(), ".req");
  for (;;) {
    std::this_thread::sleep_for(kPoll);
    std::string text;
    if (!ReadFile(req_path, &text)) continue;
    std::istringstream in(text);
    std::string seq, op;
    unsigned timeout_ms = 0;
    if (!(in >> seq >> op >> timeout_ms) || seq == last_seq) continue;
    std::vector<std::pair<int, int>> pairs;
    for (std::string from, to; in >> from >> to;) {
      CUuuid a{}, b{};
      for (int i = 0; i < 16 && from.size() == 32 && to.size() == 32; ++i) {
        a.bytes[i] = static_cast<char>(std::stoi(from.substr(2 * i, 2), nullptr, 16));
        b.bytes[i] = static_cast<char>(std::stoi(to.substr(2 * i, 2), nullptr, 16));
      }
      pairs.emplace_back(DeviceOfUuid(a), DeviceOfUuid(b));
    }
    last_seq = seq;
    const CUresult r = Act(dir, op, timeout_ms, pairs, &saved);
    PublishState(dir, CheckpointState(), tid);
    WriteFileAtomically(PathOf(dir, getpid(), ".ack"), seq + " " + std::to_string(static_cast<int>(r)) + "\n");
  }
}

// --- the caller's side ---------------------------------------------------------

CUresult ReadState(int pid, CUprocessState* state, int* tid) {
  const std::string dir = Dir();
  if (dir.empty()) return CUDA_ERROR_NOT_SUPPORTED;
  std::string text;
  // No watcher: the process never initialised CUDA, which the real driver
  // also refuses.
  if (!Alive(pid) || !ReadFile(PathOf(dir, pid, ".state"), &text)) return CUDA_ERROR_INVALID_VALUE;
  int s = 0, t = 0;
  if (sscanf(text.c_str(), "%d %d", &s, &t) != 2) return CUDA_ERROR_INVALID_VALUE;
  if (state != nullptr) *state = static_cast<CUprocessState>(s);
  if (tid != nullptr) *tid = t;
  return CUDA_SUCCESS;
}

std::string Hex(const CUuuid& u) {
  char out[33];
  for (int i = 0; i < 16; ++i) snprintf(out + 2 * i, 3, "%02x", static_cast<unsigned char>(u.bytes[i]));
  return out;
}

CUresult Request(int pid, const std::string& op, unsigned timeout_ms, const std::string& extra = "") {
  if (CUresult r = ReadState(pid, nullptr, nullptr); r != CUDA_SUCCESS) return r;
  const std::string dir = Dir();
  static std::mutex mu;  // one request per caller process at a time
  std::lock_guard<std::mutex> guard(mu);
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const std::string seq = std::to_string(getpid()) + "." + std::to_string(now.tv_sec * 1000000000ll + now.tv_nsec);
  WriteFileAtomically(PathOf(dir, pid, ".req"), seq + " " + op + " " + std::to_string(timeout_ms) + extra + "\n");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms) + kAnswerDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string text;
    if (ReadFile(PathOf(dir, pid, ".ack"), &text)) {
      std::istringstream in(text);
      std::string got;
      int code = 0;
      if (in >> got >> code && got == seq) return static_cast<CUresult>(code);
    }
    if (!Alive(pid)) return CUDA_ERROR_INVALID_VALUE;
    std::this_thread::sleep_for(kPoll);
  }
  return CUDA_ERROR_TIMEOUT;
}

}  // namespace

void StartCheckpointWatcher() {
  // Once per process, not once per load: a forked child that calls cuInit
  // needs its own watcher (threads do not survive fork).
  static std::mutex mu;
  static pid_t started_in = 0;
  std::lock_guard<std::mutex> guard(mu);
  if (started_in == getpid()) return;
  std::string dir = Dir();
  if (dir.empty()) return;
  started_in = getpid();
  std::thread(Watch, std::move(dir)).detach();
}

}  // namespace fake_cuda

// The checkpoint API works without cuInit in the calling process: the
// daemon calls it with no context (docs/gpu-facts.md).
extern "C" {

CUresult cuCheckpointProcessGetState(int pid, CUprocessState* state) {
  fake_cuda::EnterUninitialized(__func__);
  if (state == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return fake_cuda::ReadState(pid, state, nullptr);
}

CUresult cuCheckpointProcessGetRestoreThreadId(int pid, int* tid) {
  fake_cuda::EnterUninitialized(__func__);
  if (tid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return fake_cuda::ReadState(pid, nullptr, tid);
}

CUresult cuCheckpointProcessLock(int pid, CUcheckpointLockArgs* args) {
  fake_cuda::EnterUninitialized(__func__);
  return fake_cuda::Request(pid, "lock", args != nullptr ? args->timeoutMs : 0);
}

CUresult cuCheckpointProcessCheckpoint(int pid, CUcheckpointCheckpointArgs*) {
  fake_cuda::EnterUninitialized(__func__);
  return fake_cuda::Request(pid, "checkpoint", 0);
}

CUresult cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs* args) {
  fake_cuda::EnterUninitialized(__func__);
  std::string pairs;
  if (args != nullptr && args->gpuPairsCount > 0) {
    if (args->gpuPairs == nullptr) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < args->gpuPairsCount; ++i) {
      pairs += " " + fake_cuda::Hex(args->gpuPairs[i].oldUuid) + " " + fake_cuda::Hex(args->gpuPairs[i].newUuid);
    }
  }
  return fake_cuda::Request(pid, "restore", 0, pairs);
}

CUresult cuCheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs*) {
  fake_cuda::EnterUninitialized(__func__);
  return fake_cuda::Request(pid, "unlock", 0);
}

}  // extern "C"
