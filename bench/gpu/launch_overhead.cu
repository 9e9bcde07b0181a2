// The time gpuslice's interposer adds to cuLaunchKernel and to a
// cuMemAlloc_v2 + cuMemFree_v2 pair, measured in one process, and what one
// cuEventRecord after each launch costs on the direct path (the paced
// launch's marker).
//
// The real driver and libgpuslice-cuda.so are both dlopen'ed, and the same calls
// are timed through each. Batches of the arms are interleaved round by round,
// and the order rotates, so that clock changes and drift hit every arm alike. A
// third arm repeats the direct path: its distance from the first is the noise
// floor for the difference.
//
// Run it inside a vGPU, so that gpuslice's path is the one a contained process
// takes (the library finds its vGPU in the environment when first called):
//   gpuslice run --memory 8GiB -- launch_overhead --gpuslice-lib /abs/libgpuslice-cuda.so
// The real driver is --real PATH, else $GPUSLICE_REAL_DRIVER (the file the
// library itself forwards to, so that both paths share one driver instance),
// else $REAL_LIBCUDA. Prints one JSON object on stdout; exits 1 on failure.

#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

// An empty kernel as PTX, compiled by the driver at load: no device pass of
// nvcc and no CUDA runtime, so the process makes driver calls only.
constexpr char kEmptyKernelPtx[] = R"(
.version 7.8
.target sm_90
.address_size 64
.visible .entry empty_kernel()
{
  ret;
}
)";

struct Options {
  std::string real;
  std::string gpuslice_lib = "build/lib/libgpuslice-cuda.so";
  // 500 launches stay well inside the launch queue, so the host never waits on
  // the GPU inside a timed batch; the stream drains between batches.
  int launch_batch = 500;
  int launch_batches = 200;
  int alloc_batch = 50;
  int alloc_batches = 100;
  size_t alloc_bytes = 2u << 20;
  int warmup_rounds = 10;
};

// The driver entry points the benchmark calls, from one library.
struct Api {
  std::string path;
  void* handle = nullptr;
  decltype(&cuInit) init = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&cuModuleLoadData) module_load_data = nullptr;
  decltype(&cuModuleGetFunction) module_get_function = nullptr;
  decltype(&cuStreamCreate) stream_create = nullptr;
  decltype(&cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&cuLaunchKernel) launch_kernel = nullptr;
  decltype(&cuMemAlloc_v2) mem_alloc = nullptr;
  decltype(&cuMemFree_v2) mem_free = nullptr;
  decltype(&cuEventCreate) event_create = nullptr;
  decltype(&cuEventRecord) event_record = nullptr;
};

template <typename Fn>
bool Resolve(const Api& api, const char* name, Fn* fn, std::string* error) {
  *fn = reinterpret_cast<Fn>(dlsym(api.handle, name));
  if (*fn == nullptr) *error = "dlsym(" + api.path + ", " + name + ") failed";
  return *fn != nullptr;
}

bool Open(const std::string& path, Api* api, std::string* error) {
  api->path = path;
  api->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api->handle == nullptr) {
    *error = "dlopen(" + path + "): " + dlerror();
    return false;
  }
  return Resolve(*api, "cuInit", &api->init, error) &&
         Resolve(*api, "cuDeviceGet", &api->device_get, error) &&
         Resolve(*api, "cuDevicePrimaryCtxRetain", &api->primary_ctx_retain, error) &&
         Resolve(*api, "cuCtxSetCurrent", &api->ctx_set_current, error) &&
         Resolve(*api, "cuCtxGetCurrent", &api->ctx_get_current, error) &&
         Resolve(*api, "cuModuleLoadData", &api->module_load_data, error) &&
         Resolve(*api, "cuModuleGetFunction", &api->module_get_function, error) &&
         Resolve(*api, "cuStreamCreate", &api->stream_create, error) &&
         Resolve(*api, "cuStreamSynchronize", &api->stream_synchronize, error) &&
         Resolve(*api, "cuLaunchKernel", &api->launch_kernel, error) &&
         Resolve(*api, "cuMemAlloc_v2", &api->mem_alloc, error) &&
         Resolve(*api, "cuMemFree_v2", &api->mem_free, error) &&
         Resolve(*api, "cuEventCreate", &api->event_create, error) &&
         Resolve(*api, "cuEventRecord", &api->event_record, error);
}

bool Ok(CUresult r, const char* what, std::string* error) {
  if (r != CUDA_SUCCESS) *error = std::string(what) + " returned " + std::to_string(r);
  return r == CUDA_SUCCESS;
}

