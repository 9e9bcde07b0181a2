#include "metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <type_traits>
#include <variant>

#include "metrics/text_format.h"

namespace gpuslice::metrics {

void Counter::Increment(double delta) {
  // A negative or NaN delta would make the counter go down (or poison it),
  // which Prometheus reads as a reset; drop it.
  if (!(delta >= 0)) return;
  value_.fetch_add(delta, std::memory_order_relaxed);
}

void Counter::Set(double value) { value_.store(value, std::memory_order_relaxed); }

void Gauge::Add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  // The first bucket whose bound is >= value (le is inclusive); NaN lands in
  // +Inf, as in Prometheus's client_golang.
  const size_t i = std::isnan(value)
                       ? upper_bounds_.size()
                       : std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  port::MutexLock lock(&mu_);
  ++counts_[i];
  sum_ += value;
}

bool Histogram::Set(const std::vector<uint64_t>& bucket_counts, double sum) {
  if (bucket_counts.size() != upper_bounds_.size() + 1) return false;
  port::MutexLock lock(&mu_);
  counts_ = bucket_counts;
  sum_ = sum;
  return true;
}

Histogram::Snapshot Histogram::Take() const {
  Snapshot s;
  s.upper_bounds = upper_bounds_;
  port::MutexLock lock(&mu_);
  uint64_t running = 0;
  s.cumulative.reserve(counts_.size());
  for (uint64_t c : counts_) s.cumulative.push_back(running += c);
  s.sum = sum_;
  return s;
}

