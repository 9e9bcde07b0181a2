// lc_be.cu — the synthetic loads of the compute benchmarks (run_compute.py).
//
//   lc_be lc SECONDS OUT.json      latency-critical: a ~50 µs kernel every 5 ms
//                                  (200 req/s); each request's latency is launch
//                                  to completion, seen by a spinning host thread.
//   lc_be lchint SECONDS OUT.json  the same request preceded by PREP_US (400) µs
//                                  of host preparation (a CPU busy-wait). With
//                                  LC_HINT=1, gpuslice_hint_begin() is called at
//                                  the start of the preparation and
//                                  gpuslice_hint_end() once the request is done.
//                                  Latency is from the end of the preparation
//                                  (submission) to completion; `total_*` also
//                                  counts the preparation.
//   lc_be lce SECONDS OUT.json     eager latency-critical: a request is LCE_KERNELS
//                                  (100) kernels of LCE_US (20) µs, with LCE_GAP_US
//                                  (30) µs of host work before each launch (the
//                                  facts file's native eager LC), every PERIOD_US;
//                                  latency from the first launch to completion.
//                                  With LC_SPAN=1 each request is a
//                                  gpuslice_span_begin()/end() span.
//   lc_be holdercheck PTX OUT.json the holder kernel (src/interposer/
//                                  holder_kernel.ptx) on its own: never
//                                  released, it must end at its bound; released
//                                  by the host, it must end at once.
//   lc_be be SECONDS OUT.json      best-effort: back-to-back ~20 ms kernels;
//                                  reports kernels per second and each kernel's
//                                  completion time (CLOCK_MONOTONIC seconds, the
//                                  clock of Python's time.monotonic()), so the
//                                  parent can count them over the LC's window.
//   lc_be lcctx SECONDS OUT.json   `lc` in the process's primary context, beside
//                                  `be`'s back-to-back kernels in a second context
//                                  of the same process (cuCtxCreate, on a thread of
//                                  its own, started first); OUT is the LC's
//                                  result, BE_OUT (if set) the busy context's, as
//                                  `be` writes it.
//   lc_be small SECONDS OUT.json   back-to-back ~10 µs kernels (SMALL_US), a
//                                  deep queue (batches of 100 behind each other);
//                                  reports kernels per second.
//   lc_be graph SECONDS OUT.json   a CUDA graph of GRAPH_KERNELS (50) such small
//                                  kernels, launched repeatedly (4 graphs per
//                                  batch, batches queued behind each other);
//                                  reports kernels per second.
//
// Env: LC_WORK_US (50), BE_WORK_MS (20), PERIOD_US (5000; lce 10000),
// PREP_US (400), LC_HINT (0), LC_SPAN (0), SMALL_US (10), GRAPH_KERNELS (50),
// LCE_KERNELS (100), LCE_US (20), LCE_GAP_US (30). LC_ITERS / SMALL_ITERS fix
// the kernels' length to what a calibration alone found (calibrating beside a
// busy BE, or under a cap, would measure the wait, not the kernel).
// READY_FILE: created once the load runs (be, small, graph), so the parent
// can start the LC only then. STOP_FILE: be, small and graph stop early once
// it exists, so a background load runs exactly as long as the foreground one.
// GO_FILE (lc): once its context is made and its kernel timed, the LC
// creates READY_FILE and starts its requests (and its clock) only once
// GO_FILE exists, so the parent can act on its channel groups first.
//
// The kernel shape is the facts file's (gpu-facts.md): SMs×8 blocks of 256
// threads of dependent FMAs, so one kernel fills the GPU and the GPU can
// only be shared by time.
#include <cuda.h>  // types only: the driver is reached through dlsym
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e = (x);                                                                       \
    if (e != cudaSuccess) {                                                                    \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));                \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

__global__ void Work(int iters, float* out) {
  float a = threadIdx.x * 0.001f, b = 1.000001f;
  for (int i = 0; i < iters; ++i) a = fmaf(a, b, 0.5f);
  out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}

