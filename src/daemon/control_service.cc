#include "daemon/control_service.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "node/vgpu_owner.h"

namespace gpuslice::daemon {
namespace {

namespace pb = control::v1;

grpc::Status ToGrpc(const node::ApiStatus& s) {
  switch (s.code()) {
    case node::ApiCode::kOk: return grpc::Status::OK;
    case node::ApiCode::kInvalidArgument: return {grpc::StatusCode::INVALID_ARGUMENT, s.message()};
    case node::ApiCode::kNotFound: return {grpc::StatusCode::NOT_FOUND, s.message()};
    case node::ApiCode::kAlreadyExists: return {grpc::StatusCode::ALREADY_EXISTS, s.message()};
    case node::ApiCode::kFailedPrecondition: return {grpc::StatusCode::FAILED_PRECONDITION, s.message()};
    case node::ApiCode::kPermissionDenied:
      return {grpc::StatusCode::PERMISSION_DENIED, s.message()};
    case node::ApiCode::kInternal: break;
  }
  return {grpc::StatusCode::INTERNAL, s.message()};
}

grpc::Status Invalid(const std::string& message) { return {grpc::StatusCode::INVALID_ARGUMENT, message}; }

// Proto3 enums are open: any int may arrive. Unspecified = nullopt.
bool FromProto(int value, std::optional<core::Priority>* out) {
  switch (value) {
    case pb::PRIORITY_UNSPECIFIED: *out = std::nullopt; return true;
    case pb::PRIORITY_BEST_EFFORT: *out = core::Priority::kBestEffort; return true;
    case pb::PRIORITY_LATENCY_CRITICAL: *out = core::Priority::kLatencyCritical; return true;
    default: return false;
  }
}

pb::Priority ToProto(core::Priority p) {
  return p == core::Priority::kLatencyCritical ? pb::PRIORITY_LATENCY_CRITICAL : pb::PRIORITY_BEST_EFFORT;
}

constexpr char kBadPriority[] =
    "priority: unknown value; use PRIORITY_BEST_EFFORT or PRIORITY_LATENCY_CRITICAL (CLI: --priority be|lc)";

void ToProto(const node::LcLatencyView& lc, pb::LcLatency* out) {
  out->set_requests(lc.lifetime.count);
  out->set_sum_seconds(static_cast<double>(lc.lifetime.sum_ns) / 1e9);
  for (uint64_t n : lc.lifetime.buckets) out->add_bucket_counts(n);
  if (lc.p50_seconds) out->set_p50_seconds(*lc.p50_seconds);
  if (lc.p99_seconds) out->set_p99_seconds(*lc.p99_seconds);
  if (lc.window_seconds) out->set_window_seconds(*lc.window_seconds);
  out->set_window_requests(lc.window_requests);
}

}  // namespace

void ToProto(const node::VgpuView& view, pb::Vgpu* out) {
  out->set_name(view.name);
  out->set_dir(view.dir);
  out->set_priority(ToProto(view.priority));
  out->set_priority_level(view.priority_level);
  out->set_priority_rank(view.priority_rank);
  out->set_persistent(view.persistent);
  out->set_suspendable(view.suspendable);
  out->set_memory_waits(static_cast<uint32_t>(view.memory_waits.size()));
  uint64_t wait_bytes = 0;
  for (const core::MemoryWait& w : view.memory_waits) wait_bytes += w.bytes;
  out->set_memory_wait_bytes(wait_bytes);
  out->set_generation(view.generation);
  out->set_has_members(view.has_members);
  out->set_state(view.corrupt.empty() ? "ok" : "corrupt");
  out->set_state_detail(view.corrupt);
  if (view.power_cap_watts) out->set_power_cap_watts(*view.power_cap_watts);
  if (view.owner_uid) out->set_owner_uid(*view.owner_uid);
  for (const auto& d : view.devices) {
    pb::VgpuDevice* pd = out->add_devices();
    if (d.gpu_index) pd->set_gpu_index(*d.gpu_index);
    pd->set_gpu_uuid(d.gpu_uuid);
    pd->set_memory_total_bytes(d.memory_total_bytes);
    pd->set_memory_unlimited(d.memory_limit_bytes == core::kUnlimited);
    pd->set_memory_limit_bytes(d.memory_limit_bytes == core::kUnlimited ? 0 : d.memory_limit_bytes);
    pd->set_memory_used_bytes(d.memory_used_bytes);
    pd->set_compute_share_pct(d.compute_share_pct);
    pd->set_compute_cap_pct(d.compute_cap_pct);
    pd->set_effective_compute_cap_pct(d.effective_compute_cap_pct);
    pd->set_power_budget_pct(d.power_budget_pct);
    pd->set_timeslice_us(d.timeslice_us);
    pd->set_timeslice_beside_lc_us(d.timeslice_beside_lc_us);
    pd->set_applied_timeslice_us(d.applied_timeslice_us);
    if (d.compute_measured_ratio) pd->set_compute_measured_ratio(*d.compute_measured_ratio);
  }
  for (const auto& p : view.processes) {
    pb::VgpuProcess* pp = out->add_processes();
    pp->set_pid(p.pid);
    pp->set_same_pid_namespace(p.same_pid_namespace);
    for (uint64_t used : p.memory_used_bytes) pp->add_memory_used_bytes(used);
    for (uint64_t applied : p.applied_timeslice_us) pp->add_applied_timeslice_us(applied);
  }
  out->set_denied_allocations(view.denied_allocations);
  out->set_reaped_processes(view.reaped_processes);
  out->set_timeslice_applications(view.timeslice_applications);
  out->set_timeslice_failures(view.timeslice_failures);
  out->set_gate_waits(view.gate_waits);
  out->set_hold_budget_spent(view.hold_budget_spent);
  ToProto(view.lc_latency, out->mutable_lc_latency());
  for (const node::TaskLevelView& level : view.task_levels) {
    pb::TaskLevel* pt = out->add_task_levels();
    pt->set_level(level.level);
    pt->set_failed(level.failed);
    pt->set_slo_misses(level.slo_misses);
    ToProto(level.latency, pt->mutable_latency());
  }
  out->set_suspend_state(view.suspend_state);
  out->set_suspend_detail(view.suspend_detail);
  out->set_suspended_by(view.suspended_by);
  out->set_suspended_bytes(view.suspended_bytes);
  out->set_suspended_seconds_total(view.suspended_seconds_total);
  out->set_suspend_bytes_moved_total(view.suspend_bytes_moved_total);
  out->set_suspends(view.suspends);
  out->set_resumes(view.resumes);
  out->set_last_suspend_seconds(view.last_suspend_seconds);
  out->set_last_resume_seconds(view.last_resume_seconds);
}

void ToProto(const node::NodeDevices& devices, pb::GetDevicesResponse* response) {
  response->set_node(devices.node);
  response->set_driver_version(devices.driver_version);
  for (const auto& g : devices.gpus) {
    pb::Gpu* out = response->add_gpus();
    out->set_index(g.index);
    out->set_uuid(g.uuid_text);
    out->set_name(g.name);
    out->set_memory_total_bytes(g.memory_total_bytes);
    out->set_pci_bus_id(g.pci_bus_id);
  }
  for (const auto& l : devices.links) {
    pb::Link* out = response->add_links();
    out->set_a(l.a);
    out->set_b(l.b);
    out->set_type(port::LinkTypeName(l.type));
    out->set_nvlinks(l.nvlinks);
  }
}

void ControlService::AddUsage(const GpuUsageMeter::Totals& totals, const GpuUsageMeter::Window& window,
                              pb::Vgpu* vgpu) const {
  const auto at = [](const auto& map, const auto& key) -> std::optional<double> {
    auto it = map.find(key);
    return it != map.end() ? std::optional<double>(it->second) : std::nullopt;
  };
  for (pb::VgpuDevice& d : *vgpu->mutable_devices()) {
    if (!d.has_gpu_index()) continue;
    const auto key = std::make_pair(d.gpu_index(), vgpu->name());
    d.set_gpu_seconds(at(totals.gpu_seconds, key).value_or(0));
    d.set_energy_joules(at(totals.joules, key).value_or(0));
    const double seconds = at(window.seconds, d.gpu_index()).value_or(0);
    if (seconds <= 0) continue;
    // A vGPU the window saw nothing of ran 0 s there (the sampler reports
    // every GPU each pass); its processes in other pid namespaces are the
    // exception (counted under ""), as for compute_measured_ratio.
    if (d.has_compute_measured_ratio() || at(window.gpu_seconds, key)) {
      d.set_measured_recent_ratio(std::min(1.0, at(window.gpu_seconds, key).value_or(0) / seconds));
    }
    if (auto j = at(window.joules, key)) d.set_watts(*j / seconds);
    else if (d.has_measured_recent_ratio()) d.set_watts(0);
  }
}

void ControlService::AddHealth(pb::GetDevicesResponse* response) const {
  if (health_ == nullptr) return;
  const auto states = health_->Snapshot();
  for (pb::Gpu& g : *response->mutable_gpus()) {
    auto it = states.find(g.index());
    if (it == states.end()) continue;
    g.set_unhealthy(!it->second.healthy);
    g.set_health_detail(it->second.detail);
    g.set_last_xid(static_cast<uint32_t>(it->second.last_xid));
    for (const auto& [xid, n] : it->second.xid_counts) {
      pb::XidCount* c = g.add_xid_errors();
      c->set_xid(static_cast<uint32_t>(xid));
      c->set_count(n);
      c->set_critical(IsCriticalXid(xid));
    }
  }
}

grpc::Status ControlService::GetDevices(grpc::ServerContext*, const pb::GetDevicesRequest*,
                                        pb::GetDevicesResponse* response) {
  ToProto(*devices_, response);
  AddHealth(response);
  return grpc::Status::OK;
}

grpc::Status ControlService::CallerOf(const grpc::ServerContext* context, std::optional<uid_t>* uid) const {
  uid->reset();
  if (!caller_source_) return grpc::Status::OK;
  *uid = caller_source_(*context);
  if (*uid) return grpc::Status::OK;
  return {grpc::StatusCode::PERMISSION_DENIED, "the daemon cannot tell which user is calling (" + context->peer() +
                                                   "), so it changes nothing; call it through its unix socket (" +
                                                   identity_->socket_path + ")"};
}

grpc::Status ControlService::ClearGpuHealth(grpc::ServerContext* context, const pb::ClearGpuHealthRequest* request,
                                            pb::ClearGpuHealthResponse* response) {
  std::optional<uid_t> caller;
  if (grpc::Status s = CallerOf(context, &caller); !s.ok()) return s;
  if (!node::MayChange(caller, std::nullopt, manager_->operator_uid())) {
    return {grpc::StatusCode::PERMISSION_DENIED, "clearing a GPU's health is for root or the daemon's " +
                                                     node::DescribeUid(manager_->operator_uid()) +
                                                     "; ask the node's operator"};
  }
  std::vector<std::string> names(request->gpus().begin(), request->gpus().end());
  std::vector<uint32_t> indices;
  if (!names.empty()) {
    auto gpus = devices_->Select(names);
    if (!gpus.ok()) return Invalid(gpus.status().message());
    for (const auto& g : gpus.value()) indices.push_back(g.index);
  }
  if (health_ != nullptr) health_->Clear(indices);
  pb::GetDevicesResponse devices;
  ToProto(*devices_, &devices);
  AddHealth(&devices);
  for (const auto& g : devices.gpus()) *response->add_gpus() = g;
  return grpc::Status::OK;
}

grpc::Status ControlService::CreateVgpu(grpc::ServerContext* context, const pb::CreateVgpuRequest* request,
                                        pb::CreateVgpuResponse* response) {
  node::CreateOptions o;
  if (grpc::Status s = CallerOf(context, &o.caller); !s.ok()) return s;
  o.name = request->name();
  o.gpus.assign(request->gpus().begin(), request->gpus().end());
  if (request->has_memory_limit_bytes()) o.memory_limit_bytes = request->memory_limit_bytes();
  if (request->has_compute_share_pct()) o.compute_share_pct = request->compute_share_pct();
  if (request->has_compute_cap_pct()) o.compute_cap_pct = request->compute_cap_pct();
  if (!FromProto(request->priority(), &o.priority)) return Invalid(kBadPriority);
  o.priority_level = request->priority_level();
  if (request->has_power_cap_watts()) o.power_cap_watts = request->power_cap_watts();
  o.join_existing = request->join_existing();
  o.persistent = request->persistent();
  o.suspendable = request->suspendable();
  o.client_pid = request->client_pid();
  node::CreateResult result;
  if (node::ApiStatus s = manager_->Create(o, &result); !s.ok()) return ToGrpc(s);
  response->set_name(result.name);
  response->set_dir(result.dir);
  response->set_created(result.created);
  for (const auto& uuid : result.gpu_uuids) response->add_gpu_uuids(uuid);
  return grpc::Status::OK;
}

grpc::Status ControlService::ListVgpus(grpc::ServerContext*, const pb::ListVgpusRequest* request,
                                       pb::ListVgpusResponse* response) {
  std::vector<node::VgpuView> views;
  if (node::ApiStatus s = manager_->List(request->name(), &views); !s.ok()) return ToGrpc(s);
  for (const auto& v : views) ToProto(v, response->add_vgpus());
  if (meter_ != nullptr) {
    const auto totals = meter_->totals();
    const auto window = meter_->Recent(kUsageWindowUs);
    for (pb::Vgpu& v : *response->mutable_vgpus()) AddUsage(totals, window, &v);
    response->set_usage_window_seconds(static_cast<double>(kUsageWindowUs) / 1e6);
  }
  return grpc::Status::OK;
}

grpc::Status ControlService::ResizeVgpu(grpc::ServerContext* context, const pb::ResizeVgpuRequest* request,
                                        pb::ResizeVgpuResponse* response) {
  node::ResizeOptions o;
  if (grpc::Status s = CallerOf(context, &o.caller); !s.ok()) return s;
  o.name = request->name();
  if (request->memory_unlimited() && request->has_memory_limit_bytes()) {
    return Invalid("memory_limit_bytes and memory_unlimited contradict each other; give one");
  }
  if (request->has_memory_limit_bytes()) o.memory_limit_bytes = request->memory_limit_bytes();
  if (request->memory_unlimited()) o.memory_limit_bytes = core::kUnlimited;
  if (request->has_compute_share_pct()) o.compute_share_pct = request->compute_share_pct();
  if (request->has_compute_cap_pct()) o.compute_cap_pct = request->compute_cap_pct();
  if (!FromProto(request->priority(), &o.priority)) return Invalid(kBadPriority);
  o.priority_level = request->priority_level();
  o.force = request->force();
  if (request->has_power_cap_watts()) o.power_cap_watts = request->power_cap_watts();
  node::VgpuView after;
  if (node::ApiStatus s = manager_->Resize(o, &after); !s.ok()) return ToGrpc(s);
  ToProto(after, response->mutable_vgpu());
  if (meter_ != nullptr) AddUsage(meter_->totals(), meter_->Recent(kUsageWindowUs), response->mutable_vgpu());
  return grpc::Status::OK;
}

grpc::Status ControlService::DeleteVgpu(grpc::ServerContext* context, const pb::DeleteVgpuRequest* request,
                                        pb::DeleteVgpuResponse* response) {
  std::optional<uid_t> caller;
  if (grpc::Status s = CallerOf(context, &caller); !s.ok()) return s;
  bool deleted = false;
  if (node::ApiStatus s =
          manager_->Delete(request->name(), request->if_unused(), request->client_pid(), &deleted, caller);
      !s.ok()) {
    return ToGrpc(s);
  }
  response->set_deleted(deleted);
  return grpc::Status::OK;
}

grpc::Status ControlService::SuspendVgpu(grpc::ServerContext* context, const pb::SuspendVgpuRequest* request,
                                         pb::SuspendVgpuResponse* response) {
  node::SuspendOptions o;
  if (grpc::Status s = CallerOf(context, &o.caller); !s.ok()) return s;
  o.name = request->name();
  if (request->lock_timeout_ms() > 0) o.lock_timeout = std::chrono::milliseconds(request->lock_timeout_ms());
  node::VgpuView after;
  if (node::ApiStatus s = manager_->Suspend(o, &after); !s.ok()) return ToGrpc(s);
  ToProto(after, response->mutable_vgpu());
  return grpc::Status::OK;
}

grpc::Status ControlService::ResumeVgpu(grpc::ServerContext* context, const pb::ResumeVgpuRequest* request,
                                        pb::ResumeVgpuResponse* response) {
  std::optional<uid_t> caller;
  if (grpc::Status s = CallerOf(context, &caller); !s.ok()) return s;
  node::VgpuView after;
  if (node::ApiStatus s = manager_->Resume(request->name(), &after, caller); !s.ok()) return ToGrpc(s);
  ToProto(after, response->mutable_vgpu());
  return grpc::Status::OK;
}

grpc::Status ControlService::MigrateVgpu(grpc::ServerContext* context, const pb::MigrateVgpuRequest* request,
                                         pb::MigrateVgpuResponse* response) {
  node::MigrateOptions o;
  if (grpc::Status s = CallerOf(context, &o.caller); !s.ok()) return s;
  o.name = request->name();
  o.gpu = request->gpu();
  if (request->lock_timeout_ms() > 0) o.lock_timeout = std::chrono::milliseconds(request->lock_timeout_ms());
  node::VgpuView after;
  if (node::ApiStatus s = manager_->Migrate(o, &after); !s.ok()) return ToGrpc(s);
  ToProto(after, response->mutable_vgpu());
  return grpc::Status::OK;
}

grpc::Status ControlService::GetStatus(grpc::ServerContext*, const pb::GetStatusRequest*,
                                       pb::GetStatusResponse* response) {
  response->set_pid(identity_->pid);
  response->set_version(identity_->version);
  response->set_start_time_unix_seconds(identity_->start_time_unix_seconds);
  response->set_state_dir(identity_->state_dir);
  response->set_socket_path(identity_->socket_path);
  response->set_metrics_address(identity_->metrics_address);
  return grpc::Status::OK;
}

}  // namespace gpuslice::daemon
