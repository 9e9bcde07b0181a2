// registry.h — the daemon's Prometheus metrics: counters, gauges and
// histograms in labelled families, rendered in the text exposition format
// 0.0.4 (text_format.h holds the grammar and escaping).
//
// Written by hand because Debian has no prometheus-cpp; tested against a real
// Prometheus (tests/metrics/prometheus_scrape_test.cc). Metric names are in
// docs/metrics.md.
//
// Threads: everything here is thread-safe. Series values are updated from any
// daemon thread (Counter/Gauge are lock-free atomics; Histogram takes a
// per-series mutex). Render() is called by the HTTP server's thread: it runs
// the collectors, then writes every family, under the registry's mutex, so
// two scrapes never interleave. Collectors run on the scraping thread and
// must not call Render() or Add*() (they would deadlock).
//
// Collect on scrape: much of the daemon's state lives in mapped files (the
// vGPU ledgers), so rather than mirroring it continuously, a collector reads
// it right before rendering and sets gauges, or mirrors counters and
// histograms with Set(). A collector that reports vGPUs which may have gone
// calls Family::Clear() first, so deleted vGPUs' series disappear.
//
// Allocation: adding a family or a new label combination allocates; updating
// an existing series does not. Render() allocates its output.
#ifndef GPUSLICE_METRICS_REGISTRY_H_
#define GPUSLICE_METRICS_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "port/mutex.h"

namespace gpuslice::metrics {

// One series' label values, in the order of its family's label names. Any
// string is a valid value (it is escaped when rendered).
using LabelValues = std::vector<std::string>;

// A cumulative count. Increment() for events counted here; Set() to mirror
// a count kept elsewhere (a ledger's lifetime counters).
class Counter {
 public:
  void Increment(double delta = 1.0);  // a negative delta is ignored
  void Set(double value);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down.
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Observations counted into fixed buckets (upper bounds, strictly
// increasing, +Inf implied), with their sum.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  // Mirrors a histogram kept elsewhere. `bucket_counts` are per bucket, not
  // cumulative, one per upper bound plus the last for +Inf; a wrong size is
  // refused (returns false) and leaves the series unchanged.
  bool Set(const std::vector<uint64_t>& bucket_counts, double sum);

  struct Snapshot {
    std::vector<double> upper_bounds;  // without +Inf
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf (== count)
    double sum = 0;
  };
  Snapshot Take() const;

 private:
  const std::vector<double> upper_bounds_;
  mutable port::Mutex mu_;
  std::vector<uint64_t> counts_ GUARDED_BY(mu_);  // per bucket, size bounds+1
  double sum_ GUARDED_BY(mu_) = 0;
};

// All series of one metric name. Series are created on first use.
template <typename T>
class Family {
 public:
  // The series for these label values, created on first use. The reference
  // stays valid until Remove() or Clear() drops that series. The number of
  // values must equal the number of label names: that is decided by the
  // daemon's code, not its input, so a mismatch aborts with a message.
  T& WithLabels(const LabelValues& values);
  void Remove(const LabelValues& values);
  void Clear();

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Calls `fn` for each series in label order, under the family's lock.
  void ForEach(const std::function<void(const LabelValues&, const T&)>& fn) const;

  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> upper_bounds = {});

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> upper_bounds_;  // histograms only
  mutable port::Mutex mu_;
  std::map<LabelValues, std::unique_ptr<T>> series_ GUARDED_BY(mu_);
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Each returns the new family, or an error naming a bad metric or label
  // name (Prometheus grammar), a duplicate, a counter not ending in _total,
  // or histogram buckets that are not finite and strictly increasing. The
  // family lives as long as the registry.
  StatusOr<Family<Counter>*> AddCounter(const std::string& name, const std::string& help,
                                        std::vector<std::string> label_names = {});
  StatusOr<Family<Gauge>*> AddGauge(const std::string& name, const std::string& help,
                                    std::vector<std::string> label_names = {});
  StatusOr<Family<Histogram>*> AddHistogram(const std::string& name, const std::string& help,
                                            std::vector<std::string> label_names, std::vector<double> upper_bounds);

  // Runs before every Render(), in the order added, on the scraping thread.
  void AddCollector(std::function<void()> collect);

  // What is registered, in the order added, for documentation checks.
  struct FamilyInfo {
    std::string name;
    std::string type;  // "counter", "gauge" or "histogram"
    std::vector<std::string> label_names;
  };
  std::vector<FamilyInfo> Families();

  // Runs the collectors, then renders every family in the order added:
  // # HELP, # TYPE, then one line per series (histograms: _bucket{le=...},
  // _sum, _count). A family with no series still gets its HELP and TYPE.
  std::string Render();

 private:
  struct Entry;
  Status CheckNew(const std::string& name, const std::vector<std::string>& label_names, bool histogram) REQUIRES(mu_);

  port::Mutex mu_;  // serialises Add*, AddCollector, Families and Render
  std::vector<std::unique_ptr<Entry>> entries_ GUARDED_BY(mu_);
  std::vector<std::function<void()>> collectors_ GUARDED_BY(mu_);
};

// The Content-Type of Render()'s output.
inline constexpr char kTextFormatContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace gpuslice::metrics

#endif  // GPUSLICE_METRICS_REGISTRY_H_
