#include "core/lc_latency.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <iterator>
#include <latch>
#include <memory>
#include <thread>
#include <vector>

namespace gpuslice::core {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;

std::unique_ptr<Ledger> NewLedger() { return std::make_unique<Ledger>(); }  // zeroed

TEST(LcLatencyTest, BucketsAreTheDocumentedLogSpacedBounds) {
  const uint64_t expected[] = {25 * kUs,  50 * kUs, 100 * kUs,  150 * kUs, 200 * kUs, 300 * kUs, 500 * kUs,
                               750 * kUs, 1 * kMs,  1500 * kUs, 2 * kMs,   3 * kMs,   5 * kMs,   7500 * kUs,
                               10 * kMs,  20 * kMs, 50 * kMs,   100 * kMs, 250 * kMs, 1000 * kMs};
  ASSERT_EQ(std::size(expected) + 1, kLcLatencyBuckets);
  for (uint32_t i = 0; i + 1 < kLcLatencyBuckets; ++i) {
    EXPECT_EQ(kLcLatencyBucketBoundsNs[i], expected[i]) << i;
    EXPECT_DOUBLE_EQ(LcLatencyBucketBoundSeconds(i), static_cast<double>(expected[i]) / 1e9) << i;
  }
  EXPECT_TRUE(std::isinf(LcLatencyBucketBoundSeconds(kLcLatencyBuckets - 1)));
}

TEST(LcLatencyTest, ABoundBelongsToItsOwnBucketLikePrometheusLe) {
  EXPECT_EQ(LcLatencyBucketIndex(0), 0u);
  EXPECT_EQ(LcLatencyBucketIndex(25 * kUs), 0u);
  EXPECT_EQ(LcLatencyBucketIndex(25 * kUs + 1), 1u);
  EXPECT_EQ(LcLatencyBucketIndex(50 * kUs), 1u);
  EXPECT_EQ(LcLatencyBucketIndex(313 * kUs), 6u);  // (300, 500] µs
  EXPECT_EQ(LcLatencyBucketIndex(1 * kMs), 8u);
  EXPECT_EQ(LcLatencyBucketIndex(1000 * kMs), kLcLatencyBuckets - 2);
  EXPECT_EQ(LcLatencyBucketIndex(1000 * kMs + 1), kLcLatencyBuckets - 1);  // +Inf
  EXPECT_EQ(LcLatencyBucketIndex(UINT64_MAX), kLcLatencyBuckets - 1);
  // Every bound, and one past it.
  for (uint32_t i = 0; i + 1 < kLcLatencyBuckets; ++i) {
    EXPECT_EQ(LcLatencyBucketIndex(kLcLatencyBucketBoundsNs[i]), i);
    EXPECT_EQ(LcLatencyBucketIndex(kLcLatencyBucketBoundsNs[i] + 1), i + 1);
  }
}

TEST(LcLatencyTest, RecordsCountSumAndOneBucketPerRequest) {
  auto ledger = NewLedger();
  EXPECT_EQ(TakeLcLatencySnapshot(*ledger).count, 0u);
  RecordLcLatency(ledger.get(), 20 * kUs);
  RecordLcLatency(ledger.get(), 313 * kUs);
  RecordLcLatency(ledger.get(), 313 * kUs);
  RecordLcLatency(ledger.get(), 2 * 1000 * kMs);  // 2 s: +Inf
  EXPECT_EQ(ledger->lc_latency_count, 4u);
  EXPECT_EQ(ledger->lc_latency_sum_ns, 20 * kUs + 626 * kUs + 2000 * kMs);
  const LcLatencySnapshot s = TakeLcLatencySnapshot(*ledger);
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.sum_ns, ledger->lc_latency_sum_ns);
  for (uint32_t i = 0; i < kLcLatencyBuckets; ++i) {
    const uint64_t want = i == 0 ? 1 : i == 6 ? 2 : i == kLcLatencyBuckets - 1 ? 1 : 0;
    EXPECT_EQ(s.buckets[i], want) << "bucket " << i;
    EXPECT_EQ(ledger->lc_latency_buckets[i], want) << "bucket " << i;
  }
  RecordLcLatency(nullptr, 1);  // no vGPU: nothing, and no crash
}

