// request.cc — RequestSpan and Hint (include/gpuslice/request.h) over the
// C API found with dlsym (task_abi.h).
#include "gpuslice/request.h"

#include "task/task_abi.h"

namespace gpuslice {

namespace {
int Noted(int status) {
  task::TaskAbi* abi = task::LibraryAbi();
  task::Notices* notices = task::ProcessNotices();
  notices->NoteLoaded(abi->Loaded());
  if (abi->Loaded()) notices->NoteStatus(status);
  return status;
}
}  // namespace

RequestSpan::RequestSpan() : status_(Noted(task::LibraryAbi()->SpanBegin())) {}
RequestSpan::~RequestSpan() { task::LibraryAbi()->SpanEnd(); }

Hint::Hint() : status_(Noted(task::LibraryAbi()->HintBegin())) {}
Hint::~Hint() { task::LibraryAbi()->HintEnd(); }

}  // namespace gpuslice
