// cpp_streams.cu — the C++ task API's CUDA streams per level on the GPU
// (issue 12): one process, a latency-critical task every 10 ms beside
// best-effort tasks that keep the GPU busy, in four ways:
//
//   alone          the LC tasks only
//   default        every task on the legacy default stream (what a program
//                  that never picks a stream does)
//   streams_equal  a stream per level, both at priority 0 (made here)
//   streams_prio   SchedulerOptions::cuda_streams: gpuslice's level streams
//                  from current_task_stream(), LC at a higher priority
//
// LC: 132 blocks of 256 threads that spin 50 us. BE: 4 kernels of 8448
// blocks (8 waves at 8 blocks per SM) that spin 100 us each. LC latency is
// from submit() to the future's value, as the scheduler's metrics count it.
// One JSON line per mode. Needs no gpuslice library: the streams are the
// task library's (libgpuslice_task.a), which finds libcuda with dlsym.
//
//   cpp_streams [SECONDS] [MODE...]
#include <cuda_runtime.h>
#include <gpuslice/scheduler.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace {

__global__ void Spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

using Clock = std::chrono::steady_clock;

struct Streams {  // streams_equal's, one per level, made on the main thread
  cudaStream_t lc = nullptr, be = nullptr;
};

// The stream a task of this mode launches on; whether the task itself must
// wait for it (streams_prio: the worker does).
cudaStream_t StreamOf(const std::string& mode, const Streams& own, bool lc, bool* self_sync) {
  cudaSetDevice(0);  // makes the primary context current on this worker
  *self_sync = true;
  if (mode == "streams_prio") {
    *self_sync = false;
    return static_cast<cudaStream_t>(gpuslice::current_task_stream());
  }
  if (mode == "streams_equal") return lc ? own.lc : own.be;
  return nullptr;  // the legacy default stream
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

void RunMode(const std::string& mode, double seconds) {
  gpuslice::SchedulerOptions options;
  options.workers = 4;
  options.cuda_streams = mode == "streams_prio";
  gpuslice::Scheduler sched(options);
  Streams own;
  cudaSetDevice(0);
  if (mode == "streams_equal") {
    cudaStreamCreateWithPriority(&own.lc, cudaStreamNonBlocking, 0);
    cudaStreamCreateWithPriority(&own.be, cudaStreamNonBlocking, 0);
  }
  const gpuslice::TaskClass lc = sched.latency_critical("high");
  const gpuslice::TaskClass be = sched.best_effort("low");
  auto lc_task = [&mode, &own] {
    bool self_sync = true;
    cudaStream_t s = StreamOf(mode, own, true, &self_sync);
    Spin<<<132, 256, 0, s>>>(50'000);
    if (self_sync) cudaStreamSynchronize(s);
  };
  auto be_task = [&mode, &own] {
    bool self_sync = true;
    cudaStream_t s = StreamOf(mode, own, false, &self_sync);
    for (int k = 0; k < 4; ++k) Spin<<<132 * 8 * 8, 256, 0, s>>>(100'000);
    if (self_sync) cudaStreamSynchronize(s);
  };

  std::atomic<bool> stop{false};
  std::atomic<long> be_done{0};
  std::thread feeder;
  if (mode != "alone") {
    feeder = std::thread([&] {
      std::deque<std::future<void>> in_flight;
      while (!stop.load()) {
        while (in_flight.size() < 2) in_flight.push_back(sched.submit(be, be_task));
        in_flight.front().get();
        in_flight.pop_front();
        ++be_done;
      }
      for (auto& f : in_flight) f.get();
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // warm-up: streams made, BE queue full
  const long be_before = be_done.load();
  std::vector<double> latency_us;
  const auto start = Clock::now();
  auto next = start;
  while (Clock::now() - start < std::chrono::duration<double>(seconds)) {
    std::this_thread::sleep_until(next);
    next += std::chrono::milliseconds(10);
    const auto t0 = Clock::now();
    sched.submit(lc, lc_task).get();
    latency_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const long be_tasks = be_done.load() - be_before;
  stop = true;
  if (feeder.joinable()) feeder.join();
  std::printf(
      "{\"mode\": \"%s\", \"requests\": %zu, \"lc_p50_us\": %.1f, \"lc_p99_us\": %.1f, \"lc_max_us\": %.1f, "
      "\"be_tasks_per_s\": %.2f}\n",
      mode.c_str(), latency_us.size(), Quantile(latency_us, 0.5), Quantile(latency_us, 0.99),
      Quantile(latency_us, 1.0), static_cast<double>(be_tasks) / elapsed);
  std::fflush(stdout);
  if (own.lc) cudaStreamDestroy(own.lc);
  if (own.be) cudaStreamDestroy(own.be);
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 5.0;
  std::vector<std::string> modes;
  for (int i = 2; i < argc; ++i) modes.push_back(argv[i]);
  if (modes.empty()) modes = {"alone", "default", "streams_equal", "streams_prio"};
  if (cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "cpp_streams: no CUDA device\n");
    return 2;
  }
  for (const std::string& mode : modes) RunMode(mode, seconds);
  return 0;
}
