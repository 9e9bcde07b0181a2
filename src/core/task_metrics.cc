#include "core/task_metrics.h"

#include <cstring>

#include "core/shared_word.h"

namespace gpuslice::core {
namespace {

constexpr uint32_t kRowFree = 0, kRowClaiming = 1, kRowReady = 2;

bool NameIs(const TaskLevelRow& row, std::string_view name) {
  return std::strncmp(row.name, name.data(), name.size()) == 0 && row.name[name.size()] == '\0';
}

// The row of `name`, claimed if no ready row has it; the overflow row when
// all are taken. A row at 0 has none claimed after it: claimers scan from
// the first row and take the first free one.
TaskLevelRow& RowOf(Ledger* ledger, std::string_view name) {
  for (TaskLevelRow& row : ledger->task_levels) {
    uint32_t state = LoadAcquire(row.state);
    if (state == kRowFree) {
      if (CompareExchangeAcqRel(row.state, state, kRowClaiming)) {
        std::memset(row.name, 0, sizeof row.name);
        std::memcpy(row.name, name.data(), name.size());
        StoreRelease(row.state, kRowReady);
        return row;
      }
      state = LoadAcquire(row.state);  // claimed by another process meanwhile: maybe for this name
    }
    if (state == kRowReady && NameIs(row, name)) return row;
  }
  return ledger->task_levels_other;
}

void Add(LcLatencySnapshot& into, const LcLatencySnapshot& s) {
  for (uint32_t i = 0; i < kLcLatencyBuckets; ++i) into.buckets[i] += s.buckets[i];
  into.count += s.count;
  into.sum_ns += s.sum_ns;
}

}  // namespace

bool ValidTaskLevelName(std::string_view name) {
  if (name.empty() || name.size() >= kTaskLevelNameBytes) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  return true;
}

bool RecordTask(Ledger* ledger, std::string_view name, uint64_t latency_ns, uint32_t flags) {
  if (ledger == nullptr || !ValidTaskLevelName(name)) return false;
  TaskLevelRow& row = RowOf(ledger, name);
  if ((flags & kTaskFailed) != 0) FetchAddRelaxed(row.failed, 1);
  if ((flags & kTaskSloMiss) != 0) FetchAddRelaxed(row.slo_misses, 1);
  // As RecordLcLatency: bucket and sum first, the count last with release.
  FetchAddRelaxed(row.buckets[LcLatencyBucketIndex(latency_ns)], 1);
  FetchAddRelaxed(row.sum_ns, latency_ns);
  FetchAddRelease(row.count, 1);
  return true;
}

std::vector<TaskLevelSnapshot> TakeTaskLevelSnapshots(const Ledger& ledger) {
  std::vector<TaskLevelSnapshot> levels;
  // The level's entry, added at the end the first time.
  auto entry = [&levels](std::string_view name) -> TaskLevelSnapshot& {
    for (TaskLevelSnapshot& l : levels) {
      if (l.name == name) return l;
    }
    return levels.emplace_back(TaskLevelSnapshot{std::string(name)});
  };
  auto take = [](const TaskLevelRow& row, TaskLevelSnapshot& into) {
    LcLatencySnapshot s;
    for (uint32_t i = 0; i < kLcLatencyBuckets; ++i) {
      s.buckets[i] = LoadRelaxed(row.buckets[i]);
      s.count += s.buckets[i];
    }
    s.sum_ns = LoadRelaxed(row.sum_ns);
    Add(into.latency, s);
    into.failed += LoadRelaxed(row.failed);
    into.slo_misses += LoadRelaxed(row.slo_misses);
  };
  TaskLevelSnapshot other{std::string(kOtherTaskLevel)};
  for (const TaskLevelRow& row : ledger.task_levels) {
    const uint32_t state = LoadAcquire(row.state);
    if (state == kRowFree) break;
    if (state != kRowReady || LoadAcquire(row.count) == 0) continue;
    // The vGPU's processes can write anything here: a name that is not one
    // is counted, under "other", rather than shown.
    const std::string_view name(row.name, strnlen(row.name, sizeof row.name));
    take(row, ValidTaskLevelName(name) ? entry(name) : other);
  }
  if (LoadAcquire(ledger.task_levels_other.count) != 0) take(ledger.task_levels_other, other);
  if (other.latency.count > 0) {
    TaskLevelSnapshot& into = entry(kOtherTaskLevel);  // last, unless a level is itself called "other"
    Add(into.latency, other.latency);
    into.failed += other.failed;
    into.slo_misses += other.slo_misses;
  }
  return levels;
}

}  // namespace gpuslice::core
