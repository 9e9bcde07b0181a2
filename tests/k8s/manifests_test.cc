// deploy/k8s validates: every manifest parses as YAML and carries the fields
// its kind needs, the pieces refer to each other consistently (service
// accounts, roles, volumes, ports, paths, scheduler name), and the example
// pod is a valid gpuslice request by our own rules.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <set>

#include "k8s/cdi.h"
#include "k8s/dra/names.h"
#include "k8s/library_install.h"
#include "k8s/names.h"
#include "k8s/pod_request.h"
#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using nlohmann::json;

const std::string kDeploy = GPUSLICE_DEPLOY_DIR;

std::vector<YAML::Node> Documents(const std::string& file) {
  std::vector<YAML::Node> docs;
  try {
    for (const YAML::Node& d : YAML::LoadAllFromFile(kDeploy + "/" + file)) {
      if (d.IsDefined() && !d.IsNull()) docs.push_back(d);
    }
  } catch (const YAML::Exception& e) {
    ADD_FAILURE() << file << " does not parse: " << e.what();
  }
  return docs;
}

// Every object of every manifest, by kind.
std::multimap<std::string, YAML::Node> AllObjects() {
  std::multimap<std::string, YAML::Node> out;
  for (const char* f :
       {"rbac.yaml", "device-plugin.yaml", "scheduler.yaml", "scheduler-config.yaml", "example-pod.yaml"}) {
    for (const YAML::Node& d : Documents(f)) out.emplace(d["kind"].as<std::string>(""), d);
  }
  return out;
}

YAML::Node One(const std::multimap<std::string, YAML::Node>& all, const std::string& kind) {
  EXPECT_EQ(all.count(kind), 1u) << kind;
  const auto it = all.find(kind);
  return it == all.end() ? YAML::Node() : it->second;
}

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
  if (n.IsNull()) return nullptr;
  const std::string s = n.as<std::string>();
  if (n.Tag() != "!") {  // plain scalars may be numbers or booleans
    try {
      size_t used = 0;
      const long long v = std::stoll(s, &used);
      if (used == s.size()) return v;
    } catch (...) {
    }
    if (s == "true" || s == "false") return s == "true";
  }
  return s;
}

std::set<std::string> Strings(const YAML::Node& seq) {
  std::set<std::string> out;
  for (const auto& v : seq) out.insert(v.as<std::string>());
  return out;
}

TEST(Manifests, EveryFileParsesAndEveryObjectIsNamed) {
  const auto all = AllObjects();
  EXPECT_GE(all.size(), 14u);
  for (const auto& [kind, doc] : all) {
    ASSERT_FALSE(kind.empty()) << "an object without kind";
    EXPECT_TRUE(doc["apiVersion"].IsScalar()) << kind;
    if (kind == "KubeSchedulerConfiguration") continue;  // not an API object
    EXPECT_FALSE(doc["metadata"]["name"].as<std::string>("").empty()) << kind;
  }
}

// Checks a pod template: images, volumes behind every mount, the service account.
void CheckPodTemplate(const YAML::Node& workload, const std::set<std::string>& service_accounts) {
  const std::string name = workload["metadata"]["name"].as<std::string>();
  const YAML::Node spec = workload["spec"];
  for (const auto& kv : spec["selector"]["matchLabels"]) {
    EXPECT_EQ(spec["template"]["metadata"]["labels"][kv.first.as<std::string>()].as<std::string>(""),
              kv.second.as<std::string>())
        << name << ": the selector must match the template's labels";
  }
  const YAML::Node pod = spec["template"]["spec"];
  EXPECT_EQ(service_accounts.count(pod["serviceAccountName"].as<std::string>("")), 1u) << name;
  std::set<std::string> volumes;
  for (const auto& v : pod["volumes"]) volumes.insert(v["name"].as<std::string>());
  for (const char* list : {"initContainers", "containers"}) {
    for (const auto& c : pod[list]) {
      EXPECT_FALSE(c["image"].as<std::string>("").empty()) << name << "/" << c["name"];
      for (const auto& m : c["volumeMounts"]) {
        EXPECT_EQ(volumes.count(m["name"].as<std::string>()), 1u)
            << name << ": mount of undeclared volume " << m["name"];
      }
    }
  }
}

