#include "core/hold_trial.h"

#include <algorithm>

namespace gpuslice::core {

namespace {

// The median of v[0..n) (n > 0), reordering v.
template <typename T>
T MedianOf(T* v, uint32_t n) {
  std::nth_element(v, v + n / 2, v + n);
  const T upper = v[n / 2];
  if (n % 2 == 1) return upper;
  const T lower = *std::max_element(v, v + n / 2);
  return lower + (upper - lower) / 2;
}

}  // namespace

HoldTrial::HoldTrial(const Options& options) : options_(options) {
  options_.epoch_bursts = std::clamp<uint32_t>(options_.epoch_bursts, 1, kMaxEpochBursts);
  options_.pairs = std::clamp<uint32_t>(options_.pairs, 1, kMaxPairs);
}

void HoldTrial::Restart() {
  phase_ = Phase::kTrying;
  hold_on_ = true;
  ++generation_;
  epoch_ = 0;
  seen_ = 0;
  count_ = 0;
  pairs_done_ = 0;
}

bool HoldTrial::NoteRequest(uint32_t generation, uint64_t latency_ns) {
  if (generation != generation_) return false;  // begun under another arm
  if (phase_ != Phase::kTrying) {
    if (--verdict_left_ == 0) Restart();
    return false;
  }
  if (seen_++ < options_.settle_bursts_per_epoch) return false;
  epoch_samples_[count_++] = latency_ns;
  if (count_ < options_.epoch_bursts) return false;
  EndEpoch();
  return phase_ != Phase::kTrying;
}

void HoldTrial::EndEpoch() {
  const uint64_t p50 = MedianOf(epoch_samples_, count_);
  if (hold_on_) {
    held_p50_[pairs_done_] = p50;
  } else {
    unheld_p50_[pairs_done_++] = p50;
  }
  seen_ = 0;
  count_ = 0;
  ++epoch_;
  ++generation_;
  if (pairs_done_ == options_.pairs) {
    Decide();
    return;
  }
  hold_on_ = epoch_ % 2 == 0;
}

void HoldTrial::Decide() {
  double ratios[kMaxPairs] = {};
  for (uint32_t i = 0; i < pairs_done_; ++i) {
    ratios[i] = unheld_p50_[i] == 0 ? 1.0 : static_cast<double>(held_p50_[i]) / static_cast<double>(unheld_p50_[i]);
  }
  verdict_.ratio = MedianOf(ratios, pairs_done_);
  verdict_.held_p50_ns = MedianOf(held_p50_, pairs_done_);
  verdict_.unheld_p50_ns = MedianOf(unheld_p50_, pairs_done_);
  verdict_.pairs = pairs_done_;
  hold_on_ = verdict_.ratio <= 1.0 - options_.min_gain;
  phase_ = hold_on_ ? Phase::kHolding : Phase::kNotHolding;
  verdict_left_ = options_.verdict_bursts == 0 ? 1 : options_.verdict_bursts;
  ++generation_;
}

}  // namespace gpuslice::core
