// cuda_app — a scriptable CUDA application for integration tests.
//
// It reaches the driver the ways real programs do, chosen by --lookup:
//   link        calls the functions it was linked against (cuda_app_linked)
//   dlsym       dlopen("libcuda.so.1") + dlsym, as frameworks do
//   procaddress dlopen + cuGetProcAddress_v2, as the CUDA 12/13 runtime does
//   ptds        the same with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
// then runs commands from argv, printing one line per command:
//   init [DEV]          cuInit, retain DEV's primary context, make it current
//   ctxcreate           cuCtxCreate_v4: one more context of this process on the
//                       current context's device, made current -> "ctxcreate ok"
//   alloc SIZE          cuMemAlloc            -> "alloc ok" | "alloc oom" | "alloc err N"
//   free                frees the newest allocation of any kind
//   pitch W H | managed SIZE | vmm SIZE | array W H | array3d W H D | mipmap W H LEVELS
//   vmmmap SIZE         NVIDIA's VMM idiom: cuMemCreate, cuMemAddressReserve,
//                       cuMemMap, cuMemSetAccess, then cuMemRelease at once (the
//                       mapping keeps the memory) -> "vmmmap ok" | "vmmmap oom"
//   map SIZE            maps the newest `vmm` handle's first SIZE bytes at a new
//                       reservation (a handle may be mapped many times)
//   release             cuMemRelease of the newest `vmm` handle, its mappings kept
//   unmap               cuMemUnmap + cuMemAddressFree of the newest mapping
//   async SIZE          cuMemAllocAsync on the default pool
//   pool                cuMemPoolCreate on the current device (then poolalloc uses it)
//   poolalloc SIZE      cuMemAllocFromPoolAsync
//   defaultpool DEV     DEV's default pool (cuDeviceGetDefaultMemPool) becomes
//                       the one poolalloc uses, whatever device is current
//   stream DEV          cuStreamCreate in DEV's primary context (pushed, then
//                       popped: the current context stays as it was)
//   asyncon SIZE        cuMemAllocAsync on the newest `stream`
//   sync | trim         cuStreamSynchronize(0) | cuMemPoolTrimTo(pool, 0) on every pool
//   graph SIZE          a graph with one memory-allocation node, instantiated
//   graphvia HOW SIZE   the same, instantiated by HOW: instantiate (the legacy
//                       cuGraphInstantiate), instantiate_v2, flags or params
//   launch              cuGraphLaunch of the newest graph
//   ctxreset V          cuDevicePrimaryCtxReset (V = v1) or _v2 (V = v2) of the
//                       current device: its context's memory is freed
//   ctxrelease V        cuDevicePrimaryCtxRelease (v1) or _v2 (v2) of the
//                       current device (the last release resets it)
//   procaddr NAME VER   cuGetProcAddress_v2(NAME, VER) -> "procaddr ok" | "procaddr err N"
//   heap SIZE           cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, SIZE) -> "heap ok" | "heap oom"
//   fill CHUNK          cuMemAlloc CHUNK until refused -> "fill BYTES"
//   meminfo             -> "meminfo FREE TOTAL"
//   watchinfo PATH      read cuMemGetInfo, create PATH, then poll until the total
//                       changes (a live resize) -> "changed TOTAL CLOCK_MONOTONIC_NS"
//                       (or "changed timeout" after 30 s)
//   totalmem            -> "totalmem BYTES"
//   physical            -> "physical BYTES" (what the fake GPU really holds)
//   nvml                -> "nvml TOTAL USED" (nvmlDeviceGetMemoryInfo of GPU 0)
//   ready PATH          write our pid to PATH (tells the test we got here)
//   await PATH          wait until PATH exists
//   forkidle N          fork N idle children, blocked until releaseforks (each
//                       joins the vGPU's ledger as it is forked) -> "forkidle N"
//   releaseforks        lets them exit, and waits until they have -> "releaseforks N"
//   hold                wait forever (to be killed)
//   span_begin | span_end | hint_begin | hint_end
//                       the task API (gpuslice.h) via dlsym -> "span_begin STATUS"
//   hint USEC           gpuslice_hint(USEC) via dlsym -> "hint STATUS"
//   kernel              one 1-block cuLaunchKernel on stream 0 (the module is
//                       loaded at the first) -> "kernel ok"
//   kernelon | kernelpt the same on the newest `stream` | on CU_STREAM_PER_THREAD
//                       -> "kernelon ok" | "kernelpt ok"
//   streamdestroy       cuStreamDestroy_v2 of the newest `stream` -> "streamdestroy ok"
//   calls NAME...       how often this process called each exported NAME of the
//                       fake driver (fake_cuda_call_count) -> "calls NAME N" each
//   ctxsync             cuCtxSynchronize -> "ctxsync ok"
//   rmcontrol WHAT V    a tenant's own RM control on its compute channel group,
//                       through libc's ioctl (handles from fake_cuda_rm_handles):
//                       WHAT = slice (SET_TIMESLICE, V µs), realtime
//                       (MAKE_REALTIME, V = 0/1) or interleave
//                       (SET_INTERLEAVE_LEVEL, V) -> "rmcontrol WHAT STATUS" (hex)
//   rawslice US SECONDS a hostile tenant: SET_TIMESLICE US on its compute
//                       channel group through the fake RM device directly
//                       (fake_rm_raw_ioctl: the raw system call, which no
//                       hook sees), again every 20 ms for SECONDS ->
//                       "rawslice N" (sets made)
//   freezetick          stops gpuslice's compute thread ("gpuslice-tick")
//                       for good, between two ticks, with ptrace from a
//                       child, as a tenant can -> "freezetick ok" or
//                       "freezetick none"
//   holders             the fake GPU's holder kernels (fake_cuda_holders) ->
//                       "holders LAUNCHED RUNNING RELEASED EXPIRED LAST_BOUND_NS SYNCS_WAITED"
//   sleep MS            sleep (an LC request's length, in task-API tests)
//   exitsleep MS        at exit, sleep MS in an exit handler registered now
//   spin SECONDS FILE   launch a kernel back to back; FILE gets each run of
//                       launches as "START_NS END_NS COUNT" -> "spin ok LAUNCHES"
//   board               this vGPU's GPU turns as its pacing boards recorded them:
//                       one line per member of each board this vGPU is on,
//                       "board GPU MEMBER SELF WEIGHT CAP_PCT CHARGED_NS TURNS NOW_NS VTIME_NS"
//                       (SELF 1 on this vGPU's row; NOW_NS the CLOCK_MONOTONIC
//                       of the read; VTIME_NS its virtual time), once this vGPU
//                       is on a board (10 s at most), or "board none"
//   forge_lc SECONDS    a hostile tenant: on every board this vGPU reaches, claims
//                       a free row for an id no manager made and writes its own
//                       row too, both as the highest latency-critical level
//                       holding everyone, refreshed every millisecond ->
//                       "forge_lc ROWS" (the most rows one pass wrote)
//   forge_listed_lc SECONDS a hostile tenant: on every board this vGPU reaches,
//                       writes the holds of every other vGPU's row that says it is
//                       latency-critical (a real LC vGPU the roster lists), kept
//                       fresh every millisecond -> "forge_listed_lc ROWS" (the most
//                       rows one pass wrote)
//   hold_budget_spent   the vGPU ledger's count of windows in which holds took a
//                       process's whole hold budget (core/hold_budget.h) ->
//                       "hold_budget_spent N"
//   forge_turns SECONDS a hostile tenant: holds the turn of every board this vGPU
//                       reaches (its own row's virtual time 0, busy, the others'
//                       last turns ended now, and the turn word rewritten to it
//                       in a loop) -> "forge_turns PASSES"
//                       (passes that found its own row)
//   forge_cap_debt SECONDS a hostile tenant: on every board this vGPU reaches,
//                       writes every other row's compute-cap tokens a long way
//                       into debt, every millisecond -> "forge_cap_debt ROWS"
//                       (the most rows one pass wrote)
//   gpu_record          the fake GPU's launch record shared by the test's processes
//                       (FAKE_GPU_RECORD, tests/fake_driver/launch.h) ->
//                       "gpu_record LAUNCHES HAND_CHANGES OVERLAPS" or "gpu_record none"
// Sizes take K/M/G suffixes (powers of 1024).
#include <cuda.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iterator>
#include <string>
#include <vector>