namespace {

double NowUs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int g_blocks = 0;
float* g_out = nullptr;

double Env(const char* name, double fallback) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? atof(v) : fallback;
}

bool FileExists(const char* path) { return path != nullptr && *path != '\0' && access(path, F_OK) == 0; }

void Touch(const char* path) {
  if (path == nullptr || *path == '\0') return;
  if (FILE* f = fopen(path, "w")) fclose(f);
}

// Time of `n` back-to-back kernels of `iters`, per kernel, in µs.
double TimeKernelUs(int iters, int n = 1) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a));
  for (int i = 0; i < n; ++i) Work<<<g_blocks, 256>>>(iters, g_out);
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return ms * 1000.0 / n;
}

// Iterations for a kernel of `target_us` on an idle GPU, timed over `n`
// kernels back to back (so launch gaps do not count for short kernels).
int Calibrate(double target_us, int n = 1) {
  int iters = 1000;
  TimeKernelUs(iters, n);
  for (int r = 0; r < 6; ++r) iters = std::max(1, static_cast<int>(iters * target_us / TimeKernelUs(iters, n)));
  return iters;
}

int ItersFromEnv(const char* name, double target_us, int n) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? atoi(v) : Calibrate(target_us, n);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

// A gpuslice export, if the library is loaded: preload puts it in the global
// scope; the libpath shim is libcuda.so.1 itself.
using ApiFn = int (*)();
ApiFn FindExport(const char* name) {
  if (void* f = dlsym(RTLD_DEFAULT, name)) return reinterpret_cast<ApiFn>(f);
  if (void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) return reinterpret_cast<ApiFn>(dlsym(h, name));
  return nullptr;
}

void SpinUntil(double t_us) {
  while (NowUs() < t_us) {
  }
}

// APP_HOLDER=same|other (experiment): the application itself launches the
// holder kernel (HOLDER_PTX) in the request's stream (same) or a stream of
// its own (other), and releases it right after submitting its next kernel;
// separates where the holder runs from how gpuslice launches it.
struct AppHolder {
  cudaKernel_t kernel{};
  unsigned* word = nullptr;
  unsigned* dword = nullptr;
  cudaStream_t stream = nullptr;  // nullptr: the request's stream (0)
  bool on = false;
  void Init() {
    const char* mode = getenv("APP_HOLDER");
    const char* path = getenv("HOLDER_PTX");
    if (mode == nullptr || path == nullptr || *mode == '\0') return;
    FILE* f = fopen(path, "r");
    if (f == nullptr) return;
    std::string ptx;
    for (int c; (c = fgetc(f)) != EOF;) ptx.push_back(static_cast<char>(c));
    fclose(f);
    cudaLibrary_t lib;
    CK(cudaLibraryLoadData(&lib, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    CK(cudaLibraryGetKernel(&kernel, lib, "gpuslice_holder"));
    CK(cudaHostAlloc(&word, 64, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&dword, word, 0));
    if (std::string(mode) == "other") CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    on = true;
  }
  void Launch(unsigned long long bound_ns) {
    if (!on) return;
    unsigned armed = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    void* params[] = {&dword, &armed, &bound_ns};
    CK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(1), params, 0, stream));
  }
  void Release() {
    if (on) __atomic_add_fetch(word, 1, __ATOMIC_RELEASE);
  }
};

