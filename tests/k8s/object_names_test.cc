// Kubernetes object names as k8s/object_names.h checks them: what the API
// server accepts passes; anything that could change a request's path fails.
#include "k8s/object_names.h"

#include <gtest/gtest.h>

#include <string>

namespace gpuslice::k8s {
namespace {

TEST(ObjectNames, SubdomainsAreKubernetesNames) {
  for (const char* good : {"a", "train", "gpu-node-a", "ip-10-0-0-1.ec2.internal", "0", "web-7f9c-x2k4"}) {
    EXPECT_TRUE(CheckSubdomainName("pod name", good).ok()) << good;
  }
  const std::string part(63, 'a');
  const std::string longest = part + "." + part + "." + part + "." + std::string(61, 'a');  // 253
  EXPECT_TRUE(CheckSubdomainName("node name", longest).ok());
  EXPECT_FALSE(CheckSubdomainName("node name", longest + "a").ok());
  for (const char* bad : {"", "p/../../../kube-system/secrets", "..", "a/b", "a..b", ".a", "a.", "-a", "a-", "A", "a_b",
                          "a b", "a?b", "a%2Fb", "a\nb", "a.-b"}) {
    const Status s = CheckSubdomainName("pod name", bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("pod name \""), std::string::npos) << s.message();
  }
  EXPECT_FALSE(CheckSubdomainName("node name", std::string(254, 'a')).ok());
  EXPECT_FALSE(CheckSubdomainName("node name", std::string(64, 'a')).ok());  // a part is a label
}

TEST(ObjectNames, NamespacesAreLabels) {
  EXPECT_TRUE(CheckLabelName("namespace", "kube-system").ok());
  EXPECT_TRUE(CheckLabelName("namespace", std::string(63, 'a')).ok());
  for (const std::string& bad : {std::string(), std::string(64, 'a'), std::string("a.b"), std::string("../x"),
                                 std::string("ml/pods"), std::string("Ml")}) {
    EXPECT_FALSE(CheckLabelName("namespace", bad).ok()) << bad;
  }
}

TEST(ObjectNames, TheErrorShowsAPrintableShortValue) {
  const Status s = CheckSubdomainName("pod name", std::string("a\x01") + std::string(200, 'b'));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("pod name \"a?bbb"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("...\""), std::string::npos) << s.message();
  EXPECT_LT(s.message().size(), 300u);
}

}  // namespace
}  // namespace gpuslice::k8s