#include "../fake_driver/fake_cuda_api.h"  // the fake driver's test API (found at run time)
#include "rm/rm_abi.h"                     // RM ioctl declarations, for rmcontrol

// The legacy graph instantiation entry points, which cuda.h declares only
// under __CUDA_API_VERSION_INTERNAL (it maps the name to WithFlags); the
// driver still exports both, and programs built with CUDA 10/11 call them.
#undef cuGraphInstantiate
// The same for the primary context's first release and reset (CUDA 7).
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
extern "C" {
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev);
CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log, size_t size);
CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log,
                                       size_t size);
}

namespace {

std::string g_lookup = "dlsym";
int g_idle_pipe[2] = {-1, -1};  // forkidle's children block on its read end

#ifdef CUDA_APP_LINKED
template <typename Fn>
Fn Resolve(const char*, Fn linked) {
  return linked;
}
#define DRIVER(name) Resolve(#name, &::name)
#else
void* g_driver = nullptr;

// The type only (decltype, never the address), so that this binary needs no
// driver at link time whatever the optimisation level.
template <typename Fn>
Fn Resolve(const char* name) {
  if (g_driver == nullptr) {
    g_driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (g_driver == nullptr) {
      fprintf(stderr, "cuda_app: %s\n", dlerror());
      exit(3);
    }
  }
  if (g_lookup == "dlsym") return reinterpret_cast<Fn>(dlsym(g_driver, name));
  static auto get_proc = reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(g_driver, "cuGetProcAddress_v2"));
  // The runtime asks by base name: strip the version suffix we were given.
  std::string base(name);
  for (const char* suffix : {"_v2", "_v3"}) {
    if (base.size() > 3 && base.compare(base.size() - 3, 3, suffix) == 0) base.resize(base.size() - 3);
  }
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status;
  const cuuint64_t flags = g_lookup == "ptds" ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
  if (get_proc(base.c_str(), &fn, 13000, flags, &status) != CUDA_SUCCESS) return nullptr;
  return reinterpret_cast<Fn>(fn);
}
#define DRIVER(name) Resolve<decltype(&::name)>(#name)
#endif

uint64_t ParseSize(const char* s) {
  char* end = nullptr;
  uint64_t v = strtoull(s, &end, 10);
  switch (*end) {
    case 'K': return v << 10;
    case 'M': return v << 20;
    case 'G': return v << 30;
    default: return v;
  }
}

struct Allocation {
  enum Kind { kDevice, kVmm, kArray, kMipmap, kAsync } kind;
  uint64_t handle;
};
std::vector<Allocation> g_allocations;
std::vector<CUmemoryPool> g_pools;
std::vector<CUgraphExec> g_graphs;
struct Mapping {
  CUdeviceptr ptr;
  size_t size;
};
std::vector<Mapping> g_mappings;  // vmmmap and map, newest last
std::vector<int> g_exported_fds;  // export, newest last
std::vector<CUdeviceptr> g_ipc_opened;  // ipcopen, newest last
std::vector<CUstream> g_streams;  // stream, newest last
CUfunction g_kernel = nullptr;  // `kernel`'s function, loaded at its first use

void Report(const char* what, CUresult r, const char* extra = "") {
  if (r == CUDA_SUCCESS) printf("%s ok%s\n", what, extra);
  else if (r == CUDA_ERROR_OUT_OF_MEMORY) printf("%s oom\n", what);
  else printf("%s err %d\n", what, static_cast<int>(r));
}

// "NAME VALUE": the 64-bit counter at byte `offset` of this vGPU's ledger
// file (core::Ledger), or "NAME unknown".
void PrintLedgerCounter(const char* name, long offset) {
  unsigned long long value = 0;
  const char* dir = getenv("GPUSLICE_VGPU_DIR");
  FILE* f = dir != nullptr ? fopen((std::string(dir) + "/ledger").c_str(), "rb") : nullptr;
  if (f != nullptr && fseek(f, offset, SEEK_SET) == 0 && fread(&value, sizeof value, 1, f) == 1) {
    printf("%s %llu\n", name, value);
  } else {
    printf("%s unknown\n", name);
  }
  if (f != nullptr) fclose(f);
}

void Await(const char* path) {
  struct stat st;
  const timespec pause = {0, 1000000};
  while (stat(path, &st) != 0) nanosleep(&pause, nullptr);
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The fake driver's test API (fake_cuda_api.h), from the real (fake) driver
// itself, already loaded: null when it is not the fake.
void* FakeDriverSymbol(const char* name) {
  const char* path = getenv("GPUSLICE_REAL_DRIVER");
  void* fake = dlopen(path != nullptr ? path : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return fake != nullptr ? dlsym(fake, name) : nullptr;
}

CUdevice CurrentDevice() {
  CUdevice dev = 0;
  DRIVER(cuCtxGetDevice)(&dev);
  return dev;
}

// Maps `size` bytes of `handle` at a fresh reservation, readable and
// writable from the current device, and records the mapping.
CUresult MapNew(CUmemGenericAllocationHandle handle, size_t size) {
  CUdeviceptr ptr = 0;
  CUresult r = DRIVER(cuMemAddressReserve)(&ptr, size, 0, 0, 0);
  if (r != CUDA_SUCCESS) return r;
  r = DRIVER(cuMemMap)(ptr, size, 0, handle, 0);
  if (r != CUDA_SUCCESS) {
    DRIVER(cuMemAddressFree)(ptr, size);
    return r;
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = CurrentDevice();
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  r = DRIVER(cuMemSetAccess)(ptr, size, &access, 1);
  g_mappings.push_back({ptr, size});
  return r;
}

// Instantiates a new graph of one memory-allocation node of `bytes` on the
// current device through the entry point `how` names.
CUresult InstantiateAllocGraph(const std::string& how, uint64_t bytes, CUgraphExec* exec) {
  CUgraph graph = nullptr;
  CUgraphNode node = nullptr;
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params.poolProps.location.id = CurrentDevice();
  params.bytesize = bytes;
  CUresult r = DRIVER(cuGraphCreate)(&graph, 0);
  if (r == CUDA_SUCCESS) r = DRIVER(cuGraphAddMemAllocNode)(&node, graph, nullptr, 0, &params);
  if (r != CUDA_SUCCESS) return r;
  if (how == "instantiate") return DRIVER(cuGraphInstantiate)(exec, graph, nullptr, nullptr, 0);
  if (how == "instantiate_v2") return DRIVER(cuGraphInstantiate_v2)(exec, graph, nullptr, nullptr, 0);
  if (how == "flags") return DRIVER(cuGraphInstantiateWithFlags)(exec, graph, 0);
  if (how == "params") {
    CUDA_GRAPH_INSTANTIATE_PARAMS instantiate{};
    return DRIVER(cuGraphInstantiateWithParams)(exec, graph, &instantiate);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

// The newest `vmm` handle, or 0.
CUmemGenericAllocationHandle NewestVmmHandle() {
  for (auto it = g_allocations.rbegin(); it != g_allocations.rend(); ++it) {
    if (it->kind == Allocation::kVmm) return it->handle;
  }
  return 0;
}

// The pacing board (src/core/pacing_board.h), read as any process of the vGPU
// can: offsets of struct Board and BoardMember, version 4. The id is
// core::VgpuIdOf(limits.name, inode of the limits file).
constexpr uint64_t kBoardMagic = 0x4452414f42504721ull;
constexpr size_t kBoardSize = 128 + 64 * 128;
constexpr size_t kMembersAt = 128, kMemberSize = 128;

uint64_t OwnVgpuId(const std::string& dir) {
  const std::string limits = dir + "/limits";
  struct stat st {};
  char name[64] = {};
  FILE* f = fopen(limits.c_str(), "rb");
  if (f == nullptr || stat(limits.c_str(), &st) != 0 || fseek(f, 24, SEEK_SET) != 0 ||  // Limits::name
      fread(name, 1, sizeof name - 1, f) != sizeof name - 1) {
    if (f != nullptr) fclose(f);
    return 0;
  }
  fclose(f);
  uint64_t h = 1469598103934665603ull;  // FNV-1a, as VgpuIdOf
  for (const char* c = name; *c != 0; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  h ^= static_cast<uint64_t>(st.st_ino) * 0x9e3779b97f4a7c15ull;
  return h | 1;
}

template <typename T>
T BoardField(const unsigned char* board, int member, size_t offset) {
  return __atomic_load_n(reinterpret_cast<const T*>(board + kMembersAt + member * kMemberSize + offset),
                         __ATOMIC_ACQUIRE);
}

// The boards of a daemon-made vGPU, which has no DIR/boards: the sealed
// memfds its state socket hands out (core/state_handout.h), as (uuid hex, fd).
std::vector<std::pair<std::string, int>> HandedBoards(const char* dir) {
  std::vector<std::pair<std::string, int>> boards;
  const std::string path = std::string(dir) + "/state.sock";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return boards;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return boards;
  const timeval give_up{2, 0};  // a stopped keeper must not hang the app
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &give_up, sizeof give_up);
  if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(s);
    return boards;
  }
  char text[4096];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 64)];
  iovec iov{text, sizeof text - 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
  close(s);
  std::vector<int> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); n > 0 && c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++k) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof fd);
      fds.push_back(fd);
    }
  }
  if (n <= 0) return boards;
  text[n] = 0;
  // "gpuslice-state 1\nledger\nboard HEX\n...": descriptor k+1 is board line k.
  size_t fd_index = 1;
  for (char* line = strtok(text, "\n"); line != nullptr; line = strtok(nullptr, "\n")) {
    if (strncmp(line, "board ", 6) == 0 && fd_index < fds.size()) boards.emplace_back(line + 6, fds[fd_index++]);
  }
  if (!fds.empty()) close(fds[0]);
  for (size_t k = fd_index; k < fds.size(); ++k) close(fds[k]);
  return boards;
}