// The LC loop of `lc` and `lchint`. prep_us > 0 adds the host preparation.
void RunLc(FILE* out, const char* mode, double seconds, double prep_us) {
  const int iters = ItersFromEnv("LC_ITERS", Env("LC_WORK_US", 50), 1);
  const double kernel_alone = TimeKernelUs(iters);
  const double period = Env("PERIOD_US", 5000);
  const bool want_hint = Env("LC_HINT", 0) != 0;
  ApiFn hint_begin = FindExport("gpuslice_hint_begin"), hint_end = FindExport("gpuslice_hint_end");
  const bool hint = want_hint && hint_begin != nullptr && hint_end != nullptr;
  long hint_failures = 0;
  AppHolder app;
  if (prep_us > 0) app.Init();
  if (const char* go = getenv("GO_FILE"); go != nullptr && *go != '\0') {
    Touch(getenv("READY_FILE"));
    while (!FileExists(go)) usleep(1000);
  }
  std::vector<double> lat, total, starts;
  double last_done = 0;
  const double end = NowUs() + seconds * 1e6;
  double next = NowUs();
  while (NowUs() < end) {
    SpinUntil(next);
    const double t_prep = NowUs();
    if (hint && hint_begin() != 0) ++hint_failures;
    app.Launch(static_cast<unsigned long long>(prep_us * 1000) + 1000000);
    if (prep_us > 0) SpinUntil(t_prep + prep_us);
    const double t0 = NowUs();
    Work<<<g_blocks, 256>>>(iters, g_out);
    app.Release();
    CK(cudaStreamSynchronize(0));
    last_done = NowUs();
    if (hint && hint_end() != 0) ++hint_failures;
    lat.push_back(last_done - t0);
    total.push_back(last_done - t_prep);
    starts.push_back(t_prep);
    next += period;
    if (next < NowUs()) next = NowUs();
  }
  // The first 5% warm the caches and the scheduler; they are not requests.
  const size_t skip = lat.size() / 20;
  lat.erase(lat.begin(), lat.begin() + skip);
  total.erase(total.begin(), total.begin() + skip);
  const double t_start = starts.size() > skip ? starts[skip] : 0;
  fprintf(out,
          "{\"mode\":\"%s\",\"iters\":%d,\"kernel_us\":%.1f,\"period_us\":%.0f,\"prep_us\":%.0f,"
          "\"hint_requested\":%s,\"hint_available\":%s,\"hint_failures\":%ld,\"app_holder\":%s,\"n\":%zu,"
          "\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,"
          "\"total_p50_us\":%.1f,\"total_p99_us\":%.1f,\"t_start\":%.6f,\"t_end\":%.6f}\n",
          mode, iters, kernel_alone, period, prep_us, want_hint ? "true" : "false",
          hint_begin != nullptr && hint_end != nullptr ? "true" : "false", hint_failures,
          app.on ? (app.stream == nullptr ? "\"same\"" : "\"other\"") : "null", lat.size(),
          Percentile(lat, .5), Percentile(lat, .9), Percentile(lat, .99), Percentile(lat, 1.0), Percentile(total, .5),
          Percentile(total, .99), t_start / 1e6, last_done / 1e6);
}

