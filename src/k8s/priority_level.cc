#include "k8s/priority_level.h"

#include "core/vgpu_layout.h"
#include "k8s/names.h"

namespace gpuslice::k8s {
namespace {

// How a level name is written, for both kinds of error.
constexpr char kNamesHelp[] =
    "lc (latency-critical), be (best effort) or a level of the node's gpuslice daemon config (`levels:`, "
    "docs/configuration.md; without one: critical, high, normal, low)";

// Names come from users' objects: shown clipped, control characters replaced,
// so that the error stays one short line whatever was written.
std::string Shown(const std::string& text) {
  std::string shown;
  for (char c : text.substr(0, 40)) shown += c >= 0x20 && c < 0x7f && c != '"' ? c : '?';
  if (text.size() > 40) shown += "...";
  return shown;
}

}  // namespace

Status CheckLevelName(const std::string& name, const std::string& where) {
  if (name.empty() || task::LevelTable::ValidName(name)) return Status::Ok();
  return Status::Error(where + " is \"" + Shown(name) +
                       "\", which is not a priority level's name (1 to 32 of a-z, 0-9, _ and -); use " + kNamesHelp);
}

StatusOr<ResolvedLevel> ResolveLevel(const task::LevelTable& levels, const std::string& name, const std::string& node,
                                     const std::string& where) {
  if (Status s = CheckLevelName(name, where); !s.ok()) return s;
  const std::string wanted = name.empty() ? "be" : name;
  const auto i = levels.Find(wanted);
  if (!i) {
    return Status::Error(where + " is \"" + wanted + "\", which is not a priority level of node " + node +
                         "; its levels are " + levels.Names() +
                         ": use one of them, or add the level to the `levels:` of the node's gpuslice daemon config "
                         "(docs/configuration.md) and restart the daemon");
  }
  return ResolvedLevel{levels.levels()[*i].name, levels.levels()[*i].word};
}

StatusOr<ResolvedLevel> ResolvePodLevel(const PodRequest& pod, const task::LevelTable& levels,
                                        const std::string& node) {
  auto level =
      ResolveLevel(levels, pod.priority_level, node, "pod " + pod.Describe() + ": annotation " + kPriorityAnnotation);
  if (!level.ok()) return level.status();
  if (pod.lc_slo_p99_us != 0 && core::LevelClass(level->word) != core::Priority::kLatencyCritical) {
    return Status::Error("pod " + pod.Describe() + ": annotation " + kLcSloP99Annotation +
                         " is for latency-critical pods, but level \"" + level->name + "\" of node " + node +
                         " is best-effort; set " + kPriorityAnnotation + " to a latency-critical level or remove " +
                         kLcSloP99Annotation + " and " + kLcAloneP99Annotation);
  }
  return level;
}

}  // namespace gpuslice::k8s
