// flag_values.h — parsing the values users type for vGPU settings, the one
// parser for `gpuslice set` and both paths of `gpuslice run`; and the
// smallest memory limit, which the control API enforces too.
//
// Each error is one line naming the flag, what was typed and how to write
// it. Pure functions; thread-safe; allocate only for errors.
#ifndef GPUSLICE_NODE_FLAG_VALUES_H_
#define GPUSLICE_NODE_FLAG_VALUES_H_

#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/vgpu_layout.h"
#include "task/task_levels.h"

namespace gpuslice::node {

// A whole percentage, 1..100.
StatusOr<uint32_t> ParsePercentFlag(const std::string& flag, const std::string& text);
// A level's name (task/task_levels.h: the node's configured levels, `lc`
// and `be`) or "best_effort" / "latency_critical", as its level word
// (core::LevelWord).
StatusOr<uint32_t> ParseLevelFlag(const std::string& flag, const std::string& text, const task::LevelTable& levels);
// Below this a limit holds not even a CUDA context's bookkeeping; the
// control API and the CLI refuse it with the same words.
inline constexpr uint64_t kMinMemoryLimitBytes = 1ull << 20;
// "" when `bytes` is a usable limit, else the one-line reason and fix.
std::string MemoryLimitProblem(uint64_t bytes);

// Watts for --power-cap: a positive number ("150", "150W", "87.5"), at most
// kMaxPowerCapWatts (power_cap_file.h); with `allow_none`, "none" or "0"
// (`set`: remove the cap) give 0.
StatusOr<double> ParsePowerFlag(const std::string& flag, const std::string& text, bool allow_none);

// A byte size of at least 1 MiB, or "unlimited" (core::kUnlimited).
StatusOr<uint64_t> ParseMemoryFlag(const std::string& flag, const std::string& text);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_FLAG_VALUES_H_
