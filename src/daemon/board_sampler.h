// board_sampler.h — which vGPU each GPU is running, sampled from its pacing
// board about a thousand times a second while paced vGPUs share it: the
// split that NVML's per-process samples cannot give (busy_split.h).
//
// Each process of a paced vGPU marks its row busy while it has work queued
// on the GPU (the library's completion markers). How the GPU shares itself
// between busy rows depends on the node's share mode (policy::ShareMode):
//   - by slices (the default), each vGPU's channel groups run its share of
//     a period, so the busy rows share the instant by their weights; but
//     while a capped vGPU holds its turn the others run the short backfill
//     slice (core::CappedTurnHeldByOther), so a busy capped holder runs;
//   - by turns (core/pacing_board.h), the turn's holder runs a long slice
//     and the others a short one, so the GPU runs the holder whenever it
//     has work queued and the others only in its gaps: the holder, if its
//     row is busy; else the busy rows equally (short slices each).
// No busy row: no paced vGPU runs (the GPU is idle, or runs work the boards
// do not pace: latency-critical or unpaced processes, processes of no vGPU).
// Each sample credits the time since the previous one (at most
// kMaxCreditNs) so. Only rows the node's roster lists count, under the
// roster's names; a forged row is ignored, as the pacer ignores it.
//
// How exact: a row's busy mark changes when its process sees its markers
// complete, every 250 µs for the holder and every millisecond for the
// others, so each hand-over between holder and gap is placed within that;
// the sampling adds a statistical error of about a millisecond per sample
// interval, which averages out over a second's thousand samples.
//
// Thread-safe: a thread of its own samples; Take is called from any thread
// (the housekeeping thread's sampler). Allocates; its thread makes syscalls
// (sleeps, the roster's stat).
#ifndef GPUSLICE_DAEMON_BOARD_SAMPLER_H_
#define GPUSLICE_DAEMON_BOARD_SAMPLER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/pacing_board.h"
#include "core/state_handout.h"
#include "policy/timeslice_policy.h"
#include "port/mapped_file.h"
#include "port/mutex.h"

namespace gpuslice::daemon {

class BoardSampler {
 public:
  struct Gpu {
    uint32_t index = 0;
    core::GpuUuid uuid{};
  };
  // A read-only mapping of a GPU's board, or an error while it has none yet.
  using MapBoard = std::function<StatusOr<port::MappedFile>(const core::GpuUuid&)>;

  // A vGPU the roster lists on a GPU: its name, its weight (--compute) and
  // its cap (--compute-cap, 0 for none).
  struct Listed {
    std::string name;
    uint32_t weight = 100;
    uint32_t cap_pct = 0;
  };

  // Starts sampling; `roster_path` is the node's roster (core/board_roster.h),
  // `shares` the node's share mode.
  BoardSampler(std::vector<Gpu> gpus, MapBoard map_board, std::string roster_path,
               policy::ShareMode shares = policy::ShareMode::kSlices);
  ~BoardSampler();  // stops and joins the thread
  BoardSampler(const BoardSampler&) = delete;
  BoardSampler& operator=(const BoardSampler&) = delete;

  // The seconds each vGPU (by name) was found running on GPU `index` since
  // the last Take for that GPU (up to the last kFlushSamples samples later).
  std::map<std::string, double> Take(uint32_t index) EXCLUDES(mu_);

  // One sample of one board at `now_ns`, crediting `seconds` to whoever the
  // board says runs (the rules above). `listed`: the roster's vGPUs on this
  // GPU, by id.
  static void Credit(const core::Board& board, const std::map<uint64_t, Listed>& listed, policy::ShareMode shares,
                     uint64_t now_ns, double seconds, std::map<std::string, double>* out);

  // Longest gap one sample credits: a sample after the thread slept (idle
  // boards are looked at every kIdlePeriodNs) or was kept off a CPU does not
  // credit the state it finds with all the time since the last.
  static constexpr uint64_t kMaxCreditNs = 5'000'000;
  static constexpr uint64_t kActivePeriodNs = 1'000'000;  // while a turn is held
  static constexpr uint64_t kIdlePeriodNs = 50'000'000;   // otherwise
  // Samples of an active board between hand-overs to Take (about 0.1 s).
  static constexpr int kFlushSamples = 100;

 private:
  struct Watched {
    Gpu gpu;
    port::MappedFile board;  // empty until the GPU has one
    uint64_t last_ns = 0;    // the previous sample
    std::map<uint64_t, Listed> listed;
    std::map<std::string, double> pending;  // credited since the last hand-over
    int pending_samples = 0;
  };
  void Loop();
  // Rereads the roster if it changed; maps boards that appeared.
  void Refresh(uint64_t now_ns);
  // Samples every board; true while any has a live turn.
  bool SampleAll(uint64_t now_ns);

  const MapBoard map_board_;
  const std::string roster_path_;
  const policy::ShareMode shares_;
  std::vector<Watched> watched_;     // the thread's
  uint64_t refreshed_ns_ = 0;        // the thread's
  struct timespec roster_mtime_ {};  // the thread's

  port::Mutex mu_;
  port::CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::map<uint32_t, std::map<std::string, double>> credited_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_BOARD_SAMPLER_H_