TEST(Manifests, RbacGrantsWhatTheCodeCalls) {
  const auto all = AllObjects();
  EXPECT_EQ(One(all, "Namespace")["metadata"]["name"].as<std::string>(), "gpuslice-system");
  std::set<std::string> accounts, roles;
  for (auto [it, end] = all.equal_range("ServiceAccount"); it != end; ++it) {
    accounts.insert(it->second["metadata"]["name"].as<std::string>());
    EXPECT_EQ(it->second["metadata"]["namespace"].as<std::string>(""), "gpuslice-system");
  }
  std::map<std::string, std::set<std::string>> grants;  // role -> "resource:verb"
  for (auto [it, end] = all.equal_range("ClusterRole"); it != end; ++it) {
    const std::string role = it->second["metadata"]["name"].as<std::string>();
    roles.insert(role);
    for (const auto& rule : it->second["rules"]) {
      for (const auto& r : rule["resources"]) {
        for (const auto& v : rule["verbs"]) grants[role].insert(r.as<std::string>() + ":" + v.as<std::string>());
      }
    }
  }
  for (const char* g : {"pods:get", "pods:list", "nodes:get", "nodes:patch"}) {
    EXPECT_EQ(grants["gpuslice-device-plugin"].count(g), 1u) << g;
  }
  for (const char* g : {"pods:get", "pods:patch", "pods/binding:create", "nodes:get"}) {
    EXPECT_EQ(grants["gpuslice-scheduler-extender"].count(g), 1u) << g;
  }
  for (const char* kind : {"ClusterRoleBinding", "RoleBinding"}) {
    for (auto [it, end] = all.equal_range(kind); it != end; ++it) {
      const YAML::Node b = it->second;
      const std::string role = b["roleRef"]["name"].as<std::string>();
      if (role.rfind("gpuslice-", 0) == 0) {
        EXPECT_EQ(roles.count(role), 1u) << "binding to unknown role " << role;
      }
      for (const auto& s : b["subjects"]) {
        EXPECT_EQ(accounts.count(s["name"].as<std::string>()), 1u) << s["name"];
      }
    }
  }
}

