// container_runner.h — runs gpuslice's processes for the kubelet-side tests
// the way a node would: natively, or in a container of the image built by
// deploy/k8s/build-image.sh, and applies a CDI device's edits to an
// application's container by hand, as a container runtime does.
//
// The container mode is on when GPUSLICE_TEST_IMAGE names an image (set by
// tests/k8s/image_test.sh, which builds it); containers run under podman
// with runc, on the host's network (the fake API server listens on
// loopback), with every host path the process needs mounted at the same
// path, so arguments and results read the same in both modes.
//
// Thread-compatible: one test thread drives each object.
#ifndef GPUSLICE_TESTS_K8S_CONTAINER_RUNNER_H_
#define GPUSLICE_TESTS_K8S_CONTAINER_RUNNER_H_

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpuslice::k8s::testing {

// GPUSLICE_TEST_IMAGE and GPUSLICE_TEST_APP_IMAGE, or "".
std::string PluginImage();
std::string AppImage();

// `gpuslice ARGS` as a child process.
class GpusliceProcess {
 public:
  struct Options {
    std::string binary;                     // the native binary (unused in a container)
    std::vector<std::string> args;          // after the binary
    std::vector<std::string> env;           // NAME=VALUE, the process's whole environment
    std::vector<std::string> shared_paths;  // host paths it uses, mounted at the same path in a container
    std::string log_file;                   // its stdout and stderr
  };

  GpusliceProcess() = default;
  ~GpusliceProcess();  // SIGKILL if still running
  GpusliceProcess(const GpusliceProcess&) = delete;
  GpusliceProcess& operator=(const GpusliceProcess&) = delete;

  // Spawns it; false (and the reason in the log file) on failure.
  bool Start(const Options& options);
  // SIGTERM, then waits up to 10 s for the exit (SIGKILL after that).
  // Returns the wait status, or -1 when it had to be killed.
  int Stop();
  bool running() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

// Runs `gpuslice ARGS` to completion in the plugin image (or natively with
// `binary`), with `shared_paths` mounted; returns the exit code, and its
// output in `*output`.
int RunGpuslice(const std::string& binary, const std::vector<std::string>& args,
                const std::vector<std::string>& shared_paths, std::string* output);

// Runs ARGV in a container of AppImage() with what CDI device `device_name`
// of `spec` edits in, applied as a runtime applies them: the spec's and the
// device's containerEdits, mounts as binds (with their options), env as
// is, plus `extra_env`. Device nodes are not created: the fake driver needs
// none. Returns the exit code and the output in `*output`.
int RunWithCdiDevice(const nlohmann::json& spec, const std::string& device_name, const std::vector<std::string>& argv,
                     const std::vector<std::string>& extra_env, std::string* output);

// True when `text` holds each of `parts` in this order (an application's
// output lines, with log lines of the library between them).
bool InOrder(const std::string& text, const std::vector<std::string>& parts);

}  // namespace gpuslice::k8s::testing

#endif  // GPUSLICE_TESTS_K8S_CONTAINER_RUNNER_H_
