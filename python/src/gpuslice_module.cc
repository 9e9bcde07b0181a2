// gpuslice_module.cc — gpuslice._gpuslice, the extension module behind the
// Python package: the C++ task scheduler (src/task) running Python callables,
// and gpuslice's C API (found with dlsym) for spans and hints.
//
// Threads and the GIL: a task runs on one of the scheduler's C++ worker
// threads, which takes the GIL only to call the task and to hand its result
// to the task's concurrent.futures.Future. Everything that may wait for a
// worker (close(), and the scheduler's destruction) releases the GIL first,
// or a running task could never finish. A Python caller waits on the Future
// itself, which releases the GIL as every Python wait does.
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "gpuslice/scheduler.h"
#include "port/mutex.h"
#include "task/scheduler_core.h"
#include "task/task_abi.h"

namespace py = pybind11;

namespace gpuslice::python {
namespace {

// Whether Python objects may be touched from a thread that is not Python's:
// not once the interpreter is finalizing (taking the GIL then ends the thread).
bool PythonAlive() { return Py_IsInitialized() && !_Py_IsFinalizing(); }

// A Python call as a scheduler Job. Run() calls it; Publish() completes its
// Future. A Job destroyed unrun (the scheduler closed) cancels the Future.
class PyJob final : public detail::Job {
 public:
  PyJob(py::object fn, py::tuple args, py::dict kwargs, py::object future)
      : fn_(std::move(fn)), args_(std::move(args)), kwargs_(std::move(kwargs)), future_(std::move(future)) {}

  ~PyJob() override {
    if (!PythonAlive()) {
      // Leaked rather than freed without the GIL.
      fn_.release();
      args_.release();
      kwargs_.release();
      future_.release();
      result_.release();
      error_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    if (!ran_) {
      try {
        future_.attr("cancel")();
      } catch (py::error_already_set&) {
      }
    }
    // Dropped here, under the GIL, not by the members' destructors after it.
    fn_ = py::object();
    args_ = py::object();
    kwargs_ = py::object();
    future_ = py::object();
    result_ = py::object();
    error_ = py::object();
  }

  bool Run() noexcept override {
    ran_ = true;
    if (!PythonAlive()) return false;
    py::gil_scoped_acquire gil;
    try {
      // A Future cancelled while queued is not run.
      if (!future_.attr("set_running_or_notify_cancel")().cast<bool>()) {
        cancelled_ = true;
        return true;
      }
      result_ = fn_(*args_, **kwargs_);
      return true;
    } catch (py::error_already_set& e) {
      e.restore();
      PyObject *type, *value, *trace;
      PyErr_Fetch(&type, &value, &trace);
      PyErr_NormalizeException(&type, &value, &trace);
      if (trace != nullptr && value != nullptr) PyException_SetTraceback(value, trace);
      error_ = py::reinterpret_steal<py::object>(value);
      Py_XDECREF(type);
      Py_XDECREF(trace);
      return false;
    } catch (const std::exception& e) {
      error_ = py::module_::import("builtins").attr("RuntimeError")(e.what());
      return false;
    }
  }

  void Publish() noexcept override {
    if (!PythonAlive() || cancelled_) return;
    py::gil_scoped_acquire gil;
    try {
      if (error_) {
        future_.attr("set_exception")(error_);
      } else {
        future_.attr("set_result")(result_);
      }
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("gpuslice: completing a task's Future");
    }
  }

 private:
  py::object fn_;
  py::object args_;    // a tuple
  py::object kwargs_;  // a dict
  py::object future_;
  py::object result_ = py::none();
  py::object error_;
  bool ran_ = false, cancelled_ = false;
};

// Schedulers whose last reference went in one of their own tasks: a worker
// cannot wait for itself, so a thread of their own stops each. The package's
// exit hook waits for them (Wait), so that no worker takes the GIL once the
// interpreter is finalizing: that ends the thread by a forced unwind, which
// aborts the process if it meets a destructor (seen in a loaded CI run:
// "terminate called without an active exception").
class Stoppers {
 public:
  static Stoppers& Get() {
    static Stoppers* stoppers = new Stoppers;  // never destroyed: detached threads use it at exit
    return *stoppers;
  }
  void Start(std::unique_ptr<task::SchedulerCore> core) EXCLUDES(mu_) {
    {
      port::MutexLock lock(&mu_);
      ++running_;
    }
    std::thread([this, core = std::move(core)]() mutable {
      core.reset();
      port::MutexLock lock(&mu_);
      if (--running_ == 0) done_.NotifyAll();
    }).detach();
  }
  // Called without the GIL (a worker being stopped may need it to finish).
  void Wait() EXCLUDES(mu_) {
    port::MutexLock lock(&mu_);
    done_.Wait(&mu_, [this] {
      mu_.AssertHeld();
      return running_ == 0;
    });
  }

 private:
  port::Mutex mu_;
  port::CondVar done_;
  int running_ GUARDED_BY(mu_) = 0;
};

// The scheduler as the Python package sees it (gpuslice/__init__.py wraps it).
class PyScheduler {
 public:
  PyScheduler(std::optional<std::string> config, int workers, bool slo_reaction) {
    if (workers < 1) throw std::invalid_argument("workers is " + std::to_string(workers) + "; give 1 or more");
    task::LevelTable levels = task::LevelTable::Defaults();
    if (config) {
      StatusOr<task::LevelTable> loaded = task::LevelTable::Load(*config);
      if (!loaded.ok()) throw std::invalid_argument(loaded.status().message());
      levels = std::move(*loaded);
    }
    task::CoreOptions options;
    options.workers = workers;
    options.slo_reaction = slo_reaction;
    core_ = std::make_unique<task::SchedulerCore>(std::move(levels), options);
  }

