#include "test_util.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace gpuslice::k8s::testing {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

std::string ReadFixture(const std::string& name) { return ReadFile(std::string(GPUSLICE_K8S_FIXTURES) + "/" + name); }

nlohmann::json FixtureJson(const std::string& name) { return nlohmann::json::parse(ReadFixture(name)); }

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/gpuslice-k8s-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) abort();
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling interval, not synchronisation
  }
  return condition();
}

nlohmann::json MakePod(const std::string& ns, const std::string& name, const std::string& uid,
                       const std::vector<std::tuple<std::string, int, int>>& containers,
                       const nlohmann::json& annotations, const std::string& node) {
  nlohmann::json cs = nlohmann::json::array();
  for (const auto& [cname, vcore, vmemory] : containers) {
    nlohmann::json limits = {{"cpu", "1"}};
    if (vcore > 0) limits["gpuslice.io/vcore"] = std::to_string(vcore);
    if (vmemory > 0) limits["gpuslice.io/vmemory"] = std::to_string(vmemory);
    cs.push_back({{"name", cname}, {"image", "cuda:13"}, {"resources", {{"limits", limits}, {"requests", limits}}}});
  }
  nlohmann::json pod = {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata",
                         {{"name", name},
                          {"namespace", ns},
                          {"uid", uid},
                          {"creationTimestamp", "2025-10-02T09:30:00Z"},
                          {"annotations", annotations}}},
                        {"spec", {{"containers", cs}, {"schedulerName", "gpuslice-scheduler"}}},
                        {"status", {{"phase", "Pending"}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

nlohmann::json MakeNode(const std::string& name, const nlohmann::json& annotations) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"annotations", annotations}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"status", {{"capacity", {{"cpu", "8"}}}}}};
}

}  // namespace gpuslice::k8s::testing