TEST(LcLatencyTest, ThreadsRecordingTogetherLoseNothingAndReadersSeeValidHistograms) {
  auto ledger = NewLedger();
  constexpr int kThreads = 8;
  constexpr uint64_t kPerThread = 20000;
  std::latch start(kThreads + 1);
  std::atomic<bool> writers_done{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      start.arrive_and_wait();
      // Each thread spreads its requests over every bucket, +Inf included.
      for (uint64_t i = 0; i < kPerThread; ++i) {
        RecordLcLatency(ledger.get(), (static_cast<uint64_t>(t) * kPerThread + i) % 1200 * kMs);
      }
    });
  }
  // A reader racing the writers: every snapshot is a histogram (count is
  // the buckets' sum by construction), and counts never go backwards. It
  // reads at least once: on a busy machine it may first run after the
  // writers are done.
  uint64_t snapshots = 0;
  bool backwards = false;
  std::thread reader([&] {
    start.arrive_and_wait();
    LcLatencySnapshot previous;
    do {
      const LcLatencySnapshot s = TakeLcLatencySnapshot(*ledger);
      for (uint32_t i = 0; i < kLcLatencyBuckets; ++i) backwards |= s.buckets[i] < previous.buckets[i];
      backwards |= s.sum_ns < previous.sum_ns;
      previous = s;
      ++snapshots;
    } while (!writers_done.load());
  });
  for (auto& w : writers) w.join();
  writers_done = true;
  reader.join();
  EXPECT_FALSE(backwards);
  EXPECT_GT(snapshots, 0u);

  const LcLatencySnapshot s = TakeLcLatencySnapshot(*ledger);
  EXPECT_EQ(s.count, kThreads * kPerThread);
  EXPECT_EQ(ledger->lc_latency_count, kThreads * kPerThread);
  uint64_t want_sum = 0;
  uint64_t want_buckets[kLcLatencyBuckets] = {};
  for (uint64_t n = 0; n < kThreads * kPerThread; ++n) {
    want_sum += n % 1200 * kMs;
    ++want_buckets[LcLatencyBucketIndex(n % 1200 * kMs)];
  }
  EXPECT_EQ(s.sum_ns, want_sum);
  for (uint32_t i = 0; i < kLcLatencyBuckets; ++i) EXPECT_EQ(s.buckets[i], want_buckets[i]) << "bucket " << i;
}

