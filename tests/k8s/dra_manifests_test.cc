// deploy/k8s/dra/dra-plugin.yaml and dra-example.yaml agree with the code: the
// driver name, the DeviceClass the example asks for, the capacity names, the
// opaque config (parsed by the driver's own parser), and the paths the
// DaemonSet mounts.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <nlohmann/json.hpp>

#include "k8s/cdi.h"
#include "k8s/dra/claim_allocation.h"
#include "k8s/dra/names.h"

namespace gpuslice::k8s::dra {
namespace {

using nlohmann::json;

json ToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    json out = json::object();
    for (const auto& kv : n) out[kv.first.as<std::string>()] = ToJson(kv.second);
    return out;
  }
  if (n.IsSequence()) {
    json out = json::array();
    for (const auto& v : n) out.push_back(ToJson(v));
    return out;
  }
  if (n.IsScalar()) {
    const std::string s = n.as<std::string>();
    if (n.Tag() != "!" && !s.empty() && s.find_first_not_of("0123456789") == std::string::npos) return std::stoll(s);
    return s;
  }
  return nullptr;
}

std::multimap<std::string, json> Objects(const std::string& file) {
  std::multimap<std::string, json> out;
  for (const YAML::Node& d : YAML::LoadAllFromFile(std::string(GPUSLICE_DEPLOY_DIR) + "/" + file)) {
    if (d.IsMap()) out.emplace(d["kind"].as<std::string>(), ToJson(d));
  }
  return out;
}

TEST(DraManifests, DaemonSetDeviceClassAndExampleAgreeWithTheDriver) {
  const auto plugin = Objects("dra/dra-plugin.yaml");
  const auto example = Objects("dra-example.yaml");
  ASSERT_EQ(plugin.count("DaemonSet"), 1u);
  ASSERT_EQ(plugin.count("DeviceClass"), 1u);
  ASSERT_EQ(example.count("ResourceClaimTemplate"), 1u);
  ASSERT_EQ(example.count("Pod"), 1u);

  const json& device_class = plugin.find("DeviceClass")->second;
  EXPECT_EQ(device_class["apiVersion"], "resource.k8s.io/v1");
  EXPECT_NE(device_class["spec"]["selectors"][0]["cel"]["expression"].get<std::string>().find(
                std::string("\"") + kDriverName + "\""),
            std::string::npos);

  const json& spec = example.find("ResourceClaimTemplate")->second["spec"]["spec"]["devices"];
  const json& exactly = spec["requests"][0]["exactly"];
  EXPECT_EQ(exactly["deviceClassName"], device_class["metadata"]["name"]);
  EXPECT_EQ(exactly["capacity"]["requests"][kCoresCapacity], "30");
  EXPECT_EQ(exactly["capacity"]["requests"][kMemoryCapacity], "4Gi");
  const json& opaque = spec["config"][0]["opaque"];
  EXPECT_EQ(opaque["driver"], kDriverName);
  auto config = ParseVgpuConfig(opaque["parameters"], {}, "opaque.parameters");
  EXPECT_TRUE(config.ok()) << config.status().message();

  const json& pod = example.find("Pod")->second;
  EXPECT_EQ(pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"],
            example.find("ResourceClaimTemplate")->second["metadata"]["name"]);

  const json& container = plugin.find("DaemonSet")->second["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(container["args"][0], "dra-plugin");
  std::map<std::string, std::string> mounts;
  for (const json& m : container["volumeMounts"]) mounts[m["mountPath"]] = m["name"];
  for (const char* path : {kDefaultRegistryDir, kDefaultPluginsDir, kDefaultCdiDir, "/run/gpuslice"}) {
    EXPECT_EQ(mounts.count(path), 1u) << path;
  }
  // The state keeper beside it, on the same state directory.
  const json& keeper = plugin.find("DaemonSet")->second["spec"]["template"]["spec"]["containers"][1];
  EXPECT_EQ(keeper["args"], json({"state-keeper", "--state-dir=/run/gpuslice"}));
  EXPECT_EQ(keeper["volumeMounts"][0]["mountPath"], "/run/gpuslice");
  EXPECT_EQ(keeper["volumeMounts"][0]["name"], mounts["/run/gpuslice"]);
}

}  // namespace
}  // namespace gpuslice::k8s::dra