// `lce`: an eager request of many small kernels with host work between them.
void RunLce(FILE* out, double seconds) {
  const int kernels = static_cast<int>(Env("LCE_KERNELS", 100));
  const double gap = Env("LCE_GAP_US", 30);
  const int iters = ItersFromEnv("LC_ITERS", Env("LCE_US", 20), 100);
  const double kernel_alone = TimeKernelUs(iters, 100);
  const double period = Env("PERIOD_US", 10000);
  ApiFn span_begin = FindExport("gpuslice_span_begin"), span_end = FindExport("gpuslice_span_end");
  const bool span = Env("LC_SPAN", 0) != 0 && span_begin != nullptr && span_end != nullptr;
  long span_failures = 0;
  AppHolder app;  // APP_HOLDER: a holder relayed after every kernel (linger 2 ms)
  app.Init();
  std::vector<double> lat, starts;
  double last_done = 0;
  const double end = NowUs() + seconds * 1e6;
  double next = NowUs();
  while (NowUs() < end) {
    SpinUntil(next);
    const double t0 = NowUs();
    if (span && span_begin() != 0) ++span_failures;
    for (int k = 0; k < kernels; ++k) {
      SpinUntil(NowUs() + gap);
      Work<<<g_blocks, 256>>>(iters, g_out);
      app.Release();
      if (k + 1 < kernels) app.Launch(2000000);
    }
    CK(cudaStreamSynchronize(0));
    last_done = NowUs();
    if (span && span_end() != 0) ++span_failures;
    lat.push_back(last_done - t0);
    starts.push_back(t0);
    next += period;
    if (next < NowUs()) next = NowUs();
  }
  const size_t skip = lat.size() / 20;
  lat.erase(lat.begin(), lat.begin() + skip);
  fprintf(out,
          "{\"mode\":\"lce\",\"iters\":%d,\"kernel_us\":%.1f,\"kernels\":%d,\"gap_us\":%.0f,"
          "\"period_us\":%.0f,\"span\":%s,\"span_failures\":%ld,\"n\":%zu,\"p50_us\":%.1f,\"p90_us\":%.1f,"
          "\"p99_us\":%.1f,\"max_us\":%.1f,\"t_start\":%.6f,\"t_end\":%.6f}\n",
          iters, kernel_alone, kernels, gap, period, span ? "true" : "false", span_failures, lat.size(),
          Percentile(lat, .5), Percentile(lat, .9), Percentile(lat, .99), Percentile(lat, 1.0),
          starts.size() > skip ? starts[skip] / 1e6 : 0.0, last_done / 1e6);
}

