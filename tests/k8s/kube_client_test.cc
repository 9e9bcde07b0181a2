// The Kubernetes API client over real HTTPS (a throwaway CA) with a bearer
// token, against the fake API server: each call, and each way it can fail.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "fake_api_server.h"
#include "k8s/kube_http_client.h"
#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using nlohmann::json;
using testing::FakeApiServer;
using testing::MakeNode;
using testing::MakePod;
using testing::TempDir;

class KubeClientTest : public ::testing::Test {
 protected:
  KubeClientTest() : api_({true, "tok-123", dir_.path()}) {
    testing::WriteFile(dir_ / "token", "tok-123\n");
    api_.PutPod(MakePod("ml", "a", "uid-a", {{"main", 50, 8}}, json::object(), "node-a"));
    api_.PutPod(MakePod("ml", "b", "uid-b", {{"main", 50, 8}}, json::object(), "node-b"));
    api_.PutPod(MakePod("ml", "c", "uid-c", {{"main", 50, 8}}));
    api_.PutNode(MakeNode("node-a"));
    client_ = NewKubeHttpClient({api_.url(), dir_ / "token", api_.ca_file()});
  }
  TempDir dir_;
  FakeApiServer api_;
  std::unique_ptr<KubeApi> client_;
};

TEST_F(KubeClientTest, ReadsPatchesAndBinds) {
  auto pod = client_->GetPod("ml", "a");
  ASSERT_TRUE(pod.ok()) << pod.status().message();
  EXPECT_EQ((*pod)["metadata"]["uid"], "uid-a");
  auto on_a = client_->ListPodsOnNode("node-a");
  ASSERT_TRUE(on_a.ok()) << on_a.status().message();
  ASSERT_EQ(on_a->size(), 1u);
  EXPECT_EQ((*on_a)[0]["metadata"]["name"], "a");
  ASSERT_TRUE(client_->AnnotateNode("node-a", {{"gpuslice.io/allocated", "{\"x\": 1}"}}).ok());
  EXPECT_EQ(api_.NodeAnnotation("node-a", "gpuslice.io/allocated"), "{\"x\": 1}");
  auto node = client_->GetNode("node-a");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ((*node)["metadata"]["labels"]["kubernetes.io/hostname"], "node-a");  // a merge patch keeps the rest
  ASSERT_TRUE(client_->AnnotatePod("ml", "c", {{"gpuslice.io/gpus", "{}"}}).ok());
  ASSERT_TRUE(client_->BindPod("ml", "c", "uid-c", "node-a").ok());
  EXPECT_EQ(api_.Pod("ml", "c")["spec"]["nodeName"], "node-a");
  EXPECT_EQ(api_.Pod("ml", "c")["metadata"]["annotations"]["gpuslice.io/gpus"], "{}");
}

TEST_F(KubeClientTest, ErrorsNameTheCallStatusAndFix) {
  auto missing = client_->GetPod("ml", "zzz");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(
      missing.status().message().find("kube API GET /api/v1/namespaces/ml/pods/zzz: HTTP 404: pods \"zzz\" not found"),
      std::string::npos)
      << missing.status().message();
  api_.FailNext("PATCH /api/v1/nodes/node-a", 403);
  Status forbidden = client_->AnnotateNode("node-a", {{"k", "v"}});
  EXPECT_NE(forbidden.message().find("HTTP 403"), std::string::npos);
  EXPECT_NE(forbidden.message().find("ClusterRole"), std::string::npos);
  Status conflict = client_->BindPod("ml", "a", "uid-a", "node-b");  // already bound
  EXPECT_NE(conflict.message().find("HTTP 409"), std::string::npos) << conflict.message();

  testing::WriteFile(dir_ / "wrong", "nope");
  auto bad_token = NewKubeHttpClient({api_.url(), dir_ / "wrong", api_.ca_file()})->GetNode("node-a");
  EXPECT_NE(bad_token.status().message().find("HTTP 401"), std::string::npos);
  EXPECT_NE(bad_token.status().message().find("token was refused"), std::string::npos);
  auto no_token = NewKubeHttpClient({api_.url(), dir_ / "absent", api_.ca_file()})->GetNode("node-a");
  EXPECT_NE(no_token.status().message().find("cannot read the service-account token"), std::string::npos);

  // A server whose certificate is not from the CA we trust is not talked to.
  TempDir other;
  FakeApiServer impostor({true, "", other.path()});
  auto untrusted = NewKubeHttpClient({impostor.url(), "", api_.ca_file()})->GetNode("node-a");
  ASSERT_FALSE(untrusted.ok());
  EXPECT_NE(untrusted.status().message().find("no answer from"), std::string::npos) << untrusted.status().message();
  auto nowhere = NewKubeHttpClient({"https://127.0.0.1:1", "", api_.ca_file(), 500, 500})->GetNode("node-a");
  EXPECT_NE(nowhere.status().message().find("check the address"), std::string::npos);
}

TEST_F(KubeClientTest, NamesThatCouldChangeThePathAreRefusedBeforeAnyRequest) {
  EXPECT_FALSE(client_->GetPod("ml", "a/../../../../api/v1/namespaces/kube-system/secrets").ok());
  EXPECT_FALSE(client_->GetPod("../kube-system", "a").ok());
  EXPECT_FALSE(client_->GetNode("node-a/..").ok());
  EXPECT_FALSE(client_->ListPodsOnNode("node-a&labelSelector=x").ok());
  EXPECT_FALSE(client_->AnnotatePod("ml", "a/status", {{"k", "v"}}).ok());
  EXPECT_FALSE(client_->AnnotateNode("node-a/status", {{"k", "v"}}).ok());
  EXPECT_FALSE(client_->BindPod("ml", "a", "uid-a", "node-a/../x").ok());
  EXPECT_FALSE(client_->GetResourceClaim("ml", "claim/../x").ok());
  EXPECT_FALSE(client_->ApplyResourceSlice(json{{"metadata", {{"name", "../x"}}}}).ok());
  const auto refused = client_->GetPod("ml", "a/b");
  EXPECT_NE(refused.status().message().find("pod name \"a/b\" is not a Kubernetes object name"), std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(api_.Requests().empty());
  EXPECT_TRUE(client_->GetPod("ml", "a").ok());  // a good name still goes through
}

TEST(KubeClientConfig, InClusterDefaults) {
  unsetenv("KUBERNETES_SERVICE_HOST");
  KubeClientConfig empty;
  Status s = CompleteFromCluster(empty);
  EXPECT_NE(s.message().find("pass --kube-api-url"), std::string::npos);
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
  KubeClientConfig config;
  ASSERT_TRUE(CompleteFromCluster(config).ok());
  EXPECT_EQ(config.server, "https://10.96.0.1:6443");
  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  KubeClientConfig v6;
  ASSERT_TRUE(CompleteFromCluster(v6).ok());
  EXPECT_EQ(v6.server, "https://[fd00::1]:6443");
  KubeClientConfig given{"http://127.0.0.1:8080", "", ""};
  ASSERT_TRUE(CompleteFromCluster(given).ok());
  EXPECT_EQ(given.server, "http://127.0.0.1:8080");
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
}

}  // namespace
}  // namespace gpuslice::k8s
