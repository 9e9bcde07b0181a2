#include "task/task_levels.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/vgpu_layout.h"

namespace gpuslice::task {

namespace {

using core::LevelOrder;
using core::LevelWord;
using core::Priority;

Status Bad(const std::string& where, const std::string& what) { return Status::Error(where + ": " + what); }

}  // namespace

bool LevelTable::ValidName(const std::string& name) {
  if (name.empty() || name.size() > 32) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

LevelTable LevelTable::Make(std::vector<Level> configured) {
  // Ranks count from the bottom of each class: the last listed is rank 0.
  uint32_t lc_rank = 0, be_rank = 0;
  for (auto it = configured.rbegin(); it != configured.rend(); ++it) {
    it->word = it->latency_critical ? LevelWord(Priority::kLatencyCritical, lc_rank++)
                                    : LevelWord(Priority::kBestEffort, be_rank++);
  }
  configured.push_back({"lc", true, LevelWord(Priority::kLatencyCritical, 0), 0});
  configured.push_back({"be", false, LevelWord(Priority::kBestEffort, 0), 0});
  std::stable_sort(configured.begin(), configured.end(),
                   [](const Level& a, const Level& b) { return LevelOrder(a.word) > LevelOrder(b.word); });
  LevelTable table;
  table.levels_ = std::move(configured);
  return table;
}

LevelTable LevelTable::Defaults() {
  return Make({{"critical", true, 0, 0}, {"high", true, 0, 0}, {"normal", false, 0, 0}, {"low", false, 0, 0}});
}

StatusOr<LevelTable> LevelTable::Parse(const std::string& yaml, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return Bad(origin, std::string("not YAML: ") + e.what());
  }
  if (!root.IsMap() || !root["levels"]) {
    return Bad(origin, "no `levels:` list; write `levels:` followed by `- {name: high, class: lc, slo_ms: 10}` "
                       "entries, highest level first");
  }
  const YAML::Node list = root["levels"];
  if (!list.IsSequence() || list.size() == 0) {
    return Bad(origin, "`levels:` must be a non-empty list of `{name: ..., class: lc|be, slo_ms: ...}`");
  }
  std::vector<Level> configured;
  bool seen_be = false;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node entry = list[i];
    const std::string where = origin + ": levels[" + std::to_string(i) + "]";
    if (!entry.IsMap()) return Bad(where, "must be a map like `{name: high, class: lc, slo_ms: 10}`");
    Level level;
    bool has_class = false;
    for (const auto& kv : entry) {
      const std::string key = kv.first.as<std::string>("");
      if (!kv.second.IsScalar()) return Bad(where, "`" + key + "` must be a single value");
      const std::string value = kv.second.as<std::string>();
      if (key == "name") {
        level.name = value;
      } else if (key == "class") {
        if (value != "lc" && value != "be") return Bad(where, "class `" + value + "` is neither `lc` nor `be`");
        level.latency_critical = value == "lc";
        has_class = true;
      } else if (key == "slo_ms") {
        double ms = 0;
        std::istringstream in(value);
        if (!(in >> ms) || !in.eof() || !std::isfinite(ms) || ms <= 0 || ms > 3'600'000) {
          return Bad(where, "slo_ms `" + value + "` is not a number of milliseconds above 0 (at most an hour)");
        }
        level.slo_ns = static_cast<uint64_t>(ms * 1e6);
      } else {
        return Bad(where, "unknown key `" + key + "`; a level has `name`, `class` and `slo_ms`");
      }
    }
    if (!ValidName(level.name)) {
      return Bad(where, "name `" + level.name + "` must be 1-32 of a-z, 0-9, `_` and `-`");
    }
    if (level.name == "lc" || level.name == "be") {
      return Bad(where, "`" + level.name + "` is a built-in level; give yours another name");
    }
    for (const Level& other : configured) {
      if (other.name == level.name) return Bad(where, "level `" + level.name + "` is listed twice");
    }
    if (!has_class) return Bad(where, "level `" + level.name + "` has no `class: lc` or `class: be`");
    if (!level.latency_critical && level.slo_ns != 0) {
      return Bad(where, "best-effort level `" + level.name + "` has an slo_ms; only `class: lc` levels have SLOs");
    }
    if (level.latency_critical && seen_be) {
      return Bad(where, "latency-critical level `" + level.name +
                            "` is listed below a best-effort one; list every `class: lc` level first "
                            "(every latency-critical level is above every best-effort one)");
    }
    seen_be = seen_be || !level.latency_critical;
    configured.push_back(level);
  }
  const auto lc_levels = std::count_if(configured.begin(), configured.end(),
                                       [](const Level& l) { return l.latency_critical; });
  if (lc_levels > core::kMaxLevelRank + 1 || configured.size() - lc_levels > core::kMaxLevelRank + 1) {
    return Bad(origin, "more than 256 levels of one class; merge some");
  }
  return Make(std::move(configured));
}

StatusOr<LevelTable> LevelTable::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error(path + ": cannot be read; give the path of a YAML file with a `levels:` list");
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

std::optional<size_t> LevelTable::Find(const std::string& name) const {
  for (size_t i = 0; i < levels_.size(); ++i) {
    if (levels_[i].name == name) return i;
  }
  return std::nullopt;
}

std::string LevelTable::Names() const {
  std::string names;
  for (const Level& level : levels_) names += (names.empty() ? "" : ", ") + level.name;
  return names;
}

std::string LevelTable::NameOf(uint32_t word) const {
  for (const Level& level : levels_) {
    if (level.word == word) return level.name;
  }
  return std::string(core::LevelClass(word) == Priority::kLatencyCritical ? "lc" : "be") + "+" +
         std::to_string(core::LevelRank(word));
}

}  // namespace gpuslice::task