// `holdercheck`: the device side of the holder's contract (holder.h), on the
// real GPU: (release_word, armed_value, bound_ns), ends when the word changes
// or the bound has passed.
void RunHolderCheck(FILE* out, const char* ptx_path) {
  FILE* f = fopen(ptx_path, "r");
  if (f == nullptr) {
    fprintf(stderr, "lc_be: cannot read %s\n", ptx_path);
    exit(1);
  }
  std::string ptx;
  for (int c; (c = fgetc(f)) != EOF;) ptx.push_back(static_cast<char>(c));
  fclose(f);
  cudaLibrary_t lib;
  cudaKernel_t kernel;
  CK(cudaLibraryLoadData(&lib, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CK(cudaLibraryGetKernel(&kernel, lib, "gpuslice_holder"));
  unsigned* word = nullptr;
  CK(cudaHostAlloc(&word, 64, cudaHostAllocMapped));
  unsigned* dword = nullptr;
  CK(cudaHostGetDevicePointer(&dword, word, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto run = [&](unsigned long long bound_ns, double release_after_us) {
    unsigned armed = *word;
    void* params[] = {&dword, &armed, &bound_ns};
    const double t0 = NowUs();
    CK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(1), params, 0, s));
    if (release_after_us >= 0) {
      SpinUntil(t0 + release_after_us);
      __atomic_add_fetch(word, 1, __ATOMIC_RELEASE);
    }
    CK(cudaStreamSynchronize(s));
    return NowUs() - t0;
  };
  run(1000000, -1);  // warm-up: JIT and first launch
  std::vector<double> bound_2ms, bound_20ms, released_200us;
  for (int i = 0; i < 20; ++i) {
    bound_2ms.push_back(run(2000000, -1));
    bound_20ms.push_back(run(20000000, -1));
    released_200us.push_back(run(1000000000ull, 200));  // a 1 s bound, released after 200 µs
  }
  fprintf(out,
          "{\"mode\":\"holdercheck\",\"unreleased_bound_2ms_us\":{\"p50\":%.1f,\"max\":%.1f},"
          "\"unreleased_bound_20ms_us\":{\"p50\":%.1f,\"max\":%.1f},"
          "\"released_after_200us_bound_1s_us\":{\"p50\":%.1f,\"max\":%.1f}}\n",
          Percentile(bound_2ms, .5), Percentile(bound_2ms, 1), Percentile(bound_20ms, .5), Percentile(bound_20ms, 1),
          Percentile(released_200us, .5), Percentile(released_200us, 1));
}

void RunBe(FILE* out, double seconds) {
  const int iters = Calibrate(Env("BE_WORK_MS", 20) * 1000);
  const char* stop = getenv("STOP_FILE");
  const double start = NowUs(), end = start + seconds * 1e6;
  std::vector<double> ends;
  cudaEvent_t ev[2];
  CK(cudaEventCreate(&ev[0]));
  CK(cudaEventCreate(&ev[1]));
  Work<<<g_blocks, 256>>>(iters, g_out);
  CK(cudaEventRecord(ev[0]));
  Touch(getenv("READY_FILE"));
  for (int i = 1; NowUs() < end && !FileExists(stop); ++i) {
    Work<<<g_blocks, 256>>>(iters, g_out);  // keep one queued behind the running one
    CK(cudaEventRecord(ev[i & 1]));
    CK(cudaEventSynchronize(ev[(i - 1) & 1]));
    ends.push_back(NowUs() / 1e6);
  }
  CK(cudaDeviceSynchronize());
  const double elapsed_s = (NowUs() - start) / 1e6;
  fprintf(out, "{\"mode\":\"be\",\"iters\":%d,\"kernels\":%zu,\"seconds\":%.3f,\"kernels_per_s\":%.3f,\"ends\":[",
          iters, ends.size(), elapsed_s, ends.size() / elapsed_s);
  for (size_t i = 0; i < ends.size(); ++i) fprintf(out, "%s%.6f", i ? "," : "", ends[i]);
  fprintf(out, "]}\n");
}

// `small` and `graph`: batches of kernels queued back to back; one batch runs
// while the next is queued. Throughput is counted from the first batch's
// completion (start-up excluded) to the last one's.
void RunSmall(FILE* out, const std::string& mode, double seconds) {
  const int iters = ItersFromEnv("SMALL_ITERS", Env("SMALL_US", 10), 200);
  const double kernel_alone = TimeKernelUs(iters, 200);
  const int graph_kernels = static_cast<int>(Env("GRAPH_KERNELS", 50));
  const bool graph = mode == "graph";
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraphExec_t exec = nullptr;
  int per_batch = 100, graphs_per_batch = 0;
  if (graph) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < graph_kernels; ++i) Work<<<g_blocks, 256, 0, s>>>(iters, g_out);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&exec, g, 0));
    CK(cudaGraphDestroy(g));
    graphs_per_batch = 4;
    per_batch = graph_kernels * graphs_per_batch;
  }
  auto batch = [&]() {
    if (graph) {
      for (int i = 0; i < graphs_per_batch; ++i) CK(cudaGraphLaunch(exec, s));
    } else {
      for (int i = 0; i < per_batch; ++i) Work<<<g_blocks, 256, 0, s>>>(iters, g_out);
    }
  };
  const char* stop = getenv("STOP_FILE");
  cudaEvent_t ev[2];
  CK(cudaEventCreate(&ev[0]));
  CK(cudaEventCreate(&ev[1]));
  batch();
  CK(cudaEventRecord(ev[0], s));
  Touch(getenv("READY_FILE"));
  const double end = NowUs() + seconds * 1e6;
  double first = 0, last = 0;
  long batches = 0;
  for (int i = 1; NowUs() < end && !FileExists(stop); ++i) {
    batch();
    CK(cudaEventRecord(ev[i & 1], s));
    CK(cudaEventSynchronize(ev[(i - 1) & 1]));
    last = NowUs();
    if (i == 1) first = last;
    else ++batches;
  }
  CK(cudaStreamSynchronize(s));
  const double window_s = (last - first) / 1e6;
  fprintf(out,
          "{\"mode\":\"%s\",\"iters\":%d,\"kernel_us\":%.2f,\"kernels_per_batch\":%d,\"graph_kernels\":%d,"
          "\"kernels\":%ld,\"window_s\":%.3f,\"kernels_per_s\":%.1f,\"t_start\":%.6f,\"t_end\":%.6f}\n",
          mode.c_str(), iters, kernel_alone, per_batch, graph ? graph_kernels : 0, batches * per_batch, window_s,
          window_s > 0 ? batches * per_batch / window_s : 0.0, first / 1e6, last / 1e6);
}

}  // namespace

