// Stream and event entry points (streams.h), with their per-thread-stream
// (_ptsz) variants, stream capture, and the stream's device and context
// (cuStreamGetDevice, cuStreamGetCtx).
#include "streams.h"

#include <map>
#include <memory>

#include "contexts.h"
#include "graphs.h"
#include "launch.h"
#include "pools.h"

struct CUstream_st {
  int device = 0;
  int priority = 0;                 // as made, clamped to the range cuCtxGetStreamPriorityRange gives
  CUcontext context = nullptr;      // current when the stream was created
  CUgraph capture_graph = nullptr;  // non-null while capturing
  cuuint64_t capture_id = 0;        // of the current or last capture
};

struct CUevent_st {
  unsigned int flags = 0;
  uint64_t done_at_ns = 0;  // FAKE_KERNEL_US: when the work it follows is done (launch.h)
};

namespace fake_cuda {
namespace {

constexpr int kGreatestPriority = -5;  // an H100's: cuCtxGetStreamPriorityRange

struct Streams {
  std::map<CUstream, std::unique_ptr<CUstream_st>> streams;
  std::map<CUevent, std::unique_ptr<CUevent_st>> events;
  cuuint64_t next_capture_id = 1;
};

Streams& GetStreams(const Locked&) {
  static auto* streams = new Streams;
  return *streams;
}

bool IsSpecial(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

CUstream_st* Find(const Locked& locked, CUstream stream) {
  auto& streams = GetStreams(locked).streams;
  auto it = streams.find(stream);
  return it == streams.end() ? nullptr : it->second.get();
}

CUresult Create(CUstream* out, int priority = 0) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Locked locked;
  int device = 0;
  if (CUresult r = CurrentDevice(locked, &device); r != CUDA_SUCCESS) return r;
  auto stream = std::make_unique<CUstream_st>();
  stream->device = device;
  stream->context = CurrentContext(locked);
  stream->priority = priority < kGreatestPriority ? kGreatestPriority : priority > 0 ? 0 : priority;
  *out = stream.get();
  GetStreams(locked).streams.emplace(*out, std::move(stream));
  return CUDA_SUCCESS;
}

CUresult Destroy(CUstream stream) {
  Locked locked;
  CUstream_st* s = IsSpecial(stream) ? nullptr : Find(locked, stream);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (s->capture_graph != nullptr) DestroyGraph(locked, s->capture_graph);
  GetStreams(locked).streams.erase(stream);
  return CUDA_SUCCESS;
}

// cuStreamSynchronize (wait) and cuStreamQuery: all work is done at once,
// or, with FAKE_KERNEL_US, when the process's timeline says (launch.h); a
// sync is where pools give memory back.
CUresult Synchronize(CUstream stream, bool wait) {
  {
    Locked locked;
    int device = 0;
    if (CUresult r = StreamDevice(locked, stream, &device); r != CUDA_SUCCESS) return r;
    if (CapturingGraph(locked, stream) != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!wait) return WorkDoneAtNs() > NowNs() ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
  }
  WaitUntilNs(WorkDoneAtNs());  // never under the lock
  Locked locked;
  ReleasePoolsAtSync(locked);
  return CUDA_SUCCESS;
}

CUresult BeginCapture(CUstream stream) {
  Locked locked;
  if (IsSpecial(stream)) {
    int device = 0;
    if (CUresult r = CurrentDevice(locked, &device); r != CUDA_SUCCESS) return r;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream cannot capture
  }
  CUstream_st* s = Find(locked, stream);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (s->capture_graph != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  s->capture_graph = NewGraph(locked);
  s->capture_id = GetStreams(locked).next_capture_id++;
  return CUDA_SUCCESS;
}

CUresult EndCapture(CUstream stream, CUgraph* graph) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Locked locked;
  CUstream_st* s = IsSpecial(stream) ? nullptr : Find(locked, stream);
  if (s == nullptr) return IsSpecial(stream) ? CUDA_ERROR_ILLEGAL_STATE : CUDA_ERROR_INVALID_HANDLE;
  if (s->capture_graph == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  *graph = s->capture_graph;
  s->capture_graph = nullptr;
  return CUDA_SUCCESS;
}

CUresult IsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Locked locked;
  int device = 0;
  if (CUresult r = StreamDevice(locked, stream, &device); r != CUDA_SUCCESS) return r;
  *status = CapturingGraph(locked, stream) != nullptr ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                      : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

// All cuStreamGetCaptureInfo versions; the outputs a version lacks are null.
// The fake tracks no dependencies, so a capture reports none.
CUresult CaptureInfo(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                     const CUgraphNode** dependencies, const CUgraphEdgeData** edge_data,
                     size_t* num_dependencies) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Locked locked;
  int device = 0;
  if (CUresult r = StreamDevice(locked, stream, &device); r != CUDA_SUCCESS) return r;
  const CUgraph capturing = CapturingGraph(locked, stream);
  *status = capturing != nullptr ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  if (capturing != nullptr) {
    if (id != nullptr) *id = Find(locked, stream)->capture_id;
    if (graph != nullptr) *graph = capturing;
    if (dependencies != nullptr) *dependencies = nullptr;
    if (edge_data != nullptr) *edge_data = nullptr;
    if (num_dependencies != nullptr) *num_dependencies = 0;
  }
  return CUDA_SUCCESS;
}

CUevent_st* FindEvent(const Locked& locked, CUevent event) {
  auto& events = GetStreams(locked).events;
  auto it = events.find(event);
  return it == events.end() ? nullptr : it->second.get();
}

CUresult DestroyEvent(CUevent event) {
  Locked locked;
  if (GetStreams(locked).events.erase(event) == 0) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

CUresult RecordEvent(CUevent event, CUstream stream) {
  Locked locked;
  CUevent_st* e = FindEvent(locked, event);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  int device = 0;
  if (CUresult r = StreamDevice(locked, stream, &device); r != CUDA_SUCCESS) return r;
  e->done_at_ns = WorkDoneAtNs();
  return CUDA_SUCCESS;
}

// cuStreamGetCtx: a created stream's own context, the current one for the
// NULL, legacy and per-thread streams.
CUresult StreamContext(CUstream stream, CUcontext* pctx) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Locked locked;
  if (IsSpecial(stream)) {
    *pctx = CurrentContext(locked);
    return *pctx == nullptr ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
  }
  const CUstream_st* s = Find(locked, stream);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *pctx = s->context;
  return CUDA_SUCCESS;
}

CUresult GetDevice(CUstream stream, CUdevice* device) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Locked locked;
  int d = 0;
  if (CUresult r = StreamDevice(locked, stream, &d); r != CUDA_SUCCESS) return r;
  *device = d;
  return CUDA_SUCCESS;
}

}  // namespace

