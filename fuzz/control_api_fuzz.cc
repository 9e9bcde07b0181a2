// control_api_fuzz.cc — fuzz target for the daemon's control API message
// handling (src/daemon/control_service.h).
//
// Input: one selector byte choosing the RPC, then the bytes of that RPC's
// request message (protobuf wire format). The request is parsed as gRPC
// would, then handed to the service's handler exactly as gRPC calls it,
// against a real VgpuManager on a private state directory with two made-up
// GPUs. No handler may crash, hang, answer an error in more than one short
// line, or leave the state inconsistent: after every input, the state is
// checked (every listed vGPU has a valid name and a directory) and then
// emptied, so inputs stay independent.
//
// Built with libFuzzer under clang (fuzz/CMakeLists.txt), and replayed over
// the corpus in fuzz/corpus/control_api_fuzz/ as an ordinary test under g++.
// fuzz/control_api_corpus.sh regenerates the seed inputs.
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "core/vgpu_store.h"
#include "daemon/control_service.h"
#include "node/schedule_worker.h"
#include "node/vgpu_manager.h"
#include "node/vgpu_view.h"
#include "fuzz_target.h"

namespace {

namespace pb = gpuslice::control::v1;
using gpuslice::daemon::ControlService;

struct World {
  std::string root;
  gpuslice::node::NodeDevices devices;
  gpuslice::daemon::DaemonIdentity identity;
  std::unique_ptr<gpuslice::node::ScheduleWorker> schedule;
  std::unique_ptr<gpuslice::node::VgpuManager> manager;
  std::unique_ptr<ControlService> service;

  World() {
    spdlog::set_level(spdlog::level::off);     // the manager logs every create and delete
    google::protobuf::SetLogHandler(nullptr);  // nor every string that is not UTF-8
    char tmpl[] = "/tmp/gpuslice-fuzz-XXXXXX";
    root = mkdtemp(tmpl);
    for (uint32_t i = 0; i < 2; ++i) {
      gpuslice::port::GpuInfo g;
      g.index = i;
      g.uuid[0] = 0xfa;
      g.uuid[15] = static_cast<uint8_t>(i);
      g.uuid_text = gpuslice::node::FormatGpuUuid(g.uuid.data());
      g.name = "Fuzz GPU";
      g.memory_total_bytes = 1ull << 30;
      devices.gpus.push_back(g);
    }
    // The real node schedule, inline: it writes every resize (node_schedule.h).
    schedule = std::make_unique<gpuslice::node::ScheduleWorker>(
        gpuslice::node::ScheduleWorker::NodeSchedule(gpuslice::core::VgpuStore(root), {}),
        gpuslice::node::ScheduleWorker::Passes::kInline);
    gpuslice::node::ManagerOptions options;
    options.grace = std::chrono::milliseconds(0);
    manager = std::make_unique<gpuslice::node::VgpuManager>(gpuslice::core::VgpuStore(root), &devices, schedule.get(),
                                                              options);
    service = std::make_unique<ControlService>(manager.get(), &devices, &identity);
    atexit([] { std::filesystem::remove_all(Get().root); });
  }
  static World& Get() {
    static World* world = new World();  // never destroyed: libFuzzer may exit from any thread
    return *world;
  }
};

template <typename Request, typename Response, typename Handler>
void Call(const uint8_t* data, size_t size, Handler handler) {
  Request request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  Response response;
  // The handlers do not use the context; gRPC would pass its own.
  const grpc::Status s = (World::Get().service.get()->*handler)(nullptr, &request, &response);
  // Bad input gets one clear line, whatever it was.
  if (s.error_message().find('\n') != std::string::npos || s.error_message().size() > 1000) {
    gpuslice::fuzz::FuzzCheckFailed("an error message is not one short line", s.error_message().c_str());
  }
}

void CheckAndReset(World& w) {
  pb::ListVgpusRequest list;
  pb::ListVgpusResponse listed;
  const grpc::Status s = w.service->ListVgpus(nullptr, &list, &listed);
  if (!s.ok()) gpuslice::fuzz::FuzzCheckFailed("listing every vGPU fails", s.error_message().c_str());
  for (const auto& v : listed.vgpus()) {
    if (!gpuslice::core::VgpuStore::ValidateName(v.name()).ok()) {
      gpuslice::fuzz::FuzzCheckFailed("a vGPU with an invalid name exists", v.name().c_str());
    }
    if (!std::filesystem::is_directory(v.dir()))
      gpuslice::fuzz::FuzzCheckFailed("a listed vGPU has no directory", v.dir().c_str());
    if (v.devices_size() < 1 || v.devices_size() > 16) {
      gpuslice::fuzz::FuzzCheckFailed("a vGPU has a device count out of range", v.name().c_str());
    }
    pb::DeleteVgpuRequest del;
    del.set_name(v.name());
    pb::DeleteVgpuResponse deleted;
    const grpc::Status d = w.service->DeleteVgpu(nullptr, &del, &deleted);
    if (!d.ok() || !deleted.deleted()) {
      gpuslice::fuzz::FuzzCheckFailed("an unused vGPU cannot be deleted", d.error_message().c_str());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  World& w = World::Get();
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  switch (data[0] % 6) {
    case 0: Call<pb::GetDevicesRequest, pb::GetDevicesResponse>(body, n, &ControlService::GetDevices); break;
    case 1: Call<pb::CreateVgpuRequest, pb::CreateVgpuResponse>(body, n, &ControlService::CreateVgpu); break;
    case 2: Call<pb::ListVgpusRequest, pb::ListVgpusResponse>(body, n, &ControlService::ListVgpus); break;
    case 3: Call<pb::ResizeVgpuRequest, pb::ResizeVgpuResponse>(body, n, &ControlService::ResizeVgpu); break;
    case 4: Call<pb::DeleteVgpuRequest, pb::DeleteVgpuResponse>(body, n, &ControlService::DeleteVgpu); break;
    case 5: {
      // A create followed by requests on the same vGPU: the message is a
      // CreateVgpuRequest whose name the others reuse.
      pb::CreateVgpuRequest create;
      if (!create.ParseFromArray(body, static_cast<int>(n))) break;
      pb::CreateVgpuResponse created;
      (void)w.service->CreateVgpu(nullptr, &create, &created);
      pb::ResizeVgpuRequest resize;
      resize.set_name(create.name());
      if (create.has_memory_limit_bytes()) resize.set_memory_limit_bytes(create.memory_limit_bytes() / 2);
      if (create.has_compute_share_pct()) resize.set_compute_share_pct(create.compute_share_pct());
      resize.set_priority(create.priority());
      resize.set_force(create.persistent());
      pb::ResizeVgpuResponse resized;
      (void)w.service->ResizeVgpu(nullptr, &resize, &resized);
      pb::DeleteVgpuRequest del;
      del.set_name(create.name());
      del.set_if_unused(create.join_existing());
      pb::DeleteVgpuResponse deleted;
      (void)w.service->DeleteVgpu(nullptr, &del, &deleted);
      break;
    }
  }
  CheckAndReset(w);
  return 0;
}