// `lcctx`: the LC loop beside a busy second context of this process.
void RunLcBesideOwnContext(FILE* out, double seconds) {
  using CtxCreate = CUresult (*)(CUcontext*, CUctxCreateParams*, unsigned int, CUdevice);
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  auto create = driver == nullptr ? nullptr : reinterpret_cast<CtxCreate>(dlsym(driver, "cuCtxCreate_v4"));
  if (create == nullptr) {
    fprintf(stderr, "lc_be: no cuCtxCreate_v4 in libcuda.so.1\n");
    exit(1);
  }
  const int be_iters = Calibrate(Env("BE_WORK_MS", 20) * 1000);
  std::atomic<bool> started{false}, stop{false};
  std::vector<double> ends;
  std::thread busy([&] {
    CUcontext ctx = nullptr;
    if (create(&ctx, nullptr, 0, 0) != CUDA_SUCCESS) {
      fprintf(stderr, "lc_be: cuCtxCreate_v4 failed\n");
      exit(1);
    }
    float* buf = nullptr;
    CK(cudaMalloc(&buf, sizeof(float) * g_blocks * 256));
    cudaEvent_t ev[2];
    CK(cudaEventCreate(&ev[0]));
    CK(cudaEventCreate(&ev[1]));
    Work<<<g_blocks, 256>>>(be_iters, buf);
    CK(cudaEventRecord(ev[0]));
    started = true;
    for (int i = 1; !stop; ++i) {
      Work<<<g_blocks, 256>>>(be_iters, buf);  // keep one queued behind the running one
      CK(cudaEventRecord(ev[i & 1]));
      CK(cudaEventSynchronize(ev[(i - 1) & 1]));
      ends.push_back(NowUs() / 1e6);
    }
    CK(cudaDeviceSynchronize());
  });
  while (!started) usleep(1000);
  RunLc(out, "lcctx", seconds, 0);
  stop = true;
  busy.join();
  if (FILE* be = fopen(getenv("BE_OUT") != nullptr ? getenv("BE_OUT") : "/dev/null", "w")) {
    fprintf(be, "{\"mode\":\"be\",\"iters\":%d,\"kernels\":%zu,\"ends\":[", be_iters, ends.size());
    for (size_t i = 0; i < ends.size(); ++i) fprintf(be, "%s%.6f", i ? "," : "", ends[i]);
    fprintf(be, "]}\n");
    fclose(be);
  }
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: lc_be lc|lchint|lce|lcctx|be|small|graph SECONDS OUT.json | lc_be holdercheck PTX OUT.json\n");
    return 2;
  }
  const std::string mode = argv[1];
  const double seconds = atof(argv[2]);
  if (mode != "lc" && mode != "lchint" && mode != "lce" && mode != "lcctx" && mode != "holdercheck" && mode != "be" &&
      mode != "small" && mode != "graph") {
    fprintf(stderr, "lc_be: unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  CK(cudaSetDeviceFlags(cudaDeviceScheduleSpin));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  g_blocks = sms * 8;
  CK(cudaMalloc(&g_out, sizeof(float) * g_blocks * 256));
  FILE* out = fopen(argv[3], "w");
  if (out == nullptr) return 1;
  if (mode == "lc") RunLc(out, "lc", seconds, 0);
  else if (mode == "lchint") RunLc(out, "lchint", seconds, Env("PREP_US", 400));
  else if (mode == "lce") RunLce(out, seconds);
  else if (mode == "lcctx") RunLcBesideOwnContext(out, seconds);
  else if (mode == "holdercheck") RunHolderCheck(out, argv[2]);
  else if (mode == "be") RunBe(out, seconds);
  else RunSmall(out, mode, seconds);
  fclose(out);
  return 0;
}