std::string FileOf(const void* symbol) {
  Dl_info info;
  return dladdr(symbol, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "?";
}

struct Stats {
  double median, p10, p90;
};

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

Stats Summarize(const std::vector<double>& v) {
  return {Percentile(v, 0.5), Percentile(v, 0.1), Percentile(v, 0.9)};
}

// One timed batch through one API; returns nanoseconds per call.
using Batch = std::function<double(const Api&, int* failures)>;

struct Arm {
  const char* name;
  const Api* api;
  std::vector<double> ns_per_call;
  int failures = 0;
};

// Runs warmup + batches rounds; each round times one batch of every arm, in an
// order rotated by one each round.
std::vector<Arm> Interleave(const Api& direct, const Api& gpuslice, int warmup, int batches,
                            const Batch& batch) {
  std::vector<Arm> arms = {
      {"direct", &direct, {}}, {"gpuslice", &gpuslice, {}}, {"direct_again", &direct, {}}};
  for (int round = 0; round < warmup + batches; ++round) {
    for (size_t k = 0; k < arms.size(); ++k) {
      Arm& arm = arms[(k + round) % arms.size()];
      const double ns = batch(*arm.api, &arm.failures);
      if (round >= warmup) arm.ns_per_call.push_back(ns);
    }
  }
  return arms;
}

void PrintStats(const char* name, const Stats& s, int failures) {
  std::printf("\"%s\": {\"median_ns\": %.2f, \"p10_ns\": %.2f, \"p90_ns\": %.2f, \"failures\": %d}, ", name,
              s.median, s.p10, s.p90, failures);
}

// Prints one arm-set as a JSON object: each arm, the added time of gpuslice
// (difference of medians, and median of per-round differences) and the noise.
void PrintSection(const char* name, const std::vector<Arm>& arms, int per_batch) {
  const Stats d = Summarize(arms[0].ns_per_call), g = Summarize(arms[1].ns_per_call),
              d2 = Summarize(arms[2].ns_per_call);
  std::vector<double> paired;
  for (size_t i = 0; i < arms[0].ns_per_call.size(); ++i) {
    paired.push_back(arms[1].ns_per_call[i] - arms[0].ns_per_call[i]);
  }
  std::printf("\"%s\": {\"calls_per_batch\": %d, \"batches\": %zu, ", name, per_batch,
              arms[0].ns_per_call.size());
  PrintStats("direct", d, arms[0].failures);
  PrintStats("gpuslice", g, arms[1].failures);
  PrintStats("direct_again", d2, arms[2].failures);
  std::printf("\"added_ns\": %.2f, \"paired_added_ns\": %.2f, \"noise_ns\": %.2f}", g.median - d.median,
              Percentile(paired, 0.5), d2.median - d.median);
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

// The names of the GPUSLICE_* variables `gpuslice run` passed in, as a JSON list body.
std::string GpusliceEnvNames() {
  std::string out;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "GPUSLICE_", 9) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    out += (out.empty() ? "" : ", ") + JsonString(std::string(*e, eq != nullptr ? eq - *e : std::strlen(*e)));
  }
  return out;
}

bool ParseArgs(int argc, char** argv, Options* o, std::string* error) {
  if (const char* p = std::getenv("GPUSLICE_REAL_DRIVER"); p != nullptr && *p != '\0') {
    o->real = p;
  } else if (const char* q = std::getenv("REAL_LIBCUDA"); q != nullptr && *q != '\0') {
    o->real = q;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      *error = "missing value for " + flag;
      return false;
    }
    const char* value = argv[++i];
    if (flag == "--real") {
      o->real = value;
    } else if (flag == "--gpuslice-lib") {
      o->gpuslice_lib = value;
    } else if (flag == "--launch-batch") {
      o->launch_batch = std::atoi(value);
    } else if (flag == "--launch-batches") {
      o->launch_batches = std::atoi(value);
    } else if (flag == "--alloc-batch") {
      o->alloc_batch = std::atoi(value);
    } else if (flag == "--alloc-batches") {
      o->alloc_batches = std::atoi(value);
    } else if (flag == "--warmup-rounds") {
      o->warmup_rounds = std::atoi(value);
    } else {
      *error = "unknown flag " + flag;
      return false;
    }
  }
  if (o->real.empty()) *error = "no real driver: pass --real or set GPUSLICE_REAL_DRIVER/REAL_LIBCUDA";
  if (o->launch_batch < 1 || o->launch_batches < 1 || o->alloc_batch < 1 || o->alloc_batches < 1) {
    *error = "batch counts must be positive";
  }
  return error->empty();
}