// Prints (or only counts) the members of every board in DIR/boards (or handed
// out on DIR/state.sock) that this vGPU (id `self`) is on; returns how many
// rows it found.
int VisitBoards(const char* dir, uint64_t self, bool print) {
  std::vector<std::pair<std::string, int>> files;
  DIR* listing = self != 0 ? opendir((std::string(dir) + "/boards").c_str()) : nullptr;
  while (dirent* e = listing != nullptr ? readdir(listing) : nullptr) {
    const std::string file = e->d_name;
    if (file.rfind("gpu-", 0) != 0 || file.find('.') != std::string::npos) continue;
    files.emplace_back(file.substr(4), open((std::string(dir) + "/boards/" + file).c_str(), O_RDONLY));
  }
  if (listing != nullptr) closedir(listing);
  else if (self != 0) files = HandedBoards(dir);
  int rows = 0;
  for (const auto& [uuid_hex, fd] : files) {
    void* map = fd >= 0 ? mmap(nullptr, kBoardSize, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (fd >= 0) close(fd);
    if (map == MAP_FAILED) continue;
    const auto* board = static_cast<const unsigned char*>(map);
    const bool valid = *reinterpret_cast<const uint64_t*>(board) == kBoardMagic &&
                       *reinterpret_cast<const uint32_t*>(board + 8) == 4;  // the version these offsets are of
    bool mine = false;
    for (int m = 0; m < 64 && valid; ++m) {
      mine |= BoardField<uint64_t>(board, m, 0) == self;
    }
    const uint64_t now = NowNs();
    for (int m = 0; m < 64 && mine; ++m) {
      const uint64_t id = BoardField<uint64_t>(board, m, 0);  // vgpu_id
      if (id == 0) continue;
      ++rows;
      if (!print) continue;
      printf("board %s %d %d %u %u %llu %llu %llu %llu\n", uuid_hex.c_str(), m, id == self ? 1 : 0,
             BoardField<uint32_t>(board, m, 16), BoardField<uint32_t>(board, m, 20),  // weight, cap_pct
             static_cast<unsigned long long>(BoardField<uint64_t>(board, m, 64)),     // charged_ns
             static_cast<unsigned long long>(BoardField<uint64_t>(board, m, 88)),     // turns
             static_cast<unsigned long long>(now),
             static_cast<unsigned long long>(BoardField<uint64_t>(board, m, 56)));    // vtime
    }
    munmap(map, kBoardSize);
  }
  return rows;
}

// forge_lc: writes rows of `dir`'s boards as a tenant could (every process
// of a vGPU maps its boards read-write), for `seconds`. Returns the most
// rows one pass wrote (its own row is there once its library has joined).
// The boards `dir`'s processes reach (files in DIR/boards, or handed out on
// DIR/state.sock), mapped read-write as any of them can.
std::vector<unsigned char*> MapBoardsWritable(const char* dir) {
  std::vector<std::pair<std::string, int>> files;
  DIR* listing = opendir((std::string(dir) + "/boards").c_str());
  while (dirent* e = listing != nullptr ? readdir(listing) : nullptr) {
    const std::string file = e->d_name;
    if (file.rfind("gpu-", 0) == 0 && file.find('.') == std::string::npos) {
      files.emplace_back(file, open((std::string(dir) + "/boards/" + file).c_str(), O_RDWR));
    }
  }
  if (listing != nullptr) closedir(listing);
  else files = HandedBoards(dir);
  std::vector<unsigned char*> boards;
  for (const auto& [name, fd] : files) {
    void* map = fd >= 0 ? mmap(nullptr, kBoardSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (fd >= 0) close(fd);
    if (map != MAP_FAILED) boards.push_back(static_cast<unsigned char*>(map));
  }
  return boards;
}

// Calls `pass(boards, now)` on `dir`'s boards, mapped writable, every
// millisecond for `seconds`; returns the most rows one pass wrote.
template <typename Pass>
int ForgeEveryMillisecond(const char* dir, double seconds, Pass pass) {
  const std::vector<unsigned char*> boards = MapBoardsWritable(dir);
  int most = 0;
  for (const uint64_t end = NowNs() + static_cast<uint64_t>(seconds * 1e9); NowNs() < end;) {
    most = std::max(most, pass(boards, NowNs()));
    const timespec ms = {0, 1000000};
    nanosleep(&ms, nullptr);
  }
  for (unsigned char* b : boards) munmap(b, kBoardSize);
  return most;
}

void PutBoard64(unsigned char* b, int m, size_t offset, uint64_t v) {
  __atomic_store_n(reinterpret_cast<uint64_t*>(b + kMembersAt + m * kMemberSize + offset), v, __ATOMIC_RELEASE);
}
void PutBoard32(unsigned char* b, int m, size_t offset, uint32_t v) {
  __atomic_store_n(reinterpret_cast<uint32_t*>(b + kMembersAt + m * kMemberSize + offset), v, __ATOMIC_RELEASE);
}

// Row `m` holds everyone below it: a span that never ends, and an automatic
// hold always in its burst.
void WriteHold(unsigned char* b, int m, uint64_t now) {
  PutBoard64(b, m, 96, now + 150'000'000);  // hold_until_ns
  PutBoard64(b, m, 40, now);                // last_launch_ns
  PutBoard64(b, m, 104, now);               // lc_burst_start_ns
  PutBoard32(b, m, 112, 2000);              // lc_linger_us
}

int ForgeLatencyCritical(const char* dir, uint64_t self, double seconds) {
  constexpr uint64_t kForgedId = 0xbad0bad0bad0bad1ull;
  constexpr uint32_t kHighestLc = 1 | 255u << 8;  // core::LevelWord(kLatencyCritical, 255)
  return ForgeEveryMillisecond(dir, seconds, [self](const std::vector<unsigned char*>& boards, uint64_t now) {
    int written = 0;
    for (unsigned char* b : boards) {
      int forged = -1;
      for (int m = 0; m < 64 && forged < 0; ++m) {
        const uint64_t id = BoardField<uint64_t>(b, m, 0);
        if (id == kForgedId || id == 0) forged = m;
      }
      for (int m = 0; m < 64; ++m) {
        const uint64_t id = BoardField<uint64_t>(b, m, 0);
        if (m != forged && id != self) continue;
        if (m == forged) PutBoard64(b, m, 0, kForgedId);
        PutBoard64(b, m, 8, now);          // heartbeat_ns
        PutBoard32(b, m, 24, kHighestLc);  // priority
        WriteHold(b, m, now);
        ++written;
      }
    }
    return written;
  });
}

// forge_listed_lc: impersonates the latency-critical vGPUs on `dir`'s boards
// (rows whose level word, as their owner wrote it, is of the LC class) by
// writing their hold fields, for `seconds`. The roster lists those rows, so
// every process believes them. Returns the most rows one pass wrote.
int ForgeListedLatencyCritical(const char* dir, uint64_t self, double seconds) {
  return ForgeEveryMillisecond(dir, seconds, [self](const std::vector<unsigned char*>& boards, uint64_t now) {
    int written = 0;
    for (unsigned char* b : boards) {
      for (int m = 0; m < 64; ++m) {
        const uint64_t id = BoardField<uint64_t>(b, m, 0);
        if (id == 0 || id == self || (BoardField<uint32_t>(b, m, 24) & 0xff) != 1) continue;  // priority
        WriteHold(b, m, now);
        ++written;
      }
    }
    return written;
  });
}

// forge_cap_debt: writes every other vGPU's cap tokens on `dir`'s boards a
// long way into debt (their rows' cap_tokens_ns, as of now), for `seconds`.
// Returns the most rows one pass wrote.
int ForgeCapDebt(const char* dir, uint64_t self, double seconds) {
  return ForgeEveryMillisecond(dir, seconds, [self](const std::vector<unsigned char*>& boards, uint64_t now) {
    int written = 0;
    for (unsigned char* b : boards) {
      for (int m = 0; m < 64; ++m) {
        const uint64_t id = BoardField<uint64_t>(b, m, 0);
        if (id == 0 || id == self) continue;
        PutBoard64(b, m, 72, static_cast<uint64_t>(-1'000'000'000'000'000ll));  // cap_tokens_ns: 11 days owed
        PutBoard64(b, m, 80, now);                                              // cap_stamp_ns
        ++written;
      }
    }
    return written;
  });
}

// forge_turns: keeps the GPU's turn for this vGPU on `dir`'s boards, as a
// tenant could: its own row's virtual time 0, busy and launching, every
// other row's last turn ended just now, and the turn word rewritten to it
// with a fresh start, in a loop, for `seconds`. Returns the passes in which
// it found its own row.
int ForgeTurns(const char* dir, uint64_t self, double seconds) {
  const std::vector<unsigned char*> boards = MapBoardsWritable(dir);
  int passes = 0;
  for (const uint64_t end = NowNs() + static_cast<uint64_t>(seconds * 1e9); NowNs() < end;) {
    const uint64_t now = NowNs();
    bool found = false;
    for (unsigned char* b : boards) {
      int own = -1;
      for (int m = 0; m < 64; ++m) {
        unsigned char* row = b + kMembersAt + m * kMemberSize;
        if (BoardField<uint64_t>(b, m, 0) != self) {
          // Each victim's last turn ended now, so the starvation guard
          // (TurnOrder in core/pacing_board.cc) never puts it first.
          if (BoardField<uint64_t>(b, m, 0) != 0) {
            __atomic_store_n(reinterpret_cast<uint64_t*>(row + 120), now, __ATOMIC_RELEASE);  // turn_ended_ns
          }
          continue;
        }
        own = m;
        __atomic_store_n(reinterpret_cast<uint64_t*>(row + 56), 0, __ATOMIC_RELEASE);  // vtime
        // Busy beyond what its own library's drains count down: a busy mark
        // of 1 fell to 0 at the forger's next drain, and the turn passed on
        // as idle.
        __atomic_store_n(reinterpret_cast<uint32_t*>(row + 28), 1u << 20, __ATOMIC_RELEASE);  // busy_processes
        __atomic_store_n(reinterpret_cast<uint64_t*>(row + 40), now, __ATOMIC_RELEASE);       // last_launch_ns
      }
      if (own < 0) continue;
      found = true;
      // Board::turn (offset 16): holder + 1, closing << 7, sequence << 8,
      // quantum ms << 24, start us << 32. Open, with the longest quantum the
      // word holds: with 10 ms, the turn passed on whenever a loaded machine
      // kept the forger off the CPU that long.
      auto* turn = reinterpret_cast<uint64_t*>(b + 16);
      const uint64_t seen = __atomic_load_n(turn, __ATOMIC_ACQUIRE);
      const uint64_t sequence = ((seen >> 8) + 1) & 0xffff;
      __atomic_store_n(turn, static_cast<uint64_t>(own + 1) | sequence << 8 | 255ull << 24 | (now / 1000) << 32,
                       __ATOMIC_RELEASE);
    }
    passes += found ? 1 : 0;
    // As often as it gets the CPU: a forger that slept between passes lost
    // the turn whenever a loaded machine kept it off the CPU for 2 ms (its
    // own library then hands an idle turn on).
    sched_yield();
  }
  for (unsigned char* b : boards) munmap(b, kBoardSize);
  return passes;
}

// The library joins the boards from its compute thread, which starts with
// cuInit: waits (10 s at most) until this vGPU is on one, then prints.
void PrintBoards() {
  const char* dir = getenv("GPUSLICE_VGPU_DIR");
  const uint64_t self = dir != nullptr ? OwnVgpuId(dir) : 0;
  const timespec pause = {0, 1000000};
  for (const uint64_t give_up = NowNs() + 10'000'000'000ull; self != 0 && VisitBoards(dir, self, false) == 0;) {
    if (NowNs() > give_up) break;
    nanosleep(&pause, nullptr);
  }
  if (self == 0 || VisitBoards(dir, self, true) == 0) printf("board none\n");
}

}  // namespace

// `exitsleep`: a teardown that outlasts the memory audit's grace, holding
// the memory it has not freed, as a large model's CUDA teardown does.
static long g_exit_sleep_ms = 0;
static void SleepAtExit() {
  timespec ts{g_exit_sleep_ms / 1000, (g_exit_sleep_ms % 1000) * 1000000};
  nanosleep(&ts, nullptr);
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  int i = 1;
  if (i < argc && strncmp(argv[i], "--lookup=", 9) == 0) g_lookup = argv[i++] + 9;
  for (; i < argc; ++i) {
    const std::string cmd = argv[i];
    auto arg = [&](int k) { return i + k < argc ? argv[i + k] : "0"; };
    if (cmd == "init") {
      const int dev = atoi(arg(1));
      if (i + 1 < argc && isdigit(argv[i + 1][0])) ++i;
      CUresult r = DRIVER(cuInit)(0);
      CUcontext ctx = nullptr;
      if (r == CUDA_SUCCESS) r = DRIVER(cuDevicePrimaryCtxRetain)(&ctx, dev);
      if (r == CUDA_SUCCESS) r = DRIVER(cuCtxSetCurrent)(ctx);
      Report("init", r);
    } else if (cmd == "ctxcreate") {
      CUdevice dev = 0;
      CUresult r = DRIVER(cuCtxGetDevice)(&dev);
      CUcontext ctx = nullptr;
      if (r == CUDA_SUCCESS) r = DRIVER(cuCtxCreate_v4)(&ctx, nullptr, 0, dev);
      Report("ctxcreate", r);
    } else if (cmd == "alloc") {
      CUdeviceptr p = 0;
      const CUresult r = DRIVER(cuMemAlloc_v2)(&p, ParseSize(arg(1)));
      if (r == CUDA_SUCCESS) g_allocations.push_back({Allocation::kDevice, p});
      Report("alloc", r);
      ++i;
    } else if (cmd == "pitch") {
      CUdeviceptr p = 0;
      size_t pitch = 0;
      const CUresult r = DRIVER(cuMemAllocPitch_v2)(&p, &pitch, ParseSize(arg(1)), ParseSize(arg(2)), 4);
      if (r == CUDA_SUCCESS) g_allocations.push_back({Allocation::kDevice, p});
      Report("pitch", r);
      i += 2;
    } else if (cmd == "managed") {
      CUdeviceptr p = 0;
      const CUresult r = DRIVER(cuMemAllocManaged)(&p, ParseSize(arg(1)), CU_MEM_ATTACH_GLOBAL);
      if (r == CUDA_SUCCESS) g_allocations.push_back({Allocation::kDevice, p});
      Report("managed", r);
      ++i;
    } else if (cmd == "vmm") {
      CUmemAllocationProp prop{};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = CurrentDevice();
      CUmemGenericAllocationHandle h = 0;
      const CUresult r = DRIVER(cuMemCreate)(&h, ParseSize(arg(1)), &prop, 0);
      if (r == CUDA_SUCCESS) g_allocations.push_back({Allocation::kVmm, h});
      Report("vmm", r);
      ++i;
    } else if (cmd == "vmmmap") {
      CUmemAllocationProp prop{};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = CurrentDevice();
      const size_t size = ParseSize(arg(1));
      CUmemGenericAllocationHandle h = 0;
      CUresult r = DRIVER(cuMemCreate)(&h, size, &prop, 0);
      if (r == CUDA_SUCCESS) {
        r = MapNew(h, size);
        const CUresult released = DRIVER(cuMemRelease)(h);
        if (r == CUDA_SUCCESS) r = released;
      }
      Report("vmmmap", r);
      ++i;
    } else if (cmd == "map") {
      const CUmemGenericAllocationHandle h = NewestVmmHandle();
      Report("map", h == 0 ? CUDA_ERROR_INVALID_VALUE : MapNew(h, ParseSize(arg(1))));
      ++i;
    } else if (cmd == "release") {
      CUresult r = CUDA_ERROR_INVALID_VALUE;
      for (auto it = g_allocations.rbegin(); it != g_allocations.rend(); ++it) {
        if (it->kind != Allocation::kVmm) continue;
        r = DRIVER(cuMemRelease)(it->handle);
        g_allocations.erase(std::next(it).base());
        break;
      }
      Report("release", r);
    } else if (cmd == "export") {  // the newest VMM handle, as a POSIX descriptor (kept open)
      const CUmemGenericAllocationHandle h = NewestVmmHandle();
      int fd = -1;
      const CUresult r =
          h == 0 ? CUDA_ERROR_INVALID_VALUE
                 : DRIVER(cuMemExportToShareableHandle)(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      if (r == CUDA_SUCCESS) g_exported_fds.push_back(fd);
      Report("export", r);
    } else if (cmd == "import") {  // the newest exported descriptor, as a new VMM handle
      CUmemGenericAllocationHandle h = 0;
      const CUresult r = g_exported_fds.empty()
                             ? CUDA_ERROR_INVALID_VALUE
                             : DRIVER(cuMemImportFromShareableHandle)(
                                   &h, reinterpret_cast<void*>(static_cast<intptr_t>(g_exported_fds.back())),
                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      if (r == CUDA_SUCCESS) g_allocations.push_back({Allocation::kVmm, h});
      Report("import", r);
    } else if (cmd == "ipcget") {  // a legacy IPC handle for the newest allocation
      CUresult r = CUDA_ERROR_INVALID_VALUE;
      if (!g_allocations.empty()) {
        CUipcMemHandle handle{};
        r = DRIVER(cuIpcGetMemHandle)(&handle, g_allocations.back().handle);
      }
      Report("ipcget", r);
    } else if (cmd == "dmabuf") {  // a dma-buf of the newest mapping, or else the newest allocation (kept open)
      CUdeviceptr ptr = 0;
      uint64_t size = 0;
      if (!g_mappings.empty()) {
        ptr = g_mappings.back().ptr;
        size = g_mappings.back().size;
      } else if (!g_allocations.empty()) {
        ptr = g_allocations.back().handle;
        size = 1;
      }
      int fd = -1;
      const CUresult r =
          ptr == 0 ? CUDA_ERROR_INVALID_VALUE
                   : DRIVER(cuMemGetHandleForAddressRange)(&fd, ptr, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
      if (r == CUDA_SUCCESS) g_exported_fds.push_back(fd);
      Report("dmabuf", r);
    } else if (cmd == "ipcsave") {  // ipcget, its handle written to FILE as hex (whole, by rename)
      CUresult r = CUDA_ERROR_INVALID_VALUE;
      CUipcMemHandle handle{};
      if (!g_allocations.empty()) r = DRIVER(cuIpcGetMemHandle)(&handle, g_allocations.back().handle);
      if (r == CUDA_SUCCESS) {
        const std::string tmp = std::string(arg(1)) + ".tmp";
        if (FILE* f = fopen(tmp.c_str(), "w")) {
          for (unsigned char b : handle.reserved) fprintf(f, "%02x", b);
          fclose(f);
          rename(tmp.c_str(), arg(1));
        }
      }
      Report("ipcsave", r);
      ++i;
    } else if (cmd == "ipcopen") {  // the handle in FILE (ipcsave's), opened
      CUipcMemHandle handle{};
      CUresult r = CUDA_ERROR_INVALID_VALUE;
      if (FILE* f = fopen(arg(1), "r")) {
        unsigned int byte = 0;
        size_t n = 0;
        while (n < sizeof(handle.reserved) && fscanf(f, "%2x", &byte) == 1)
          handle.reserved[n++] = static_cast<char>(byte);
        fclose(f);
        CUdeviceptr p = 0;
        if (n == sizeof(handle.reserved))
          r = DRIVER(cuIpcOpenMemHandle_v2)(&p, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (r == CUDA_SUCCESS) g_ipc_opened.push_back(p);
      }
      Report("ipcopen", r);
      ++i;
    } else if (cmd == "ipcclose") {  // the newest opened handle
      CUresult r = CUDA_ERROR_INVALID_VALUE;
      if (!g_ipc_opened.empty()) {
        r = DRIVER(cuIpcCloseMemHandle)(g_ipc_opened.back());
        g_ipc_opened.pop_back();
      }
      Report("ipcclose", r);
    } else if (cmd == "unmap") {
      CUresult r = CUDA_ERROR_INVALID_VALUE;
      if (!g_mappings.empty()) {
        const Mapping m = g_mappings.back();
        g_mappings.pop_back();
        r = DRIVER(cuMemUnmap)(m.ptr, m.size);
        if (r == CUDA_SUCCESS) r = DRIVER(cuMemAddressFree)(m.ptr, m.size);
      }
      Report("unmap", r);
    } else if (cmd == "defaultpool") {
      CUmemoryPool pool = nullptr;
      const CUresult r = DRIVER(cuDeviceGetDefaultMemPool)(&pool, atoi(arg(1)));
      if (r == CUDA_SUCCESS) g_pools.push_back(pool);
      Report("defaultpool", r);
      ++i;
    } else if (cmd == "stream") {
      CUcontext ctx = nullptr;
      CUstream stream = nullptr;
      CUresult r = DRIVER(cuDevicePrimaryCtxRetain)(&ctx, atoi(arg(1)));
      if (r == CUDA_SUCCESS) r = DRIVER(cuCtxPushCurrent_v2)(ctx);
      if (r == CUDA_SUCCESS) {
        r = DRIVER(cuStreamCreate)(&stream, 0);
        DRIVER(cuCtxPopCurrent_v2)(&ctx);
      }
      if (r == CUDA_SUCCESS) g_streams.push_back(stream);
      Report("stream", r);
      ++i;
    } else if (cmd == "asyncon") {
      CUdeviceptr p = 0;
      const CUresult r = g_streams.empty() ? CUDA_ERROR_INVALID_VALUE
                                           : DRIVER(cuMemAllocAsync)(&p, ParseSize(arg(1)), g_streams.back());
      if (r == CUDA_SUCCESS) g_allocations.push_back({Allocation::kAsync, p});
      Report("asyncon", r);
      ++i;
    } else if (cmd == "array" || cmd == "array3d" || cmd == "mipmap") {
      CUDA_ARRAY3D_DESCRIPTOR d{};
      d.Width = ParseSize(arg(1));
      d.Height = ParseSize(arg(2));
      d.Format = CU_AD_FORMAT_FLOAT;
      d.NumChannels = 4;
      CUresult r;
      if (cmd == "array") {
        CUDA_ARRAY_DESCRIPTOR d2{d.Width, d.Height, d.Format, d.NumChannels};
        CUarray a = nullptr;
        r = DRIVER(cuArrayCreate_v2)(&a, &d2);
        if (r == CUDA_SUCCESS) g_allocations.push_back({Allocation::kArray, reinterpret_cast<uint64_t>(a)});
        i += 2;
      } else if (cmd == "array3d") {
        d.Depth = ParseSize(arg(3));
        CUarray a = nullptr;
        r = DRIVER(cuArray3DCreate_v2)(&a, &d);
        if (r == CUDA_SUCCESS) g_allocations.push_back({Allocation::kArray, reinterpret_cast<uint64_t>(a)});
        i += 3;
      } else {
        CUmipmappedArray m = nullptr;
        r = DRIVER(cuMipmappedArrayCreate)(&m, &d, static_cast<unsigned>(ParseSize(arg(3))));
        if (r == CUDA_SUCCESS) g_allocations.push_back({Allocation::kMipmap, reinterpret_cast<uint64_t>(m)});
        i += 3;
      }
      Report(cmd.c_str(), r);
    } else if (cmd == "async") {
      CUdeviceptr p = 0;
      const CUresult r = DRIVER(cuMemAllocAsync)(&p, ParseSize(arg(1)), nullptr);
      if (r == CUDA_SUCCESS) g_allocations.push_back({Allocation::kAsync, p});
      Report("async", r);
      ++i;
    } else if (cmd == "pool") {
      CUmemPoolProps props{};
      props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      props.location.id = CurrentDevice();
      CUmemoryPool pool = nullptr;
      const CUresult r = DRIVER(cuMemPoolCreate)(&pool, &props);
      if (r == CUDA_SUCCESS) g_pools.push_back(pool);
      Report("pool", r);
    } else if (cmd == "poolexport") {  // the newest pool, as a POSIX descriptor (kept open)
      int fd = -1;
      const CUresult r = g_pools.empty() ? CUDA_ERROR_INVALID_VALUE
                                         : DRIVER(cuMemPoolExportToShareableHandle)(
                                               &fd, g_pools.back(), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      if (r == CUDA_SUCCESS) g_exported_fds.push_back(fd);
      Report("poolexport", r);
    } else if (cmd == "poolalloc") {
      CUdeviceptr p = 0;
      const CUresult r = g_pools.empty() ? CUDA_ERROR_INVALID_VALUE
                                         : DRIVER(cuMemAllocFromPoolAsync)(&p, ParseSize(arg(1)), g_pools.back(), nullptr);
      if (r == CUDA_SUCCESS) g_allocations.push_back({Allocation::kAsync, p});
      Report("poolalloc", r);
      ++i;
    } else if (cmd == "graph") {
      CUgraph graph = nullptr;
      CUgraphNode node = nullptr;
      CUDA_MEM_ALLOC_NODE_PARAMS params{};
      params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      params.poolProps.location.id = CurrentDevice();
      params.bytesize = ParseSize(arg(1));
      CUgraphExec exec = nullptr;
      CUresult r = DRIVER(cuGraphCreate)(&graph, 0);
      if (r == CUDA_SUCCESS) r = DRIVER(cuGraphAddMemAllocNode)(&node, graph, nullptr, 0, &params);
      if (r == CUDA_SUCCESS) r = DRIVER(cuGraphInstantiateWithFlags)(&exec, graph, 0);
      if (r == CUDA_SUCCESS) g_graphs.push_back(exec);
      Report("graph", r);
      ++i;
    } else if (cmd == "graphvia") {
      CUgraphExec exec = nullptr;
      const CUresult r = InstantiateAllocGraph(arg(1), ParseSize(arg(2)), &exec);
      if (r == CUDA_SUCCESS) g_graphs.push_back(exec);
      Report("graphvia", r);
      i += 2;
    } else if (cmd == "ctxreset" || cmd == "ctxrelease") {
      const CUdevice dev = CurrentDevice();
      const bool v1 = std::string(arg(1)) == "v1";
      CUresult r;
      if (cmd == "ctxreset") r = v1 ? DRIVER(cuDevicePrimaryCtxReset)(dev) : DRIVER(cuDevicePrimaryCtxReset_v2)(dev);
      else r = v1 ? DRIVER(cuDevicePrimaryCtxRelease)(dev) : DRIVER(cuDevicePrimaryCtxRelease_v2)(dev);
      Report(cmd.c_str(), r);
      ++i;
    } else if (cmd == "procaddr") {
      void* fn = nullptr;
      CUdriverProcAddressQueryResult status;
      Report("procaddr", DRIVER(cuGetProcAddress_v2)(arg(1), &fn, atoi(arg(2)), 0, &status));
      i += 2;
    } else if (cmd == "heap") {
      Report("heap", DRIVER(cuCtxSetLimit)(CU_LIMIT_MALLOC_HEAP_SIZE, ParseSize(arg(1))));
      ++i;
    } else if (cmd == "launch") {
      Report("launch", g_graphs.empty() ? CUDA_ERROR_INVALID_VALUE : DRIVER(cuGraphLaunch)(g_graphs.back(), nullptr));
    } else if (cmd == "sync") {
      Report("sync", DRIVER(cuStreamSynchronize)(nullptr));
    } else if (cmd == "trim") {
      CUresult r = CUDA_SUCCESS;
      CUmemoryPool def = nullptr;
      if (DRIVER(cuDeviceGetMemPool)(&def, CurrentDevice()) == CUDA_SUCCESS) r = DRIVER(cuMemPoolTrimTo)(def, 0);
      for (CUmemoryPool p : g_pools) {
        if (r == CUDA_SUCCESS) r = DRIVER(cuMemPoolTrimTo)(p, 0);
      }
      Report("trim", r);
    } else if (cmd == "free") {
      CUresult r = CUDA_ERROR_INVALID_VALUE;
      if (!g_allocations.empty()) {
        const Allocation a = g_allocations.back();
        g_allocations.pop_back();
        switch (a.kind) {
          case Allocation::kDevice: r = DRIVER(cuMemFree_v2)(a.handle); break;
          case Allocation::kVmm: r = DRIVER(cuMemRelease)(a.handle); break;
          case Allocation::kArray: r = DRIVER(cuArrayDestroy)(reinterpret_cast<CUarray>(a.handle)); break;
          case Allocation::kMipmap:
            r = DRIVER(cuMipmappedArrayDestroy)(reinterpret_cast<CUmipmappedArray>(a.handle));
            break;
          case Allocation::kAsync: r = DRIVER(cuMemFreeAsync)(a.handle, nullptr); break;
        }
      }
      Report("free", r);
    } else if (cmd == "fill") {
      const uint64_t chunk = ParseSize(arg(1));
      uint64_t total = 0;
      CUdeviceptr p = 0;
      while (DRIVER(cuMemAlloc_v2)(&p, chunk) == CUDA_SUCCESS) {
        g_allocations.push_back({Allocation::kDevice, p});
        total += chunk;
      }
      printf("fill %llu\n", static_cast<unsigned long long>(total));
      ++i;
    } else if (cmd == "meminfo") {
      size_t free_b = 0, total_b = 0;
      const CUresult r = DRIVER(cuMemGetInfo_v2)(&free_b, &total_b);
      if (r == CUDA_SUCCESS) printf("meminfo %zu %zu\n", free_b, total_b);
      else Report("meminfo", r);
    } else if (cmd == "watchinfo") {
      size_t free_b = 0, first = 0, total_b = 0;
      CUresult r = DRIVER(cuMemGetInfo_v2)(&free_b, &first);
      if (FILE* f = fopen(arg(1), "w")) fclose(f);  // the baseline is taken
      ++i;
      timespec now{}, start{};
      clock_gettime(CLOCK_MONOTONIC, &start);
      const timespec pause = {0, 200000};
      for (total_b = first; r == CUDA_SUCCESS && total_b == first;) {
        nanosleep(&pause, nullptr);
        r = DRIVER(cuMemGetInfo_v2)(&free_b, &total_b);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 30) break;
      }
      if (r != CUDA_SUCCESS) Report("changed", r);
      else if (total_b == first) printf("changed timeout\n");
      else printf("changed %zu %lld\n", total_b, static_cast<long long>(now.tv_sec) * 1000000000ll + now.tv_nsec);
    } else if (cmd == "totalmem") {
      size_t bytes = 0;
      const CUresult r = DRIVER(cuDeviceTotalMem_v2)(&bytes, CurrentDevice());
      if (r == CUDA_SUCCESS) printf("totalmem %zu\n", bytes);
      else Report("totalmem", r);
    } else if (cmd == "physical") {
      auto used = reinterpret_cast<fake_cuda_physical_used_fn>(FakeDriverSymbol("fake_cuda_physical_used"));
      printf("physical %llu\n", used ? static_cast<unsigned long long>(used(CurrentDevice())) : 0ull);
    } else if (cmd == "nvml") {
      void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
      struct Memory {
        unsigned long long total, free, used;
      } m{};
      int r = -1;
      if (nvml != nullptr) {
        using Init = int (*)();
        using Handle = int (*)(unsigned, void**);
        using Info = int (*)(void*, Memory*);
        void* device = nullptr;
        r = reinterpret_cast<Init>(dlsym(nvml, "nvmlInit_v2"))();
        if (r == 0) r = reinterpret_cast<Handle>(dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2"))(0, &device);
        if (r == 0) r = reinterpret_cast<Info>(dlsym(nvml, "nvmlDeviceGetMemoryInfo"))(device, &m);
      }
      if (r == 0) printf("nvml %llu %llu\n", m.total, m.used);
      else printf("nvml err %d\n", r);
    } else if (cmd == "ready") {
      // Written to a temporary name and renamed, so a reader sees the pid whole.
      const std::string tmp = std::string(arg(1)) + ".tmp";
      FILE* f = fopen(tmp.c_str(), "w");
      if (f != nullptr) {
        fprintf(f, "%d\n", static_cast<int>(getpid()));
        fclose(f);
        rename(tmp.c_str(), arg(1));
      }
      printf("ready\n");
      ++i;
    } else if (cmd == "await") {
      Await(arg(1));
      ++i;
    } else if (cmd == "forkidle") {
      // Blocked in read() rather than polling: a thousand pollers would
      // starve a small machine. The pipe's end of file releases them.
      const int n = atoi(arg(1));
      int forked = 0;
      if (g_idle_pipe[1] >= 0 || pipe(g_idle_pipe) == 0) {
        for (; forked < n; ++forked) {
          const pid_t child = fork();
          if (child < 0) break;
          if (child == 0) {
            close(g_idle_pipe[1]);
            char c;
            while (read(g_idle_pipe[0], &c, 1) < 0 && errno == EINTR) {
            }
            _exit(0);
          }
        }
      }
      printf("forkidle %d\n", forked);
      ++i;
    } else if (cmd == "releaseforks") {
      if (g_idle_pipe[1] >= 0) close(g_idle_pipe[1]);
      g_idle_pipe[1] = -1;
      int reaped = 0;
      while (wait(nullptr) > 0) ++reaped;
      printf("releaseforks %d\n", reaped);
    } else if (cmd == "spin") {
      // Launches a kernel back to back for SECONDS and writes each run of
      // launches (no gap over 100 µs) to FILE as "start_ns end_ns count":
      // what the GPU-turn tests read. Prints the total.
      CUmodule module = nullptr;
      CUfunction function = nullptr;
      CUresult r = DRIVER(cuModuleLoadData)(&module, "spin");
      if (r == CUDA_SUCCESS) r = DRIVER(cuModuleGetFunction)(&function, module, "spin");
      FILE* out = fopen(arg(2), "w");
      const uint64_t deadline = NowNs() + static_cast<uint64_t>(atof(arg(1)) * 1e9);
      uint64_t launches = 0, run_start = 0, last = 0, run_count = 0;
      for (uint64_t now = NowNs(); r == CUDA_SUCCESS && now < deadline; now = NowNs()) {
        r = DRIVER(cuLaunchKernel)(function, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
        const uint64_t done = NowNs();
        if (run_count > 0 && done - last > 100000) {
          if (out != nullptr) fprintf(out, "%llu %llu %llu\n", (unsigned long long)run_start,
                                      (unsigned long long)last, (unsigned long long)run_count);
          run_count = 0;
        }
        if (run_count++ == 0) run_start = done;
        last = done;
        ++launches;
      }
      if (run_count > 0 && out != nullptr) {
        fprintf(out, "%llu %llu %llu\n", (unsigned long long)run_start, (unsigned long long)last,
                (unsigned long long)run_count);
      }
      if (out != nullptr) fclose(out);
      char extra[32];
      snprintf(extra, sizeof extra, " %llu", static_cast<unsigned long long>(launches));
      Report("spin", r, extra);
      i += 2;
    } else if (cmd == "bursts" || cmd == "syncbursts") {
      // An LC's requests: N bursts of K launches, GAP_US apart within a
      // burst (busy-waited), and PERIOD_US of sleep after each burst (from
      // its end, so a late burst never runs into the next). K = 1 is a
      // request of one kernel or one CUDA graph replay. syncbursts ends
      // each burst with cuCtxSynchronize, as a server does before it
      // answers.
      const long n = atol(arg(1)), k = atol(arg(2));
      const uint64_t gap_ns = strtoull(arg(3), nullptr, 10) * 1000;
      const long period_us = atol(arg(4));
      CUmodule module = nullptr;
      CUfunction function = nullptr;
      CUresult r = DRIVER(cuModuleLoadData)(&module, "bursts");
      if (r == CUDA_SUCCESS) r = DRIVER(cuModuleGetFunction)(&function, module, "bursts");
      long launched = 0;
      for (long b = 0; b < n && r == CUDA_SUCCESS; ++b) {
        for (long j = 0; j < k && r == CUDA_SUCCESS; ++j) {
          if (j > 0) for (const uint64_t until = NowNs() + gap_ns; NowNs() < until;) {}
          r = DRIVER(cuLaunchKernel)(function, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
          launched += r == CUDA_SUCCESS;
        }
        if (cmd == "syncbursts" && r == CUDA_SUCCESS) r = DRIVER(cuCtxSynchronize)();
        timespec ts{period_us / 1000000, (period_us % 1000000) * 1000};
        nanosleep(&ts, nullptr);
      }
      char extra[32];
      snprintf(extra, sizeof extra, " %ld", launched);
      Report(cmd.c_str(), r, extra);
      i += 4;
    } else if (cmd == "span_begin" || cmd == "span_end" || cmd == "hint_begin" || cmd == "hint_end") {
      // The task API, found the way applications find it.
      using Fn = int (*)();
      auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, ("gpuslice_" + cmd).c_str()));
      if (fn == nullptr) printf("%s missing\n", cmd.c_str());
      else printf("%s %d\n", cmd.c_str(), fn());
    } else if (cmd == "hint") {
      auto fn = reinterpret_cast<int (*)(unsigned)>(dlsym(RTLD_DEFAULT, "gpuslice_hint"));
      if (fn == nullptr) printf("hint missing\n");
      else printf("hint %d\n", fn(static_cast<unsigned>(strtoul(arg(1), nullptr, 10))));
      ++i;
    } else if (cmd == "kernel" || cmd == "kernelon" || cmd == "kernelpt") {
      CUresult r = CUDA_SUCCESS;
      if (g_kernel == nullptr) {
        CUmodule module = nullptr;
        r = DRIVER(cuModuleLoadData)(&module, "kernel");
        if (r == CUDA_SUCCESS) r = DRIVER(cuModuleGetFunction)(&g_kernel, module, "kernel");
      }
      CUstream stream = nullptr;
      if (cmd == "kernelpt") stream = CU_STREAM_PER_THREAD;
      if (cmd == "kernelon") {
        if (g_streams.empty())
          r = CUDA_ERROR_INVALID_VALUE;
        else
          stream = g_streams.back();
      }
      if (r == CUDA_SUCCESS) r = DRIVER(cuLaunchKernel)(g_kernel, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr);
      Report(cmd.c_str(), r);
    } else if (cmd == "streamdestroy") {
      CUresult r = CUDA_ERROR_INVALID_VALUE;
      if (!g_streams.empty()) {
        r = DRIVER(cuStreamDestroy_v2)(g_streams.back());
        g_streams.pop_back();
      }
      Report("streamdestroy", r);
    } else if (cmd == "calls") {
      auto count = reinterpret_cast<uint64_t (*)(const char*)>(FakeDriverSymbol("fake_cuda_call_count"));
      for (; i + 1 < argc && strncmp(argv[i + 1], "cu", 2) == 0; ++i) {
        printf("calls %s %llu\n", argv[i + 1], count == nullptr ? 0ull : (unsigned long long)count(argv[i + 1]));
      }
    } else if (cmd == "ctxsync") {
      Report("ctxsync", DRIVER(cuCtxSynchronize)());
    } else if (cmd == "rmcontrol") {
      const std::string what = arg(1);
      auto handles = reinterpret_cast<fake_cuda_rm_handles_fn>(FakeDriverSymbol("fake_cuda_rm_handles"));
      int fd = -1;
      uint32_t client = 0, group = 0;
      if (handles == nullptr || handles(&fd, &client, &group) == 0) {
        printf("rmcontrol %s no-handles\n", what.c_str());
      } else {
        namespace rm = gpuslice::rm;
        uint64_t value = strtoull(arg(2), nullptr, 0);
        rm::Nvos54 c{};
        c.hClient = client;
        c.hObject = group;
        c.cmd = what == "slice"      ? rm::kCtrlSetTimeslice
                : what == "realtime" ? rm::kCtrlMakeRealtime
                                     : rm::kCtrlSetInterleaveLevel;
        c.params = reinterpret_cast<uint64_t>(&value);
        c.paramsSize = what == "slice" ? rm::kTimesliceParamsSize : 4;
        const int rc = ioctl(fd, rm::IoctlRequest(rm::kEscRmControl, sizeof c), &c);
        printf("rmcontrol %s %x\n", what.c_str(), rc == 0 ? c.status : 0xffffffffu);
      }
      i += 2;
    } else if (cmd == "rawslice") {
      using RawIoctl = int (*)(int, unsigned long, void*);
      auto raw = reinterpret_cast<RawIoctl>(dlsym(RTLD_DEFAULT, "fake_rm_raw_ioctl"));
      auto handles = reinterpret_cast<fake_cuda_rm_handles_fn>(FakeDriverSymbol("fake_cuda_rm_handles"));
      int fd = -1;
      uint32_t client = 0, group = 0;
      long sets = 0;
      if (raw != nullptr && handles != nullptr && handles(&fd, &client, &group) != 0) {
        namespace rm = gpuslice::rm;
        const uint64_t value = strtoull(arg(1), nullptr, 0);
        const uint64_t until = NowNs() + static_cast<uint64_t>(atof(arg(2)) * 1e9);
        do {
          uint64_t us = value;
          rm::Nvos54 c{};
          c.hClient = client;
          c.hObject = group;
          c.cmd = rm::kCtrlSetTimeslice;
          c.params = reinterpret_cast<uint64_t>(&us);
          c.paramsSize = rm::kTimesliceParamsSize;
          if (raw(fd, rm::IoctlRequest(rm::kEscRmControl, sizeof c), &c) == 0 && c.status == 0) ++sets;
          usleep(20000);
        } while (NowNs() < until);
      }
      printf("rawslice %ld\n", sets);
      fflush(stdout);
      i += 2;
    } else if (cmd == "freezetick") {
      // Its signals are blocked, so a child of this process stops it with
      // ptrace (a thread stops alone) and stays its tracer until this
      // process ends.
      pid_t tid = 0;
      if (DIR* tasks = opendir("/proc/self/task")) {
        while (dirent* e = readdir(tasks)) {
          char comm[32] = {0};
          FILE* f = fopen(("/proc/self/task/" + std::string(e->d_name) + "/comm").c_str(), "r");
          if (f == nullptr) continue;
          if (fgets(comm, sizeof comm, f) != nullptr && strcmp(comm, "gpuslice-tick\n") == 0) tid = atoi(e->d_name);
          fclose(f);
        }
        closedir(tasks);
      }
      char parked = '0';
      int pipe_fds[2];
      if (tid != 0 && pipe(pipe_fds) == 0) {
        prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);
        const pid_t child = fork();
        if (child == 0) {
          prctl(PR_SET_PDEATHSIG, SIGKILL);
          // Stopped between ticks, in its sleep, it holds nothing this
          // process's other threads need (the fake RM device's lock, when
          // stopped inside a control): interrupted anywhere else, it is let
          // go and interrupted again.
          char ok = '0';
          if (ptrace(PTRACE_SEIZE, tid, 0, 0) == 0) {
            const std::string syscall_file =
                "/proc/" + std::to_string(getppid()) + "/task/" + std::to_string(tid) + "/syscall";
            for (int attempt = 0; attempt < 1000 && ok == '0'; ++attempt) {
              if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0 || waitpid(tid, nullptr, __WALL) != tid) break;
              long nr = -1;
              if (FILE* f = fopen(syscall_file.c_str(), "r")) {
                if (fscanf(f, "%ld", &nr) != 1) nr = -1;
                fclose(f);
              }
              if (nr == SYS_nanosleep || nr == SYS_clock_nanosleep || nr == SYS_futex || nr == SYS_restart_syscall) {
                ok = '1';
              } else {
                ptrace(PTRACE_CONT, tid, 0, 0);
                usleep(200);
              }
            }
          }
          if (write(pipe_fds[1], &ok, 1) != 1) _exit(1);
          for (;;) pause();
        }
        if (child < 0 || read(pipe_fds[0], &parked, 1) != 1) parked = '0';
        close(pipe_fds[0]);
        close(pipe_fds[1]);
      }
      printf("freezetick %s\n", parked == '1' ? "ok" : "none");
      fflush(stdout);
    } else if (cmd == "holders") {
      fake_cuda_holder_counts c{};
      auto holders = reinterpret_cast<fake_cuda_holders_fn>(FakeDriverSymbol("fake_cuda_holders"));
      if (holders == nullptr) {
        printf("holders missing\n");
      } else {
        holders(&c);
        printf("holders %llu %llu %llu %llu %llu %llu\n", static_cast<unsigned long long>(c.launched),
               static_cast<unsigned long long>(c.running), static_cast<unsigned long long>(c.released),
               static_cast<unsigned long long>(c.expired), static_cast<unsigned long long>(c.last_bound_ns),
               static_cast<unsigned long long>(c.syncs_waited));
      }
    } else if (cmd == "gate_waits") {
      // The vGPU's ledger counter of launches that waited at the GPU-turn
      // gate (core::Ledger::gate_waits, at byte 56), read as any process of
      // the vGPU can: what the pacing tests assert on instead of timings.
      PrintLedgerCounter("gate_waits", 56);
    } else if (cmd == "hold_budget_spent") {
      PrintLedgerCounter("hold_budget_spent", 248);  // core::Ledger::hold_budget_spent
    } else if (cmd == "forge_listed_lc") {
      const char* dir = getenv("GPUSLICE_VGPU_DIR");
      printf("forge_listed_lc %d\n",
             ForgeListedLatencyCritical(dir != nullptr ? dir : "", dir != nullptr ? OwnVgpuId(dir) : 0, atof(arg(1))));
      ++i;
    } else if (cmd == "board") {
      PrintBoards();
    } else if (cmd == "forge_lc") {
      const char* dir = getenv("GPUSLICE_VGPU_DIR");
      printf("forge_lc %d\n", ForgeLatencyCritical(dir != nullptr ? dir : "", dir != nullptr ? OwnVgpuId(dir) : 0,
                                                    atof(arg(1))));
      ++i;
    } else if (cmd == "forge_cap_debt") {
      const char* dir = getenv("GPUSLICE_VGPU_DIR");
      printf("forge_cap_debt %d\n",
             ForgeCapDebt(dir != nullptr ? dir : "", dir != nullptr ? OwnVgpuId(dir) : 0, atof(arg(1))));
      ++i;
    } else if (cmd == "forge_turns") {
      const char* dir = getenv("GPUSLICE_VGPU_DIR");
      printf("forge_turns %d\n", ForgeTurns(dir != nullptr ? dir : "", dir != nullptr ? OwnVgpuId(dir) : 0,
                                             atof(arg(1))));
      ++i;
    } else if (cmd == "gpu_record") {
      // struct GpuRecord: lock, launches, hand_changes, overlaps, ... (uint64).
      const char* path = getenv("FAKE_GPU_RECORD");
      const int fd = path != nullptr ? open(path, O_RDONLY) : -1;
      void* map = fd >= 0 ? mmap(nullptr, 64, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
      if (fd >= 0) close(fd);
      if (map == MAP_FAILED) {
        printf("gpu_record none\n");
      } else {
        const auto* words = static_cast<const uint64_t*>(map);
        unsigned long long v[3];
        for (int k = 0; k < 3; ++k) v[k] = __atomic_load_n(&words[1 + k], __ATOMIC_ACQUIRE);
        printf("gpu_record %llu %llu %llu\n", v[0], v[1], v[2]);
        munmap(map, 64);
      }
    } else if (cmd == "sleep") {
      const long ms = atol(arg(1));
      timespec ts{ms / 1000, (ms % 1000) * 1000000};
      nanosleep(&ts, nullptr);
      ++i;
    } else if (cmd == "exitsleep") {
      g_exit_sleep_ms = atol(arg(1));
      atexit(&SleepAtExit);
      printf("exitsleep ok\n");
      ++i;
    } else if (cmd == "hold") {
      printf("holding\n");
      for (;;) pause();
    } else {
      fprintf(stderr, "cuda_app: unknown command '%s'\n", cmd.c_str());
      return 2;
    }
  }
  return 0;
}