TEST(LcLatencyTest, ProcessesOfTheVgpuShareTheHistogramThroughTheMapping) {
  void* p = mmap(nullptr, sizeof(Ledger), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* ledger = static_cast<Ledger*>(p);  // zero-filled
  RecordLcLatency(ledger, 100 * kUs);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (int i = 0; i < 1000; ++i) RecordLcLatency(ledger, 2 * kMs);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const LcLatencySnapshot s = TakeLcLatencySnapshot(*ledger);
  EXPECT_EQ(s.count, 1001u);
  EXPECT_EQ(s.buckets[LcLatencyBucketIndex(2 * kMs)], 1000u);
  EXPECT_EQ(s.sum_ns, 100 * kUs + 2000 * kMs);
  munmap(p, sizeof(Ledger));
}

TEST(LcLatencyTest, DeltaIsWhatWasRecordedBetweenSnapshots) {
  auto ledger = NewLedger();
  for (int i = 0; i < 100; ++i) RecordLcLatency(ledger.get(), 40 * kUs);
  const LcLatencySnapshot before = TakeLcLatencySnapshot(*ledger);
  for (int i = 0; i < 10; ++i) RecordLcLatency(ledger.get(), 4 * kMs);
  const LcLatencySnapshot after = TakeLcLatencySnapshot(*ledger);
  const LcLatencySnapshot d = LcLatencyDelta(after, before);
  EXPECT_EQ(d.count, 10u);
  EXPECT_EQ(d.sum_ns, 40 * kMs);
  EXPECT_EQ(d.buckets[LcLatencyBucketIndex(4 * kMs)], 10u);
  EXPECT_EQ(d.buckets[LcLatencyBucketIndex(40 * kUs)], 0u);
  EXPECT_EQ(LcLatencyDelta(after, after).count, 0u);
  // A ledger made anew under the same name: its counts are all new.
  auto fresh = NewLedger();
  RecordLcLatency(fresh.get(), 40 * kUs);
  const LcLatencySnapshot reset = LcLatencyDelta(TakeLcLatencySnapshot(*fresh), after);
  EXPECT_EQ(reset.count, 1u);
  EXPECT_EQ(reset.sum_ns, 40 * kUs);
}

TEST(LcLatencyTest, QuantilesInterpolateWithinTheBucketAsHistogramQuantileDoes) {
  LcLatencySnapshot s;
  EXPECT_FALSE(LcLatencyQuantileSeconds(s, 0.5).has_value());  // no requests
  // 100 requests: 50 in (0, 25] µs, 40 in (100, 150] µs, 10 in (1, 1.5] ms.
  s.buckets[0] = 50;
  s.buckets[3] = 40;
  s.buckets[9] = 10;
  s.count = 100;
  EXPECT_FALSE(LcLatencyQuantileSeconds(s, -0.1).has_value());
  EXPECT_FALSE(LcLatencyQuantileSeconds(s, 1.5).has_value());
  EXPECT_FALSE(LcLatencyQuantileSeconds(s, std::nan("")).has_value());
  // p50: rank 50 is the last of bucket 0, so its upper bound.
  EXPECT_NEAR(*LcLatencyQuantileSeconds(s, 0.5), 25e-6, 1e-12);
  // p25: rank 25, halfway through bucket 0 (0..25 µs).
  EXPECT_NEAR(*LcLatencyQuantileSeconds(s, 0.25), 12.5e-6, 1e-12);
  // p70: rank 70, 20 of the 40 in (100, 150] µs: 125 µs. Empty buckets 1-2 skipped.
  EXPECT_NEAR(*LcLatencyQuantileSeconds(s, 0.7), 125e-6, 1e-12);
  // p99: rank 99, 9 of the 10 in (1, 1.5] ms: 1.45 ms.
  EXPECT_NEAR(*LcLatencyQuantileSeconds(s, 0.99), 1.45e-3, 1e-12);
  EXPECT_NEAR(*LcLatencyQuantileSeconds(s, 1.0), 1.5e-3, 1e-12);
  // q = 0: the start of the first non-empty bucket.
  EXPECT_NEAR(*LcLatencyQuantileSeconds(s, 0.0), 0.0, 1e-12);
  s.buckets[0] = 0;
  s.count = 50;
  EXPECT_NEAR(*LcLatencyQuantileSeconds(s, 0.0), 100e-6, 1e-12);
}

TEST(LcLatencyTest, AQuantileInTheInfBucketIsTheLastFiniteBound) {
  LcLatencySnapshot s;
  s.buckets[0] = 1;
  s.buckets[kLcLatencyBuckets - 1] = 99;
  s.count = 100;
  EXPECT_DOUBLE_EQ(*LcLatencyQuantileSeconds(s, 0.99), 1.0);
  EXPECT_NEAR(*LcLatencyQuantileSeconds(s, 0.01), 25e-6, 1e-12);
}

TEST(LcLatencyTest, QuantilesOfRecordedRequestsFallInTheirBuckets) {
  auto ledger = NewLedger();
  // 990 fast requests at 80 µs and 10 slow ones at 6 ms: p50 in (50, 100] µs,
  // p99 at the top of the fast bucket, p99.9 among the slow.
  for (int i = 0; i < 990; ++i) RecordLcLatency(ledger.get(), 80 * kUs);
  for (int i = 0; i < 10; ++i) RecordLcLatency(ledger.get(), 6 * kMs);
  const LcLatencySnapshot s = TakeLcLatencySnapshot(*ledger);
  const double p50 = *LcLatencyQuantileSeconds(s, 0.5);
  EXPECT_GT(p50, 50e-6);
  EXPECT_LE(p50, 100e-6);
  EXPECT_NEAR(*LcLatencyQuantileSeconds(s, 0.99), 100e-6, 1e-12);
  const double p999 = *LcLatencyQuantileSeconds(s, 0.999);
  EXPECT_GT(p999, 5e-3);
  EXPECT_LE(p999, 7.5e-3);
}

}  // namespace
}  // namespace gpuslice::core
