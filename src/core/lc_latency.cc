#include "core/lc_latency.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include "core/shared_word.h"

namespace gpuslice::core {
namespace {

constexpr bool StrictlyIncreasing() {
  for (size_t i = 1; i < std::size(kLcLatencyBucketBoundsNs); ++i) {
    if (kLcLatencyBucketBoundsNs[i] <= kLcLatencyBucketBoundsNs[i - 1]) return false;
  }
  return kLcLatencyBucketBoundsNs[0] > 0;
}
static_assert(StrictlyIncreasing(), "LC latency bucket bounds must be positive and strictly increasing");

}  // namespace

uint32_t LcLatencyBucketIndex(uint64_t latency_ns) {
  const uint64_t* const begin = std::begin(kLcLatencyBucketBoundsNs);
  return static_cast<uint32_t>(std::lower_bound(begin, std::end(kLcLatencyBucketBoundsNs), latency_ns) - begin);
}

double LcLatencyBucketBoundSeconds(uint32_t i) {
  if (i + 1 >= kLcLatencyBuckets) return std::numeric_limits<double>::infinity();
  return static_cast<double>(kLcLatencyBucketBoundsNs[i]) / 1e9;
}

void RecordLcLatency(Ledger* ledger, uint64_t latency_ns) {
  if (ledger == nullptr) return;
  // Bucket and sum first, the count last with release: a reader that sees a
  // count (acquire) sees at least that many requests in the buckets, so a
  // snapshot is never behind the count it began from.
  FetchAddRelaxed(ledger->lc_latency_buckets[LcLatencyBucketIndex(latency_ns)], 1);
  FetchAddRelaxed(ledger->lc_latency_sum_ns, latency_ns);
  FetchAddRelease(ledger->lc_latency_count, 1);
}

LcLatencySnapshot TakeLcLatencySnapshot(const Ledger& ledger) {
  LcLatencySnapshot s;
  // Most vGPUs are best-effort and never record: one load tells.
  if (LoadAcquire(ledger.lc_latency_count) == 0) return s;
  for (uint32_t i = 0; i < kLcLatencyBuckets; ++i) {
    s.buckets[i] = LoadRelaxed(ledger.lc_latency_buckets[i]);
    s.count += s.buckets[i];
  }
  // The count is the buckets' sum rather than the ledger's count, which a
  // request being recorded may not have reached yet: a snapshot must be a
  // histogram whose +Inf bucket equals its count.
  s.sum_ns = LoadRelaxed(ledger.lc_latency_sum_ns);
  return s;
}

LcLatencySnapshot LcLatencyDelta(const LcLatencySnapshot& later, const LcLatencySnapshot& earlier) {
  if (later.sum_ns < earlier.sum_ns) return later;
  for (uint32_t i = 0; i < kLcLatencyBuckets; ++i) {
    if (later.buckets[i] < earlier.buckets[i]) return later;
  }
  LcLatencySnapshot d;
  for (uint32_t i = 0; i < kLcLatencyBuckets; ++i) {
    d.buckets[i] = later.buckets[i] - earlier.buckets[i];
    d.count += d.buckets[i];
  }
  d.sum_ns = later.sum_ns - earlier.sum_ns;
  return d;
}

std::optional<double> LcLatencyQuantileSeconds(const LcLatencySnapshot& snapshot, double q) {
  if (snapshot.count == 0 || !(q >= 0.0 && q <= 1.0)) return std::nullopt;
  // As Prometheus's bucketQuantile: the rank-th request lies in the first
  // bucket whose cumulative count reaches the rank; assume the requests are
  // spread evenly across that bucket. Empty buckets are skipped, so the
  // division is never by zero (q = 0 gives the first request's bucket start).
  const double rank = q * static_cast<double>(snapshot.count);
  uint64_t before = 0;  // requests in the buckets below bucket i
  for (uint32_t i = 0; i < kLcLatencyBuckets; ++i) {
    const uint64_t in_bucket = snapshot.buckets[i];
    if (in_bucket == 0 || static_cast<double>(before + in_bucket) < rank) {
      before += in_bucket;
      continue;
    }
    // No upper bound to interpolate towards: report the last finite one.
    if (i + 1 == kLcLatencyBuckets) return LcLatencyBucketBoundSeconds(i - 1);
    const double lower = i == 0 ? 0.0 : LcLatencyBucketBoundSeconds(i - 1);
    const double upper = LcLatencyBucketBoundSeconds(i);
    return lower + (upper - lower) * ((rank - static_cast<double>(before)) / static_cast<double>(in_bucket));
  }
  // Unreachable: the buckets add up to count >= rank. Floating-point rounding
  // of q * count cannot exceed count, since q <= 1.
  return LcLatencyBucketBoundSeconds(kLcLatencyBuckets - 2);
}

}  // namespace gpuslice::core
