#include "node/standalone_node.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "node/policy_file.h"
#include "port/nvml_library.h"

namespace gpuslice::node {

void LogToStderrForCommand() {
  static const bool set = [] {
    spdlog::set_default_logger(spdlog::stderr_color_st("gpuslice"));
    spdlog::set_level(spdlog::level::warn);
    return true;
  }();
  (void)set;
}

StatusOr<std::unique_ptr<StandaloneNode>> StandaloneNode::Open(const std::string& state_dir) {
  LogToStderrForCommand();
  core::VgpuStore store(state_dir.empty() ? core::VgpuStore::DefaultRoot() : state_dir);
  auto config = LoadPolicyConfig(store.root());
  if (!config.ok()) return config.status();
  auto levels = LoadLevels(store.root());
  if (!levels.ok()) return levels.status();
  std::unique_ptr<StandaloneNode> node(new StandaloneNode());
  // NVML names the GPUs; without it, everything but create still works.
  auto nvml = port::NvmlLibrary::Open();
  auto found = nvml.ok() ? DiscoverNodeDevices(*nvml.value()) : StatusOr<NodeDevices>(nvml.status());
  if (found.ok()) {
    node->devices_ = std::move(found.value());
  } else {
    node->devices_problem_ = found.status().message();
  }
  node->schedule_ = std::make_unique<ScheduleWorker>(ScheduleWorker::NodeSchedule(store, config.value()),
                                                     ScheduleWorker::Passes::kInline);
  ManagerOptions options;
  options.grace = std::chrono::milliseconds(0);
  options.levels = levels.value();
  node->manager_ = std::make_unique<VgpuManager>(store, &node->devices_, node->schedule_.get(), options);
  return node;
}

}  // namespace gpuslice::node
