// hook_overhead_bench — what gpuslice adds to a driver call, on the CPU.
//
// Calls the same fake-driver functions two ways in one process: directly,
// and through libgpuslice-cuda.so (dlopen'ed, in a vGPU made for the run).
// The fake driver is cheap but not free: it takes a mutex on every call,
// including the cuCtxGetDevice our allocation hooks add. So the Ledger and
// Table benchmarks below also time gpuslice's own work alone.
// bench/gpu/launch_overhead.cu measures against the real driver on a GPU;
// docs/benchmarks.md records both.
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/hold_budget.h"
#include "core/memory_ledger.h"
#include "core/pacing_board.h"
#include "core/vgpu_store.h"
#include "interposer/allocation_table.h"
#include "port/process.h"

namespace {

struct Driver {
  decltype(&cuLaunchKernel) launch = nullptr;
  decltype(&cuMemAlloc_v2) alloc = nullptr;
  decltype(&cuMemFree_v2) free = nullptr;
};

Driver Load(void* handle) {
  Driver d;
  d.launch = reinterpret_cast<decltype(d.launch)>(dlsym(handle, "cuLaunchKernel"));
  d.alloc = reinterpret_cast<decltype(d.alloc)>(dlsym(handle, "cuMemAlloc_v2"));
  d.free = reinterpret_cast<decltype(d.free)>(dlsym(handle, "cuMemFree_v2"));
  return d;
}

Driver g_direct, g_hooked;
CUfunction g_function = nullptr;

bool Setup() {
  char tmpl[] = "/tmp/gpuslice-bench-XXXXXX";
  const std::string root = mkdtemp(tmpl);
  gpuslice::core::VgpuStore store(root);
  gpuslice::core::VgpuSpec spec;
  spec.name = "bench";
  gpuslice::core::DeviceSpec device;
  device.uuid = {0xfa, 0xce};  // the fake's GPU 0 (tests/fake_driver/fake_gpus.h)
  device.memory_limit_bytes = 64ull << 30;
  spec.devices.push_back(device);
  bool created = false;
  auto dir = store.CreateOrJoin(spec, true, &created);
  if (!dir.ok()) {
    fprintf(stderr, "%s\n", dir.status().message().c_str());
    return false;
  }
  setenv("GPUSLICE_VGPU_DIR", dir.value().c_str(), 1);
  setenv("GPUSLICE_REAL_DRIVER", GPUSLICE_FAKE_DRIVER, 1);
  void* fake = dlopen(GPUSLICE_FAKE_DRIVER, RTLD_NOW | RTLD_LOCAL);
  void* lib = dlopen(GPUSLICE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (fake == nullptr || lib == nullptr) {
    fprintf(stderr, "%s\n", dlerror());
    return false;
  }
  g_direct = Load(fake);
  g_hooked = Load(lib);
  auto init = reinterpret_cast<decltype(&cuInit)>(dlsym(fake, "cuInit"));
  auto retain = reinterpret_cast<decltype(&cuDevicePrimaryCtxRetain)>(dlsym(fake, "cuDevicePrimaryCtxRetain"));
  auto set = reinterpret_cast<decltype(&cuCtxSetCurrent)>(dlsym(fake, "cuCtxSetCurrent"));
  CUcontext ctx = nullptr;
  return init(0) == CUDA_SUCCESS && retain(&ctx, 0) == CUDA_SUCCESS && set(ctx) == CUDA_SUCCESS;
}

void Launch(benchmark::State& state, const Driver& d) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(d.launch(g_function, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
  }
}

void AllocFree(benchmark::State& state, const Driver& d) {
  for (auto _ : state) {
    CUdeviceptr p = 0;
    if (d.alloc(&p, 2u << 20) != CUDA_SUCCESS) state.SkipWithError("allocation failed");
    d.free(p);
  }
}

void BM_LaunchDirect(benchmark::State& s) { Launch(s, g_direct); }
void BM_LaunchThroughGpuslice(benchmark::State& s) { Launch(s, g_hooked); }
void BM_AllocFreeDirect(benchmark::State& s) { AllocFree(s, g_direct); }
void BM_AllocFreeThroughGpuslice(benchmark::State& s) { AllocFree(s, g_hooked); }
// gpuslice's own work in an allocation hook plus its free: one charge and
// one uncharge in the shared ledger (here with 4 live processes)...
void BM_LedgerChargeUncharge(benchmark::State& state) {
  static gpuslice::core::Limits limits{};
  static gpuslice::core::Ledger ledger{};
  limits.devices[0].memory_limit_bytes = 64ull << 30;
  const auto& probe = gpuslice::port::SystemProcessProbe();
  std::vector<gpuslice::core::MemoryLedger> others;
  for (uint32_t pid = 1; pid <= 3; ++pid) {
    others.emplace_back(&limits, &ledger);
    if (!others.back().Attach({pid, 1, 0}, probe).ok()) state.SkipWithError("attach failed");
  }
  gpuslice::core::MemoryLedger mine(&limits, &ledger);
  if (!mine.Attach(probe.Self(), probe).ok()) state.SkipWithError("attach failed");
  for (auto _ : state) {
    benchmark::DoNotOptimize(mine.TryCharge(0, 2u << 20));
    mine.Uncharge(0, 2u << 20);
  }
}

// ...and one insert and one erase in the allocation table.
void BM_TableInsertErase(benchmark::State& state) {
  static gpuslice::interposer::AllocationTable table;
  if (!table.Init()) state.SkipWithError("mmap failed");
  uint64_t key = 0x7f0000000000;
  gpuslice::interposer::AllocationRecord rec;
  for (auto _ : state) {
    key += 2u << 20;
    table.Insert(key, gpuslice::interposer::AllocationKind::kDevice, {2u << 20, 0, 0});
    benchmark::DoNotOptimize(table.Erase(key, gpuslice::interposer::AllocationKind::kDevice, &rec));
  }
}

// One check of the GPU-turn gate by a best-effort process beside another
// best-effort vGPU that holds the turn (backfill turns: it goes), as the
// pacer makes it when its last decision is older than 20 us: before the hold
// budget (TryEnter looks for holds itself), and now (the budget, then the
// holds, then TryEnter without them; interposer/pacer.cc, GateOpens).
struct GateBoard {
  GateBoard() {
    board = std::make_unique<gpuslice::core::Board>();
    gpuslice::core::InitBoard(board.get());
    now = 5'000'000'000;
    holder = gpuslice::core::JoinBoard(board.get(), 1, {}, now);
    me = gpuslice::core::JoinBoard(board.get(), 2, {}, now);
    config.backfill = true;
    gpuslice::core::TryEnter(board.get(), holder, now, config);
  }
  std::unique_ptr<gpuslice::core::Board> board;
  gpuslice::core::PacingConfig config;
  uint64_t now;
  int holder, me;
};

void BM_GateCheckBeforeTheBudget(benchmark::State& state) {
  GateBoard g;
  for (auto _ : state) {
    g.now += 100;
    benchmark::DoNotOptimize(gpuslice::core::TryEnter(g.board.get(), g.me, g.now, g.config));
  }
}

void BM_GateCheckWithTheBudget(benchmark::State& state) {
  GateBoard g;
  static gpuslice::core::HoldBudget budget;
  budget.Configure(gpuslice::core::kDefaultMaxHeldPct);
  for (auto _ : state) {
    g.now += 100;
    const bool held = budget.Holds(g.now) && gpuslice::core::LaunchesHeld(*g.board, g.me, g.now, true, g.config);
    benchmark::DoNotOptimize(held ? gpuslice::core::GateDecision::kWait
                                  : gpuslice::core::TryEnter(g.board.get(), g.me, g.now, g.config, 0, false));
  }
}

BENCHMARK(BM_LedgerChargeUncharge);
BENCHMARK(BM_GateCheckBeforeTheBudget);
BENCHMARK(BM_GateCheckWithTheBudget);
BENCHMARK(BM_TableInsertErase);
BENCHMARK(BM_LaunchDirect);
BENCHMARK(BM_LaunchThroughGpuslice);
BENCHMARK(BM_AllocFreeDirect);
BENCHMARK(BM_AllocFreeThroughGpuslice);

}  // namespace

int main(int argc, char** argv) {
  if (!Setup()) return 1;
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
