#include "test_util.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "k8s/dra/names.h"

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

nlohmann::json MakeDraClaim(const std::string& ns, const std::string& name, const std::string& uid,
                            const std::string& node, const std::string& device, const std::string& cores,
                            const std::string& memory, const nlohmann::json& parameters) {
  const std::string driver = dra::kDriverName;
  nlohmann::json claim = {{"apiVersion", "resource.k8s.io/v1"},
                          {"kind", "ResourceClaim"},
                          {"metadata", {{"namespace", ns}, {"name", name}, {"uid", uid}}},
                          {"spec", {{"devices", {{"requests", {{{"name", "gpu"}}}}}}}},
                          {"status",
                           {{"allocation",
                             {{"devices",
                               {{"results",
                                 {{{"request", "gpu"},
                                   {"driver", driver},
                                   {"pool", node},
                                   {"device", device},
                                   {"shareID", "share-" + uid},
                                   {"consumedCapacity", {{"cores", cores}, {"memory", memory}}}}}}}}}}}}};
  if (!parameters.is_null()) {
    claim["status"]["allocation"]["devices"]["config"] = {
        {{"source", "FromClaim"}, {"opaque", {{"driver", driver}, {"parameters", parameters}}}}};
  }
  return claim;
}

void ExpectValidCdi(const nlohmann::json& spec) {
  ASSERT_EQ(spec.value("cdiVersion", ""), "1.1.0");
  ASSERT_TRUE(std::regex_match(spec.value("kind", ""),
                               std::regex(R"([A-Za-z0-9][A-Za-z0-9.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*)")));
  ASSERT_TRUE(spec["devices"].is_array());
  ASSERT_FALSE(spec["devices"].empty());
  auto check_edits = [](const nlohmann::json& edits) {
    for (const nlohmann::json& e : edits.value("env", nlohmann::json::array()))
      EXPECT_NE(e.get<std::string>().find('='), std::string::npos);
    for (const nlohmann::json& d : edits.value("deviceNodes", nlohmann::json::array())) {
      EXPECT_EQ(d.value("path", "").rfind("/", 0), 0u) << d;
      EXPECT_EQ(d.value("hostPath", "/").rfind("/", 0), 0u) << d;
    }
    for (const nlohmann::json& m : edits.value("mounts", nlohmann::json::array())) {
      EXPECT_EQ(m.value("hostPath", "").rfind("/", 0), 0u) << m;
      EXPECT_EQ(m.value("containerPath", "").rfind("/", 0), 0u) << m;
      EXPECT_TRUE(m["options"].is_array()) << m;
    }
  };
  for (const nlohmann::json& d : spec["devices"]) {
    EXPECT_TRUE(std::regex_match(d.value("name", ""), std::regex(R"([A-Za-z0-9][A-Za-z0-9_.:\-]*)"))) << d;
    ASSERT_TRUE(d.contains("containerEdits"));
    const nlohmann::json& e = d["containerEdits"];
    size_t edits = 0;
    for (const char* kind : {"env", "deviceNodes", "mounts", "hooks"})
      edits += e.value(kind, nlohmann::json::array()).size();
    EXPECT_GT(edits, 0u) << "CDI refuses a device whose edits are empty: " << d;
    check_edits(e);
  }
  check_edits(spec.value("containerEdits", nlohmann::json::object()));
}

}  // namespace gpuslice::k8s::testing