  ~PyScheduler() {
    py::gil_scoped_release release;
    // The last reference may go in one of the scheduler's own tasks (Python
    // frees what a task captured when its worker drops it): then another
    // thread stops it, since a worker cannot wait for itself.
    if (core_->OnWorkerThread()) {
      Stoppers::Get().Start(std::move(core_));
      return;
    }
    core_.reset();
  }

  void Close() {  // called without the GIL
    if (core_->OnWorkerThread()) {
      throw std::logic_error("close() from one of the scheduler's own tasks; close it from another thread");
    }
    core_->Stop();
  }

  // Raises ValueError naming the problem; `latency_critical`: None, any class.
  void Check(const std::string& level, double slo_ms, std::optional<bool> latency_critical) const {
    Resolve(level, slo_ms, latency_critical);
  }

  void Submit(const std::string& level, double slo_ms, py::object fn, py::tuple args, py::dict kwargs,
              py::object future) {
    const task::ResolvedClass resolved = Resolve(level, slo_ms, std::nullopt);
    auto job = std::make_unique<PyJob>(std::move(fn), std::move(args), std::move(kwargs), std::move(future));
    if (!core_->Submit(resolved, std::move(job))) {
      throw std::logic_error("submit() on a closed gpuslice.Scheduler; make a new one");
    }
  }

  py::list Levels() const {
    py::list out;
    for (const task::Level& level : core_->levels().levels()) {
      out.append(py::make_tuple(level.name, level.latency_critical, static_cast<double>(level.slo_ns) / 1e6));
    }
    return out;
  }

  py::list Metrics() const {
    py::list out;
    for (const LevelMetrics& m : core_->Metrics()) {
      py::dict d;
      d["level"] = m.level;
      d["latency_critical"] = m.latency_critical;
      d["count"] = m.count;
      d["failed"] = m.failed;
      d["slo_misses"] = m.slo_misses;
      d["queued"] = m.queued;
      d["p50_ms"] = static_cast<double>(m.p50.count()) / 1e6;
      d["p99_ms"] = static_cast<double>(m.p99.count()) / 1e6;
      d["slo_ms"] = static_cast<double>(m.slo.count()) / 1e3;
      d["slo_pressure"] = m.slo_pressure;
      out.append(d);
    }
    return out;
  }


 private:
  task::ResolvedClass Resolve(const std::string& level, double slo_ms, std::optional<bool> lc) const {
    if (!(slo_ms >= 0) || slo_ms > 3.6e6) {
      throw std::invalid_argument("slo_ms=" + std::to_string(slo_ms) + " must be a number of milliseconds above 0");
    }
    TaskClass task_class{level, std::chrono::microseconds(static_cast<int64_t>(slo_ms * 1000))};
    if (slo_ms > 0 && task_class.slo.count() == 0) task_class.slo = std::chrono::microseconds(1);
    StatusOr<task::ResolvedClass> resolved = core_->Resolve(task_class, lc);
    if (!resolved.ok()) throw std::invalid_argument(resolved.status().message());
    return *resolved;
  }

  std::unique_ptr<task::SchedulerCore> core_;
};

// gpuslice's C API, with the warnings the scheduler gives (each once).
int Noted(int status) {
  task::TaskAbi* abi = task::LibraryAbi();
  task::ProcessNotices()->NoteLoaded(abi->Loaded());
  if (abi->Loaded()) task::ProcessNotices()->NoteStatus(status);
  return status;
}

}  // namespace
}  // namespace gpuslice::python

PYBIND11_MODULE(_gpuslice, m) {
  using gpuslice::python::Noted;
  using gpuslice::python::PyScheduler;
  namespace task = gpuslice::task;
  m.doc() = "gpuslice's task scheduler and C API; use the `gpuslice` package, not this module.";

  py::class_<PyScheduler>(m, "_Scheduler")
      .def(py::init<std::optional<std::string>, int, bool>(), py::arg("config"), py::arg("workers"),
           py::arg("slo_reaction"))
      .def("check", &PyScheduler::Check, py::arg("level"), py::arg("slo_ms"), py::arg("latency_critical"))
      .def("submit", &PyScheduler::Submit)
      .def("levels", &PyScheduler::Levels)
      .def("metrics", &PyScheduler::Metrics)
      .def("close", &PyScheduler::Close, py::call_guard<py::gil_scoped_release>());

  m.def(
      "_wait_for_stoppers", [] { gpuslice::python::Stoppers::Get().Wait(); }, py::call_guard<py::gil_scoped_release>());
  m.def("library_loaded", [] { return task::LibraryAbi()->Loaded(); });
  m.def("span_begin", [] { return Noted(task::LibraryAbi()->SpanBegin()); });
  m.def("span_end", [] { return task::LibraryAbi()->SpanEnd(); });
  m.def("hint_begin", [] { return Noted(task::LibraryAbi()->HintBegin()); });
  m.def("hint_end", [] { return task::LibraryAbi()->HintEnd(); });
  m.def("hint", [](unsigned int usec) { return Noted(task::LibraryAbi()->Hint(usec)); });
  m.attr("OK") = 0;
  m.attr("NOT_IN_VGPU") = 1;
  m.attr("NOT_LATENCY_CRITICAL") = 2;
}
