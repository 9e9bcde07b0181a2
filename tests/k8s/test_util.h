// test_util.h — small helpers shared by the Kubernetes tests: fixtures,
// temporary directories, and waiting for a condition with a deadline (tests
// never sleep to synchronise).
#ifndef GPUSLICE_TESTS_K8S_TEST_UTIL_H_
#define GPUSLICE_TESTS_K8S_TEST_UTIL_H_

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace gpuslice::k8s::testing {

// The text of tests/k8s/fixtures/<name>.
std::string ReadFixture(const std::string& name);
nlohmann::json FixtureJson(const std::string& name);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& text);

// A directory under $TMPDIR, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Polls `condition` until it holds or `timeout` passes; returns the last result.
bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout = std::chrono::seconds(20));

// A Kubernetes Pod object for the tests: containers as (name, vcore, vmemory).
nlohmann::json MakePod(const std::string& ns, const std::string& name, const std::string& uid,
                       const std::vector<std::tuple<std::string, int, int>>& containers,
                       const nlohmann::json& annotations = nlohmann::json::object(), const std::string& node = "");
nlohmann::json MakeNode(const std::string& name, const nlohmann::json& annotations = nlohmann::json::object());

// A ResourceClaim (resource.k8s.io/v1) as the scheduler leaves it: request
// "gpu" allocated on `device` of pool `node` with `consumedCapacity` cores
// and memory (quantities), and, unless null, `parameters` as the opaque
// config of the gpuslice driver.
nlohmann::json MakeDraClaim(const std::string& ns, const std::string& name, const std::string& uid,
                            const std::string& node, const std::string& device, const std::string& cores,
                            const std::string& memory, const nlohmann::json& parameters);

// Checks what CDI 1.1 requires of a spec (github.com/cncf-tags/container-device-interface,
// SPEC.md): version, kind vendor/class, device names, and the shape of each
// edit. Adds gtest failures.
void ExpectValidCdi(const nlohmann::json& spec);

}  // namespace gpuslice::k8s::testing

#endif  // GPUSLICE_TESTS_K8S_TEST_UTIL_H_
