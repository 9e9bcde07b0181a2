// fake_kube_api.h — KubeApi in memory, for tests that need pods without a
// server (the allocation tables). Thread-safe; counts calls.
#ifndef GPUSLICE_TESTS_K8S_FAKE_KUBE_API_H_
#define GPUSLICE_TESTS_K8S_FAKE_KUBE_API_H_

#include <map>
#include <mutex>
#include <string>

#include "k8s/kube_api.h"

namespace gpuslice::k8s::testing {

class FakeKubeApi final : public KubeApi {
 public:
  void PutPod(const nlohmann::json& pod) {
    std::lock_guard<std::mutex> lock(mu_);
    pods_[pod["metadata"]["namespace"].get<std::string>() + "/" + pod["metadata"]["name"].get<std::string>()] = pod;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    pods_.clear();
  }
  void SetListError(std::string message) {
    std::lock_guard<std::mutex> lock(mu_);
    list_error_ = std::move(message);
  }
  std::map<std::string, std::string> NodeAnnotations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return node_annotations_;
  }

  StatusOr<nlohmann::json> GetPod(const std::string& ns, const std::string& name) override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = pods_.find(ns + "/" + name);
    if (it == pods_.end()) return Status::Error("HTTP 404: pod not found");
    return it->second;
  }
  StatusOr<nlohmann::json> ListPodsOnNode(const std::string& node) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!list_error_.empty()) return Status::Error(list_error_);
    nlohmann::json items = nlohmann::json::array();
    for (const auto& [key, pod] : pods_) {
      if (pod["spec"].value("nodeName", "") == node) items.push_back(pod);
    }
    return items;
  }
  StatusOr<nlohmann::json> GetNode(const std::string&) override { return Status::Error("HTTP 404: no nodes here"); }
  Status AnnotatePod(const std::string&, const std::string&, const std::map<std::string, std::string>&) override {
    return Status::Ok();
  }
  Status AnnotateNode(const std::string&, const std::map<std::string, std::string>& annotations) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, v] : annotations) node_annotations_[k] = v;
    return Status::Ok();
  }
  Status BindPod(const std::string&, const std::string&, const std::string&, const std::string&) override {
    return Status::Ok();
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, nlohmann::json> pods_;
  std::map<std::string, std::string> node_annotations_;
  std::string list_error_;
};

}  // namespace gpuslice::k8s::testing

#endif  // GPUSLICE_TESTS_K8S_FAKE_KUBE_API_H_
