// lc_latency.h — the latency histogram of a vGPU's LC (latency-critical)
// requests, kept in the vGPU's ledger (vgpu_layout.h): recording it, and
// reading it back as counts and quantiles.
//
// Writers: the interposer calls RecordLcLatency when an LC request span ends,
// on whichever application thread ended it, in any process of the vGPU. It is
// lock-free (three atomic adds), and never allocates, makes a syscall or
// throws, so it is safe on the library's hot path (built -fno-exceptions).
//
// Readers: the daemon and the CLI take snapshots (TakeLcLatencySnapshot),
// from any thread, without a lock; a snapshot races with writers only by the
// requests still being recorded, never tearing a value. Everything else here
// is arithmetic on snapshots. Nothing here allocates or blocks.
//
// Buckets are kLcLatencyBucketBoundsNs (vgpu_layout.h); the ledger keeps a
// count per bucket (not cumulative: one add per request), and a snapshot's
// `count` is the sum of its buckets, so a snapshot is always a valid
// Prometheus histogram (the +Inf bucket equals _count). Quantiles are
// estimated as Prometheus's histogram_quantile() does, so `gpuslice top` and
// a Grafana panel over the same requests agree.
#ifndef GPUSLICE_CORE_LC_LATENCY_H_
#define GPUSLICE_CORE_LC_LATENCY_H_

#include <cstdint>
#include <optional>

#include "core/vgpu_layout.h"

namespace gpuslice::core {

// The bucket a latency falls in: the first whose bound is >= latency_ns (a
// bound is inclusive, like Prometheus's `le`), else the last (+Inf).
uint32_t LcLatencyBucketIndex(uint64_t latency_ns);

// The upper bound of bucket `i` in seconds; +infinity for the last bucket.
double LcLatencyBucketBoundSeconds(uint32_t i);

// Counts one LC request of `latency_ns` (from submission to completion) in
// the vGPU's ledger. `ledger` may be null (the process is in no vGPU): then
// nothing is counted.
void RecordLcLatency(Ledger* ledger, uint64_t latency_ns);

struct LcLatencySnapshot {
  uint64_t count = 0;                        // requests: the sum of `buckets`
  uint64_t sum_ns = 0;                       // their total latency
  uint64_t buckets[kLcLatencyBuckets] = {};  // per bucket, not cumulative
};

// The ledger's histogram now.
LcLatencySnapshot TakeLcLatencySnapshot(const Ledger& ledger);

// The requests recorded between two snapshots of one ledger (`later` minus
// `earlier`). When some value went down, the ledger was made anew under the
// same name in between, and `later` is everything since: it is returned.
LcLatencySnapshot LcLatencyDelta(const LcLatencySnapshot& later, const LcLatencySnapshot& earlier);

// The q-quantile (0 <= q <= 1) of the snapshot's requests in seconds,
// interpolated linearly within its bucket as histogram_quantile() does: a
// quantile in the +Inf bucket is reported as the last finite bound (1 s).
// nullopt when the snapshot holds no request or q is out of range.
std::optional<double> LcLatencyQuantileSeconds(const LcLatencySnapshot& snapshot, double q);

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_LC_LATENCY_H_