template <typename T>
Family<T>::Family(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> upper_bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      upper_bounds_(std::move(upper_bounds)) {}

template <typename T>
T& Family<T>::WithLabels(const LabelValues& values) {
  if (values.size() != label_names_.size()) {
    // The daemon's code chose the wrong number of labels: a bug to fix, not
    // input to report, and rendering a malformed series would break every
    // scrape of the node.
    std::fprintf(stderr, "gpuslice metrics: %s takes %zu label values, given %zu\n", name_.c_str(), label_names_.size(),
                 values.size());
    std::abort();
  }
  port::MutexLock lock(&mu_);
  std::unique_ptr<T>& slot = series_[values];
  if (!slot) {
    if constexpr (std::is_same_v<T, Histogram>) {
      slot = std::make_unique<Histogram>(upper_bounds_);
    } else {
      slot = std::make_unique<T>();
    }
  }
  return *slot;
}

template <typename T>
void Family<T>::Remove(const LabelValues& values) {
  port::MutexLock lock(&mu_);
  series_.erase(values);
}

template <typename T>
void Family<T>::Clear() {
  port::MutexLock lock(&mu_);
  series_.clear();
}

template <typename T>
void Family<T>::ForEach(const std::function<void(const LabelValues&, const T&)>& fn) const {
  port::MutexLock lock(&mu_);
  for (const auto& [labels, series] : series_) fn(labels, *series);
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

struct Registry::Entry {
  std::variant<std::unique_ptr<Family<Counter>>, std::unique_ptr<Family<Gauge>>, std::unique_ptr<Family<Histogram>>>
      family;
  std::vector<std::string> exposed_names;  // every name this family writes lines for
};

namespace {

// `{a="x",b="y"` without the closing brace, or "" when there are no labels
// and no extra label to follow.
void AppendLabels(std::string& out, const std::vector<std::string>& names, const LabelValues& values,
                  const std::string& extra_name = "", const std::string& extra_value = "") {
  if (names.empty() && extra_name.empty()) return;
  out += '{';
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    out += EscapeLabelValue(values[i]);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    out += extra_name + "=\"" + extra_value + '"';
  }
  out += '}';
}

void AppendHeader(std::string& out, const std::string& name, const std::string& help, const char* type) {
  out += "# HELP " + name + ' ' + EscapeHelp(help) + '\n';
  out += "# TYPE " + name + ' ' + type + '\n';
}

void Render(std::string& out, const Family<Counter>& f) {
  AppendHeader(out, f.name(), f.help(), "counter");
  f.ForEach([&](const LabelValues& labels, const Counter& c) {
    out += f.name();
    AppendLabels(out, f.label_names(), labels);
    out += ' ' + FormatValue(c.Value()) + '\n';
  });
}

void Render(std::string& out, const Family<Gauge>& f) {
  AppendHeader(out, f.name(), f.help(), "gauge");
  f.ForEach([&](const LabelValues& labels, const Gauge& g) {
    out += f.name();
    AppendLabels(out, f.label_names(), labels);
    out += ' ' + FormatValue(g.Value()) + '\n';
  });
}

void Render(std::string& out, const Family<Histogram>& f) {
  AppendHeader(out, f.name(), f.help(), "histogram");
  f.ForEach([&](const LabelValues& labels, const Histogram& h) {
    const Histogram::Snapshot s = h.Take();
    for (size_t i = 0; i < s.cumulative.size(); ++i) {
      const std::string le = i < s.upper_bounds.size() ? FormatValue(s.upper_bounds[i]) : "+Inf";
      out += f.name() + "_bucket";
      AppendLabels(out, f.label_names(), labels, "le", le);
      out += ' ' + std::to_string(s.cumulative[i]) + '\n';
    }
    out += f.name() + "_sum";
    AppendLabels(out, f.label_names(), labels);
    out += ' ' + FormatValue(s.sum) + '\n';
    out += f.name() + "_count";
    AppendLabels(out, f.label_names(), labels);
    out += ' ' + std::to_string(s.cumulative.back()) + '\n';
  });
}

std::vector<std::string> ExposedNames(const std::string& name, bool histogram) {
  if (!histogram) return {name};
  return {name, name + "_bucket", name + "_sum", name + "_count"};
}

}  // namespace

Registry::Registry() = default;
Registry::~Registry() = default;

Status Registry::CheckNew(const std::string& name, const std::vector<std::string>& label_names, bool histogram) {
  if (!IsValidMetricName(name)) {
    return Status::Error("metric name \"" + name + "\" is not valid; use [a-zA-Z_:][a-zA-Z0-9_:]*");
  }
  std::set<std::string> seen;
  for (const std::string& label : label_names) {
    if (!IsValidLabelName(label)) {
      return Status::Error(name + ": label name \"" + label +
                           "\" is not valid; use [a-zA-Z_][a-zA-Z0-9_]*, not starting with __");
    }
    if (histogram && label == "le") return Status::Error(name + ": label \"le\" is reserved for histogram buckets");
    if (!seen.insert(label).second) return Status::Error(name + ": label \"" + label + "\" appears twice");
  }
  for (const std::string& mine : ExposedNames(name, histogram)) {
    for (const auto& entry : entries_) {
      for (const std::string& theirs : entry->exposed_names) {
        if (mine == theirs) return Status::Error("metric \"" + mine + "\" is already registered");
      }
    }
  }
  return Status::Ok();
}

StatusOr<Family<Counter>*> Registry::AddCounter(const std::string& name, const std::string& help,
                                                std::vector<std::string> label_names) {
  port::MutexLock lock(&mu_);
  if (Status s = CheckNew(name, label_names, false); !s.ok()) return s;
  // Prometheus's convention, and what rate() users expect to see.
  if (name.size() < 6 || name.compare(name.size() - 6, 6, "_total") != 0) {
    return Status::Error("counter \"" + name + "\" must end in _total (Prometheus naming)");
  }
  auto family = std::make_unique<Family<Counter>>(name, help, std::move(label_names));
  Family<Counter>* raw = family.get();
  entries_.push_back(std::make_unique<Entry>(Entry{std::move(family), ExposedNames(name, false)}));
  return raw;
}

StatusOr<Family<Gauge>*> Registry::AddGauge(const std::string& name, const std::string& help,
                                            std::vector<std::string> label_names) {
  port::MutexLock lock(&mu_);
  if (Status s = CheckNew(name, label_names, false); !s.ok()) return s;
  auto family = std::make_unique<Family<Gauge>>(name, help, std::move(label_names));
  Family<Gauge>* raw = family.get();
  entries_.push_back(std::make_unique<Entry>(Entry{std::move(family), ExposedNames(name, false)}));
  return raw;
}

StatusOr<Family<Histogram>*> Registry::AddHistogram(const std::string& name, const std::string& help,
                                                    std::vector<std::string> label_names,
                                                    std::vector<double> upper_bounds) {
  port::MutexLock lock(&mu_);
  if (Status s = CheckNew(name, label_names, true); !s.ok()) return s;
  if (upper_bounds.empty()) return Status::Error(name + ": a histogram needs at least one bucket bound");
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    if (!std::isfinite(upper_bounds[i]) || (i > 0 && !(upper_bounds[i] > upper_bounds[i - 1]))) {
      return Status::Error(name + ": bucket bounds must be finite and strictly increasing (+Inf is implied)");
    }
  }
  auto family = std::make_unique<Family<Histogram>>(name, help, std::move(label_names), std::move(upper_bounds));
  Family<Histogram>* raw = family.get();
  entries_.push_back(std::make_unique<Entry>(Entry{std::move(family), ExposedNames(name, true)}));
  return raw;
}

void Registry::AddCollector(std::function<void()> collect) {
  port::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collect));
}

std::vector<Registry::FamilyInfo> Registry::Families() {
  port::MutexLock lock(&mu_);
  std::vector<FamilyInfo> out;
  for (const auto& entry : entries_) {
    std::visit(
        [&out](const auto& family) {
          using T = typename std::decay_t<decltype(*family)>;
          const char* type = std::is_same_v<T, Family<Counter>> ? "counter"
                             : std::is_same_v<T, Family<Gauge>> ? "gauge"
                                                                : "histogram";
          out.push_back({family->name(), type, family->label_names()});
        },
        entry->family);
  }
  return out;
}

std::string Registry::Render() {
  port::MutexLock lock(&mu_);
  for (const auto& collect : collectors_) collect();
  std::string out;
  for (const auto& entry : entries_) {
    std::visit([&out](const auto& family) { metrics::Render(out, *family); }, entry->family);
  }
  return out;
}

}  // namespace gpuslice::metrics
