// The checkpoint API's model across two real processes: this test is the
// caller (as gpuslice's daemon is), a forked child the CUDA application.
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "fake_driver_test_util.h"

namespace fake_driver_test {
namespace {

namespace fs = std::filesystem;

// A child that initialises CUDA, takes 64 MiB on device 0, then answers
// each byte on its command pipe with one cuMemAlloc_v2 of 1 MiB (the
// CUresult, one byte).
class Target {
 public:
  explicit Target(const fs::path& dir) {
    setenv("FAKE_CHECKPOINT_DIR", dir.c_str(), 1);
    setenv("FAKE_GPU_PROCESS_DIR", dir.c_str(), 1);
    CudaHandle();  // loaded before fork, never initialised in this process
    int to_child[2], from_child[2];
    EXPECT_EQ(pipe(to_child), 0);
    EXPECT_EQ(pipe(from_child), 0);
    pid_ = fork();
    if (pid_ == 0) {
      CUcontext ctx = nullptr;
      char r = static_cast<char>(CU(cuInit)(0));
      if (r == 0) r = static_cast<char>(CU(cuDevicePrimaryCtxRetain)(&ctx, 0));
      if (r == 0) r = static_cast<char>(CU(cuCtxSetCurrent)(ctx));
      CUdeviceptr p = 0;
      if (r == 0) r = static_cast<char>(CU(cuMemAlloc_v2)(&p, 64 * kMiB));
      (void)!write(from_child[1], &r, 1);
      for (char c; read(to_child[0], &c, 1) == 1;) {
        r = static_cast<char>(CU(cuMemAlloc_v2)(&p, kMiB));
        (void)!write(from_child[1], &r, 1);
      }
      _exit(0);
    }
    close(to_child[0]);
    close(from_child[1]);
    to_ = to_child[1];
    from_ = from_child[0];
    char r = -1;
    EXPECT_EQ(read(from_, &r, 1), 1);
    EXPECT_EQ(r, 0);
    // The watcher publishes its state shortly after cuInit.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!fs::exists(dir / (std::to_string(pid_) + ".state")) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    dir_ = dir;
  }
  ~Target() {
    close(to_);
    close(from_);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  int pid() const { return pid_; }
  void Ask() { ASSERT_EQ(write(to_, "a", 1), 1); }
  // The answer to Ask, or -1 when none came within `ms`.
  int Answer(int ms) {
    pollfd p{from_, POLLIN, 0};
    if (poll(&p, 1, ms) != 1) return -1;
    char r = -1;
    return read(from_, &r, 1) == 1 ? r : -1;
  }
  // Device 0's bytes, as the fake NVML reads them.
  uint64_t Published() const {
    std::ifstream f(dir_ / std::to_string(pid_));
    int device = -1;
    unsigned long long bytes = 0;
    f >> device >> bytes;
    return bytes;
  }
  CUprocessState State() const {
    CUprocessState s = CU_PROCESS_STATE_FAILED;
    EXPECT_EQ(CU(cuCheckpointProcessGetState)(pid_, &s), CUDA_SUCCESS);
    return s;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  fs::path dir_;
};

fs::path FreshDir(const char* name) {
  const fs::path dir = fs::temp_directory_path() / (std::string("fake-ckpt-") + name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(FakeCheckpoint, LockBlocksCallsCheckpointFreesRestoreReturns) {
  const fs::path dir = FreshDir("cycle");
  Target t(dir);
  EXPECT_EQ(t.State(), CU_PROCESS_STATE_RUNNING);
  EXPECT_EQ(t.Published(), 64 * kMiB);
  int tid = 0;
  EXPECT_EQ(CU(cuCheckpointProcessGetRestoreThreadId)(t.pid(), &tid), CUDA_SUCCESS);
  EXPECT_GT(tid, 0);

  CUcheckpointLockArgs lock{};
  lock.timeoutMs = 5000;
  ASSERT_EQ(CU(cuCheckpointProcessLock)(t.pid(), &lock), CUDA_SUCCESS);
  EXPECT_EQ(t.State(), CU_PROCESS_STATE_LOCKED);
  // A lock of a locked process is refused, as by the real driver.
  EXPECT_EQ(CU(cuCheckpointProcessLock)(t.pid(), &lock), CUDA_ERROR_ILLEGAL_STATE);
  t.Ask();
  EXPECT_EQ(t.Answer(300), -1) << "a CUDA call went through while the process was locked";

  ASSERT_EQ(CU(cuCheckpointProcessCheckpoint)(t.pid(), nullptr), CUDA_SUCCESS);
  EXPECT_EQ(t.State(), CU_PROCESS_STATE_CHECKPOINTED);
  EXPECT_EQ(t.Published(), 0u);
  EXPECT_EQ(CU(cuCheckpointProcessUnlock)(t.pid(), nullptr), CUDA_ERROR_ILLEGAL_STATE);

  ASSERT_EQ(CU(cuCheckpointProcessRestore)(t.pid(), nullptr), CUDA_SUCCESS);
  EXPECT_EQ(t.State(), CU_PROCESS_STATE_LOCKED);
  EXPECT_EQ(t.Published(), 64 * kMiB);
  ASSERT_EQ(CU(cuCheckpointProcessUnlock)(t.pid(), nullptr), CUDA_SUCCESS);
  EXPECT_EQ(t.State(), CU_PROCESS_STATE_RUNNING);
  // The blocked call completes once the process runs again.
  EXPECT_EQ(t.Answer(10000), 0);
  EXPECT_EQ(t.Published(), 65 * kMiB);
}

TEST(FakeCheckpoint, RestoreOntoAnotherGpuByUuidPairs) {
  const fs::path dir = FreshDir("migrate");
  Target t(dir);
  ASSERT_EQ(CU(cuCheckpointProcessLock)(t.pid(), nullptr), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuCheckpointProcessCheckpoint)(t.pid(), nullptr), CUDA_SUCCESS);
  CUcheckpointGpuPair pair{};
  pair.oldUuid.bytes[0] = static_cast<char>(0xfa);
  pair.oldUuid.bytes[1] = static_cast<char>(0xce);
  pair.newUuid = pair.oldUuid;
  pair.newUuid.bytes[15] = 1;
  CUcheckpointRestoreArgs args{};
  args.gpuPairs = &pair;
  args.gpuPairsCount = 1;
  ASSERT_EQ(CU(cuCheckpointProcessRestore)(t.pid(), &args), CUDA_SUCCESS);
  std::ifstream f(dir / std::to_string(t.pid()));
  int d0 = -1, d1 = -1;
  unsigned long long b0 = 0, b1 = 0;
  f >> d0 >> b0 >> d1 >> b1;
  EXPECT_EQ(b0, 0u);
  EXPECT_EQ(b1, 64 * kMiB);
  EXPECT_EQ(CU(cuCheckpointProcessUnlock)(t.pid(), nullptr), CUDA_SUCCESS);
}

TEST(FakeCheckpoint, InjectedFailures) {
  const fs::path dir = FreshDir("fail");
  Target t(dir);
  std::ofstream(dir / (std::to_string(t.pid()) + ".fail")) << "lock timeout\n";
  CUcheckpointLockArgs lock{};
  lock.timeoutMs = 50;
  EXPECT_EQ(CU(cuCheckpointProcessLock)(t.pid(), &lock), CUDA_ERROR_TIMEOUT);
  EXPECT_EQ(t.State(), CU_PROCESS_STATE_RUNNING);
  t.Ask();
  EXPECT_EQ(t.Answer(10000), 0) << "a timed-out lock must leave the process running";

  std::ofstream(dir / (std::to_string(t.pid()) + ".fail")) << "restore error\n";
  ASSERT_EQ(CU(cuCheckpointProcessLock)(t.pid(), &lock), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuCheckpointProcessCheckpoint)(t.pid(), nullptr), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuCheckpointProcessRestore)(t.pid(), nullptr), CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(t.State(), CU_PROCESS_STATE_FAILED);
}

TEST(FakeCheckpoint, UnknownOrDeadProcessIsInvalid) {
  const fs::path dir = FreshDir("dead");
  setenv("FAKE_CHECKPOINT_DIR", dir.c_str(), 1);
  CUprocessState s;
  EXPECT_EQ(CU(cuCheckpointProcessGetState)(getpid(), &s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuCheckpointProcessLock)(getpid(), nullptr), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace fake_driver_test