TEST(Manifests, DaemonSetMountsWhatThePluginUses) {
  const auto all = AllObjects();
  std::set<std::string> accounts;
  for (auto [it, end] = all.equal_range("ServiceAccount"); it != end; ++it) {
    accounts.insert(it->second["metadata"]["name"].as<std::string>());
  }
  const YAML::Node ds = One(all, "DaemonSet");
  CheckPodTemplate(ds, accounts);
  const YAML::Node pod = ds["spec"]["template"]["spec"];
  EXPECT_TRUE(pod["hostPID"].as<bool>(false)) << "the reclaimer judges containers' processes from the host";
  std::map<std::string, std::string> host_paths;  // volume -> host path
  for (const auto& v : pod["volumes"]) {
    if (v["hostPath"]) host_paths[v["name"].as<std::string>()] = v["hostPath"]["path"].as<std::string>();
  }
  const YAML::Node plugin = pod["containers"][0];
  std::map<std::string, std::string> mounted;  // container path -> host path
  for (const auto& m : plugin["volumeMounts"]) {
    mounted[m["mountPath"].as<std::string>()] = host_paths[m["name"].as<std::string>()];
  }
  // Paths handed to the kubelet are host paths, so each is mounted at itself.
  for (const char* path : {kDefaultDevicePluginDir, "/var/lib/kubelet/pod-resources", "/run/gpuslice",
                           "/var/lib/gpuslice/lib", "/dev", kDefaultCdiDir, dra::kDefaultRegistryDir}) {
    EXPECT_EQ(mounted[path], path) << path;
  }
  const std::set<std::string> args = Strings(plugin["args"]);
  EXPECT_EQ(args.count("device-plugin"), 1u);
  EXPECT_EQ(args.count("--library-dir=/var/lib/gpuslice/lib"), 1u);
  EXPECT_EQ(args.count("--state-dir=/run/gpuslice"), 1u);
  EXPECT_EQ(args.count(std::string("--cdi-dir=") + kDefaultCdiDir), 1u);
  bool node_name = false;
  for (const auto& e : plugin["env"]) {
    if (e["name"].as<std::string>() == "NODE_NAME") {
      node_name = e["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>("") == "spec.nodeName";
    }
  }
  EXPECT_TRUE(node_name) << "NODE_NAME must come from spec.nodeName";
  // The state keeper that holds the vGPUs' sealed state, in a container of
  // its own (a plugin restart keeps the memory), on the same state directory.
  const YAML::Node keeper = pod["containers"][1];
  const std::set<std::string> keeper_args = Strings(keeper["args"]);
  EXPECT_EQ(keeper_args.count("state-keeper"), 1u);
  EXPECT_EQ(keeper_args.count("--state-dir=/run/gpuslice"), 1u);
  ASSERT_TRUE(keeper["volumeMounts"].IsSequence());
  EXPECT_EQ(keeper["volumeMounts"][0]["mountPath"].as<std::string>(""), "/run/gpuslice");
  EXPECT_EQ(host_paths[keeper["volumeMounts"][0]["name"].as<std::string>("")], "/run/gpuslice");
  // The init container installs the files the plugin mounts into containers,
  // with the image's own command (the image has no shell).
  EXPECT_EQ(Strings(pod["initContainers"][0]["args"]),
            (std::set<std::string>{"install-library", "--to=/var/lib/gpuslice/lib"}));
  EXPECT_FALSE(pod["initContainers"][0]["command"]) << "the image's entry point is gpuslice";
  const std::string containerfile = testing::ReadFile(kDeploy + "/Containerfile");
  EXPECT_NE(containerfile.find("ENTRYPOINT [\"/opt/gpuslice/bin/gpuslice\"]"), std::string::npos);
  const std::string build = testing::ReadFile(kDeploy + "/build-image.sh");
  for (const std::string& file : InstalledLibraryFiles()) {
    EXPECT_NE(build.find("/opt/gpuslice/lib/" + file), std::string::npos) << file << " must be in the image";
  }
}

TEST(Manifests, SchedulerAndExtenderAgree) {
  const auto all = AllObjects();
  std::set<std::string> accounts;
  for (auto [it, end] = all.equal_range("ServiceAccount"); it != end; ++it) {
    accounts.insert(it->second["metadata"]["name"].as<std::string>());
  }
  const YAML::Node config = One(all, "KubeSchedulerConfiguration");
  EXPECT_EQ(config["apiVersion"].as<std::string>(), "kubescheduler.config.k8s.io/v1");
  const std::string scheduler_name = config["profiles"][0]["schedulerName"].as<std::string>();
  const YAML::Node ext = config["extenders"][0];
  for (const char* verb : {"filterVerb", "prioritizeVerb", "bindVerb"}) {
    EXPECT_FALSE(ext[verb].as<std::string>("").empty()) << verb;
  }
  EXPECT_EQ(ext["filterVerb"].as<std::string>(), "filter");
  EXPECT_EQ(ext["prioritizeVerb"].as<std::string>(), "prioritize");
  EXPECT_EQ(ext["bindVerb"].as<std::string>(), "bind");
  EXPECT_GT(ext["weight"].as<int>(0), 0);
  EXPECT_FALSE(ext["nodeCacheCapable"].as<bool>(true)) << "the extender reads annotations from full Node objects";
  std::set<std::string> managed;
  for (const auto& r : ext["managedResources"]) managed.insert(r["name"].as<std::string>());
  EXPECT_EQ(managed, (std::set<std::string>{kVcoreResource, kVmemoryResource}));

  const YAML::Node deployment = One(all, "Deployment");
  CheckPodTemplate(deployment, accounts);
  const YAML::Node pod = deployment["spec"]["template"]["spec"];
  bool config_map = false;
  for (const auto& v : pod["volumes"])
    config_map |= v["configMap"]["name"].as<std::string>("") == "gpuslice-scheduler-config";
  EXPECT_TRUE(config_map);
  std::set<std::string> extender_args;
  for (const auto& c : pod["containers"]) {
    if (c["name"].as<std::string>() == "extender") extender_args = Strings(c["args"]);
  }
  // urlPrefix "http://127.0.0.1:8900/gpuslice" = --listen + --url-prefix.
  const std::string url = ext["urlPrefix"].as<std::string>();
  const std::string host_port = url.substr(7, url.find('/', 7) - 7);
  const std::string prefix = url.substr(url.find('/', 7));
  EXPECT_EQ(extender_args.count("scheduler-extender"), 1u);
  EXPECT_EQ(extender_args.count("--listen=" + host_port), 1u) << host_port;
  EXPECT_EQ(extender_args.count("--url-prefix=" + prefix), 1u) << prefix;
  EXPECT_EQ(host_port.rfind("127.0.0.1:", 0), 0u) << "the extender listens on loopback only";

  const YAML::Node example = One(all, "Pod");
  EXPECT_EQ(example["spec"]["schedulerName"].as<std::string>(), scheduler_name);
}

TEST(Manifests, TheExamplePodIsAValidRequest) {
  const YAML::Node example = One(AllObjects(), "Pod");
  auto request = ParsePodRequest(ToJson(example));
  ASSERT_TRUE(request.ok()) << request.status().message();
  ASSERT_EQ(request->containers.size(), 1u);
  EXPECT_EQ(request->containers[0].vcore, 50u);
  EXPECT_EQ(request->containers[0].vmemory_units * kVmemoryUnitBytes, 4ull << 30);
  EXPECT_EQ(request->priority_level, "lc");
}

}  // namespace
}  // namespace gpuslice::k8s