int Run(const Options& o, std::string* error) {
  // The real driver is opened first, so that the library's own dlopen of the
  // same file returns this instance.
  Api direct, gpuslice;
  if (!Open(o.real, &direct, error) || !Open(o.gpuslice_lib, &gpuslice, error)) return 1;

  // Setup goes through gpuslice, as a contained application's would.
  CUdevice dev;
  CUcontext ctx = nullptr, seen = nullptr;
  CUmodule module;
  CUfunction kernel;
  CUstream stream;
  if (!Ok(gpuslice.init(0), "cuInit", error) || !Ok(gpuslice.device_get(&dev, 0), "cuDeviceGet", error) ||
      !Ok(gpuslice.primary_ctx_retain(&ctx, dev), "cuDevicePrimaryCtxRetain", error) ||
      !Ok(gpuslice.ctx_set_current(ctx), "cuCtxSetCurrent", error) ||
      !Ok(gpuslice.module_load_data(&module, kEmptyKernelPtx), "cuModuleLoadData", error) ||
      !Ok(gpuslice.module_get_function(&kernel, module, "empty_kernel"), "cuModuleGetFunction", error) ||
      !Ok(gpuslice.stream_create(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", error) ||
      !Ok(direct.ctx_get_current(&seen), "cuCtxGetCurrent (direct)", error)) {
    return 1;
  }
  // Two driver instances would mean two contexts: the comparison would be void.
  if (seen != ctx) {
    *error = "the direct path does not see gpuslice's context: two driver instances in one process";
    return 1;
  }
  if (reinterpret_cast<void*>(direct.launch_kernel) == reinterpret_cast<void*>(gpuslice.launch_kernel)) {
    *error = "both paths resolve cuLaunchKernel to " + FileOf(reinterpret_cast<void*>(direct.launch_kernel));
    return 1;
  }

  using Clock = std::chrono::steady_clock;
  const auto launches =
      Interleave(direct, gpuslice, o.warmup_rounds, o.launch_batches, [&](const Api& api, int* failures) {
        const auto t0 = Clock::now();
        for (int i = 0; i < o.launch_batch; ++i) {
          if (api.launch_kernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr) != CUDA_SUCCESS) {
            ++*failures;
          }
        }
        const auto t1 = Clock::now();
        if (api.stream_synchronize(stream) != CUDA_SUCCESS) ++*failures;
        return std::chrono::duration<double, std::nano>(t1 - t0).count() / o.launch_batch;
      });
  // What a paced launch's marker costs by itself (pacer.h: one cuEventRecord
  // after each launch): direct launches, and direct launches each followed by
  // a record of one event, in the arms' places of direct and gpuslice.
  CUevent marker = nullptr;
  if (!Ok(direct.event_create(&marker, CU_EVENT_DISABLE_TIMING), "cuEventCreate", error)) return 1;
  const auto records =
      Interleave(direct, gpuslice, o.warmup_rounds, o.launch_batches, [&](const Api& api, int* failures) {
        const bool record = &api == &gpuslice;
        const auto t0 = Clock::now();
        for (int i = 0; i < o.launch_batch; ++i) {
          if (direct.launch_kernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr) != CUDA_SUCCESS) {
            ++*failures;
          }
          if (record && direct.event_record(marker, stream) != CUDA_SUCCESS) ++*failures;
        }
        const auto t1 = Clock::now();
        if (direct.stream_synchronize(stream) != CUDA_SUCCESS) ++*failures;
        return std::chrono::duration<double, std::nano>(t1 - t0).count() / o.launch_batch;
      });
  const auto allocs =
      Interleave(direct, gpuslice, o.warmup_rounds, o.alloc_batches, [&](const Api& api, int* failures) {
        const auto t0 = Clock::now();
        for (int i = 0; i < o.alloc_batch; ++i) {
          CUdeviceptr p;
          if (api.mem_alloc(&p, o.alloc_bytes) != CUDA_SUCCESS) {
            ++*failures;
          } else if (api.mem_free(p) != CUDA_SUCCESS) {
            ++*failures;
          }
        }
        const auto t1 = Clock::now();
        return std::chrono::duration<double, std::nano>(t1 - t0).count() / o.alloc_batch;
      });

  const char* vgpu = std::getenv("GPUSLICE_VGPU_DIR");
  std::printf("{\"real_driver\": %s, \"gpuslice_lib\": %s, \"gpuslice_launch_symbol_file\": %s, ",
              JsonString(o.real).c_str(), JsonString(o.gpuslice_lib).c_str(),
              JsonString(FileOf(reinterpret_cast<void*>(gpuslice.launch_kernel))).c_str());
  std::printf("\"vgpu_dir\": %s, \"gpuslice_env\": [%s], \"same_driver_instance\": true, ",
              vgpu != nullptr ? JsonString(vgpu).c_str() : "null", GpusliceEnvNames().c_str());
  PrintSection("launch", launches, o.launch_batch);
  std::printf(", ");
  PrintSection("launch_then_event_record_direct", records, o.launch_batch);
  std::printf(", \"alloc_bytes\": %zu, ", o.alloc_bytes);
  PrintSection("alloc_free", allocs, o.alloc_batch);
  std::printf("}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  std::string error;
  const int rc = ParseArgs(argc, argv, &options, &error) ? Run(options, &error) : 1;
  if (rc != 0) std::printf("{\"error\": %s}\n", JsonString(error).c_str());
  return rc;
}