CUresult StreamDevice(const Locked& locked, CUstream stream, int* device) {
  if (IsSpecial(stream)) return CurrentDevice(locked, device);
  const CUstream_st* s = Find(locked, stream);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *device = s->device;
  return CUDA_SUCCESS;
}

CUgraph CapturingGraph(const Locked& locked, CUstream stream) {
  if (IsSpecial(stream)) return nullptr;
  const CUstream_st* s = Find(locked, stream);
  return s == nullptr ? nullptr : s->capture_graph;
}

}  // namespace fake_cuda

using fake_cuda::Enter;

extern "C" {

CUresult cuStreamCreate(CUstream* stream, unsigned int /*flags*/) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Create(stream);
}

CUresult cuStreamCreateWithPriority(CUstream* stream, unsigned int /*flags*/, int priority) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Create(stream, priority);
}

CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (least != nullptr) *least = 0;  // an H100's range
  if (greatest != nullptr) *greatest = fake_cuda::kGreatestPriority;
  return CUDA_SUCCESS;
}

CUresult cuStreamGetPriority(CUstream stream, int* priority) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  const CUstream_st* s = fake_cuda::Find(locked, stream);
  if (s == nullptr && !fake_cuda::IsSpecial(stream)) return CUDA_ERROR_INVALID_HANDLE;
  *priority = s == nullptr ? 0 : s->priority;
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Destroy(stream);
}

CUresult cuStreamDestroy_v2(CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Destroy(stream);
}

