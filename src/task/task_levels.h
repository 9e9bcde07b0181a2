// task_levels.h — the levels a task scheduler knows: the built-in `lc` and
// `be`, plus those of a YAML config or, without one, the default critical /
// high (latency-critical) and normal / low (best-effort).
//
// A config lists its levels highest first:
//
//   levels:
//     - {name: critical, class: lc, slo_ms: 5}
//     - {name: high, class: lc, slo_ms: 20}
//     - {name: normal, class: be}
//     - {name: low, class: be}
//
// Each level gets a level word (core::LevelWord: its class and its rank
// within the class, counted from the bottom), the same words the pacing
// board orders vGPUs by; `lc` and `be` are rank 0 of their class, so they
// rank with the lowest configured level of their class. Other top-level keys
// are ignored, so that the node's config file can serve the application too.
//
// A LevelTable is immutable once made; read it from any thread.
#ifndef GPUSLICE_TASK_TASK_LEVELS_H_
#define GPUSLICE_TASK_TASK_LEVELS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuslice::task {

struct Level {
  std::string name;
  bool latency_critical = false;
  uint32_t word = 0;    // core::LevelWord(class, rank)
  uint64_t slo_ns = 0;  // 0: none
};

class LevelTable {
 public:
  // The built-in levels and the defaults.
  static LevelTable Defaults();
  // The built-in levels and those of the YAML text; `origin` names it in errors.
  static StatusOr<LevelTable> Parse(const std::string& yaml, const std::string& origin);
  static StatusOr<LevelTable> Load(const std::string& path);

  // Highest first; equal levels in the order they were listed, built-ins last.
  const std::vector<Level>& levels() const { return levels_; }
  // Whether `name` could name a level (1-32 of a-z, 0-9, `_` and `-`),
  // whatever table: for checking a name before the node's table is known.
  static bool ValidName(const std::string& name);

  // The index of `name` in levels(), or nullopt.
  std::optional<size_t> Find(const std::string& name) const;
  // "critical, high, ..." for error messages.
  std::string Names() const;
  // The name of the level with this word: the configured one where a
  // configured level shares it with a built-in; "lc+2" for a word no level
  // has (a vGPU made under another table).
  std::string NameOf(uint32_t word) const;

 private:
  static LevelTable Make(std::vector<Level> configured);
  std::vector<Level> levels_;
};

}  // namespace gpuslice::task

#endif  // GPUSLICE_TASK_TASK_LEVELS_H_
