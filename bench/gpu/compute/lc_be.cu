// lc_be.cu — the synthetic load of the compute benchmarks (run_compute.py).
//
//   lc_be lc SECONDS OUT.json   latency-critical: a ~50 µs kernel every 5 ms
//                               (200 req/s); each request's latency is launch to
//                               completion, seen by a spinning host thread.
//   lc_be be SECONDS OUT.json   best-effort: back-to-back ~20 ms kernels;
//                               reports kernels per second over its run.
// Env: LC_WORK_US (50), BE_WORK_MS (20), PERIOD_US (5000); LC_ITERS fixes the
// LC kernel's length to what a calibration alone found (calibrating beside a
// busy BE would measure the wait, not the kernel).
//
// The kernel shape is the facts file's (gpu-facts.md): SMs×8 blocks of 256
// threads of dependent FMAs, so one kernel fills the GPU and the GPU can
// only be shared by time.
#include <cuda_runtime.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
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

double TimeKernelUs(int iters) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a));
  Work<<<g_blocks, 256>>>(iters, g_out);
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return ms * 1000.0;
}

// Iterations for a kernel of `target_us` on an idle GPU.
int Calibrate(double target_us) {
  int iters = 1000;
  TimeKernelUs(iters);
  for (int r = 0; r < 6; ++r) iters = std::max(1, static_cast<int>(iters * target_us / TimeKernelUs(iters)));
  return iters;
}

double Env(const char* name, double fallback) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? atof(v) : fallback;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: lc_be lc|be SECONDS OUT.json\n");
    return 2;
  }
  const std::string mode = argv[1];
  const double seconds = atof(argv[2]);
  CK(cudaSetDeviceFlags(cudaDeviceScheduleSpin));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  g_blocks = sms * 8;
  CK(cudaMalloc(&g_out, sizeof(float) * g_blocks * 256));
  FILE* out = fopen(argv[3], "w");
  if (out == nullptr) return 1;
  if (mode == "lc") {
    const int iters = getenv("LC_ITERS") != nullptr ? atoi(getenv("LC_ITERS")) : Calibrate(Env("LC_WORK_US", 50));
    const double kernel_alone = TimeKernelUs(iters);
    const double period = Env("PERIOD_US", 5000);
    std::vector<double> lat;
    const double end = NowUs() + seconds * 1e6;
    double next = NowUs();
    while (NowUs() < end) {
      while (NowUs() < next) {
      }
      const double t0 = NowUs();
      Work<<<g_blocks, 256>>>(iters, g_out);
      CK(cudaStreamSynchronize(0));
      lat.push_back(NowUs() - t0);
      next += period;
      if (next < NowUs()) next = NowUs();
    }
    // The first 5% warm the caches and the scheduler; they are not requests.
    lat.erase(lat.begin(), lat.begin() + lat.size() / 20);
    fprintf(out, "{\"mode\":\"lc\",\"iters\":%d,\"kernel_us\":%.1f,\"n\":%zu,\"p50_us\":%.1f,\"p90_us\":%.1f,"
            "\"p99_us\":%.1f,\"max_us\":%.1f}\n",
            iters, kernel_alone, lat.size(), Percentile(lat, .5), Percentile(lat, .9), Percentile(lat, .99),
            Percentile(lat, 1.0));
  } else {
    const int iters = Calibrate(Env("BE_WORK_MS", 20) * 1000);
    const double start = NowUs(), end = start + seconds * 1e6;
    long done = 0;
    cudaEvent_t ev[2];
    CK(cudaEventCreate(&ev[0]));
    CK(cudaEventCreate(&ev[1]));
    Work<<<g_blocks, 256>>>(iters, g_out);
    CK(cudaEventRecord(ev[0]));
    for (int i = 1; NowUs() < end; ++i) {
      Work<<<g_blocks, 256>>>(iters, g_out);  // keep one queued behind the running one
      CK(cudaEventRecord(ev[i & 1]));
      CK(cudaEventSynchronize(ev[(i - 1) & 1]));
      ++done;
    }
    CK(cudaDeviceSynchronize());
    const double elapsed_s = (NowUs() - start) / 1e6;
    fprintf(out, "{\"mode\":\"be\",\"kernels\":%ld,\"seconds\":%.3f,\"kernels_per_s\":%.3f}\n", done, elapsed_s,
            done / elapsed_s);
  }
  fclose(out);
  return 0;
}