CUresult cuStreamGetDevice(CUstream stream, CUdevice* device) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::GetDevice(stream, device);
}

CUresult cuStreamGetDevice_ptsz(CUstream stream, CUdevice* device) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::GetDevice(stream, device);
}

CUresult cuStreamGetCtx(CUstream stream, CUcontext* pctx) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::StreamContext(stream, pctx);
}

CUresult cuStreamGetCtx_ptsz(CUstream stream, CUcontext* pctx) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::StreamContext(stream, pctx);
}

CUresult cuStreamSynchronize(CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Synchronize(stream, true);
}

CUresult cuStreamSynchronize_ptsz(CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Synchronize(stream, true);
}

CUresult cuStreamQuery(CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Synchronize(stream, false);
}

CUresult cuStreamQuery_ptsz(CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::Synchronize(stream, false);
}

CUresult cuStreamBeginCapture(CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::BeginCapture(stream);
}

CUresult cuStreamBeginCapture_ptsz(CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::BeginCapture(stream);
}

CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode /*mode*/) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::BeginCapture(stream);
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode /*mode*/) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::BeginCapture(stream);
}

CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::EndCapture(stream, graph);
}

CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::EndCapture(stream, graph);
}

CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::IsCapturing(stream, status);
}

CUresult cuStreamIsCapturing_ptsz(CUstream stream, CUstreamCaptureStatus* status) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::IsCapturing(stream, status);
}

CUresult cuStreamGetCaptureInfo(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::CaptureInfo(stream, status, id, nullptr, nullptr, nullptr, nullptr);
}

CUresult cuStreamGetCaptureInfo_ptsz(CUstream stream, CUstreamCaptureStatus* status,
                                     cuuint64_t* id) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::CaptureInfo(stream, status, id, nullptr, nullptr, nullptr, nullptr);
}

CUresult cuStreamGetCaptureInfo_v2(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id,
                                   CUgraph* graph, const CUgraphNode** dependencies,
                                   size_t* count) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::CaptureInfo(stream, status, id, graph, dependencies, nullptr, count);
}

CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream stream, CUstreamCaptureStatus* status,
                                        cuuint64_t* id, CUgraph* graph,
                                        const CUgraphNode** dependencies, size_t* count) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::CaptureInfo(stream, status, id, graph, dependencies, nullptr, count);
}

CUresult cuStreamGetCaptureInfo_v3(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id,
                                   CUgraph* graph, const CUgraphNode** dependencies,
                                   const CUgraphEdgeData** edge_data, size_t* count) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::CaptureInfo(stream, status, id, graph, dependencies, edge_data, count);
}

CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream stream, CUstreamCaptureStatus* status,
                                        cuuint64_t* id, CUgraph* graph,
                                        const CUgraphNode** dependencies,
                                        const CUgraphEdgeData** edge_data, size_t* count) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::CaptureInfo(stream, status, id, graph, dependencies, edge_data, count);
}

CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  int device = 0;
  if (CUresult r = fake_cuda::CurrentDevice(locked, &device); r != CUDA_SUCCESS) return r;
  auto e = std::make_unique<CUevent_st>(CUevent_st{flags});
  *event = e.get();
  fake_cuda::GetStreams(locked).events.emplace(*event, std::move(e));
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent event) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::DestroyEvent(event);
}

CUresult cuEventDestroy_v2(CUevent event) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::DestroyEvent(event);
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::RecordEvent(event, stream);
}

CUresult cuEventRecord_ptsz(CUevent event, CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::RecordEvent(event, stream);
}

CUresult cuEventQuery(CUevent event) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  const CUevent_st* e = fake_cuda::FindEvent(locked, event);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return e->done_at_ns > fake_cuda::NowNs() ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent event) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  uint64_t done_at = 0;
  {
    fake_cuda::Locked locked;
    const CUevent_st* e = fake_cuda::FindEvent(locked, event);
    if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    done_at = e->done_at_ns;
  }
  fake_cuda::WaitUntilNs(done_at);  // never under the lock
  fake_cuda::Locked locked;
  fake_cuda::ReleasePoolsAtSync(locked);
  return CUDA_SUCCESS;
}

}  // extern "C"
