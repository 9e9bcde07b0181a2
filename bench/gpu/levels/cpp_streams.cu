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
//
// And the SLO reaction (docs/task-api.md, section 5), on level streams:
//
//   slo_on, slo_off  bursts of 8 LC tasks (0.5 ms apart, every 50 ms, a
//                    2 ms SLO, 132 blocks spinning 100 us) beside BE tasks
//                    of one kernel whose 1056 blocks spin 4 ms: a block
//                    already running is not preempted, so an LC kernel
//                    waits for the running BE wave; with the reaction, no
//                    BE task starts while the pressed LC level has work
//                    queued or running. Misses and quantiles are the
//                    scheduler's metrics().
//
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

void RunSloMode(const std::string& mode, double seconds) {
  gpuslice::SchedulerOptions options;
  options.workers = 4;
  options.cuda_streams = true;
  options.slo_reaction = mode == "slo_on";
  gpuslice::Scheduler sched(options);
  const gpuslice::TaskClass lc = sched.latency_critical("high", std::chrono::milliseconds(2));
  const gpuslice::TaskClass be = sched.best_effort("low");
  auto on_level_stream = [](int blocks, unsigned long long ns) {
    cudaSetDevice(0);
    Spin<<<blocks, 256, 0, static_cast<cudaStream_t>(gpuslice::current_task_stream())>>>(ns);
  };
  std::atomic<bool> stop{false};
  std::atomic<long> be_done{0};
  std::thread feeder([&] {
    std::deque<std::future<void>> in_flight;
    while (!stop.load()) {
      while (in_flight.size() < 3) in_flight.push_back(sched.submit(be, on_level_stream, 132 * 8, 4'000'000ull));
      in_flight.front().get();
      in_flight.pop_front();
      ++be_done;
    }
    for (auto& f : in_flight) f.get();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto metrics_of = [&sched] {
    for (const gpuslice::LevelMetrics& m : sched.metrics()) {
      if (m.level == "high") return m;
    }
    return gpuslice::LevelMetrics{};
  };
  const gpuslice::LevelMetrics before = metrics_of();
  const long be_before = be_done.load();
  const auto start = Clock::now();
  auto next = start;
  std::vector<std::future<void>> lc_futures;
  long pressured_bursts = 0;
  while (Clock::now() - start < std::chrono::duration<double>(seconds)) {
    std::this_thread::sleep_until(next);
    next += std::chrono::milliseconds(50);
    pressured_bursts += metrics_of().slo_pressure ? 1 : 0;
    for (int k = 0; k < 8; ++k) {
      lc_futures.push_back(sched.submit(lc, on_level_stream, 132, 100'000ull));
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  }
  for (auto& f : lc_futures) f.get();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const long be_tasks = be_done.load() - be_before;
  const gpuslice::LevelMetrics after = metrics_of();
  stop = true;
  feeder.join();
  std::printf(
      "{\"mode\": \"%s\", \"lc_tasks\": %llu, \"slo_misses\": %llu, \"lc_p50_us\": %.1f, \"lc_p99_us\": %.1f, "
      "\"bursts_under_pressure\": %ld, \"bursts\": %zu, \"be_tasks_per_s\": %.2f}\n",
      mode.c_str(), static_cast<unsigned long long>(after.count - before.count),
      static_cast<unsigned long long>(after.slo_misses - before.slo_misses), after.p50.count() / 1e3,
      after.p99.count() / 1e3, pressured_bursts, lc_futures.size() / 8, static_cast<double>(be_tasks) / elapsed);
  std::fflush(stdout);
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
  for (const std::string& mode : modes) {
    if (mode.rfind("slo_", 0) == 0) {
      RunSloMode(mode, seconds);
    } else {
      RunMode(mode, seconds);
    }
  }
  return 0;
}
