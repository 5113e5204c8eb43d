// qconv._qconv: the Python binding (nanobind). As thin as tools/qconv_main.cpp: each function
// binds its arguments to the library's options struct, releases the GIL, and calls the same
// entry point the CLI calls (qconv::run, qconv::verify, qconv::inspect). What the CLI prints on
// stdout comes back as bytes with the exit code, and its diagnostics as the library's records
// (diagnostics.h: level, kind, file, node, text, and the line the CLI prints for it), which
// qconv/__init__.py turns into results, logging records and exceptions. Paths come in as bytes
// (os.fsencode), and the records' strings go out as bytes: a file name need not be UTF-8.
//
// Ctrl-C: called from the main thread (`interruptible`), the engine runs on a thread of its own
// while the caller waits with the GIL released and, every 50 ms, lets Python run its signal
// handlers (PyErr_CheckSignals). When one raises (KeyboardInterrupt), the binding sets the
// conversion's cancel flag (ConvertOptions::cancel): the engine stops at its next check,
// commits nothing, and the call raises what the handler raised. The host's signal handlers and
// masks are never touched.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "qconv/io/model_io.h"
#include "qconv/pipeline/report.h"
#include "qconv/pipeline/run.h"
#include "qconv/targets/target.h"
#include "qconv_version.h"

namespace nb = nanobind;

namespace {

/// A bytes object's contents, read in place: it lives as long as the call that was given it.
std::string_view viewOf(const nb::bytes& b) { return std::string_view(b.c_str(), b.size()); }
std::string stringOf(const nb::bytes& b) { return std::string(b.c_str(), b.size()); }
nb::bytes bytesOf(const std::string& s) { return nb::bytes(s.data(), s.size()); }

/// A new bytes object holding `s`, which is emptied: the object is made with the GIL (its pages
/// are not touched yet), the bytes copied in and `s` freed without it. A converted model is
/// tens of megabytes: copied with the GIL held, its page faults alone stalled every other
/// Python thread some 60 ms a conversion.
nb::bytes filled(std::string& s) {
  PyObject* obj = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(s.size()));
  if (!obj) throw nb::python_error();
  {
    nb::gil_scoped_release unlocked;  // nothing else can see the object yet
    std::memcpy(PyBytes_AsString(obj), s.data(), s.size());  // the limited API has no macro form
    std::string().swap(s);
  }
  return nb::steal<nb::bytes>(obj);
}

/// The records of one call, from whichever threads its conversions run on.
class Records final : public qconv::DiagnosticSink {
 public:
  void emit(const qconv::Diagnostic& d) override {
    std::lock_guard<std::mutex> lock(mutex_);
    all_.push_back(d);
  }
  /// As Python gets them: (level, kind, file, node, text, line), the strings as bytes.
  nb::list list() const {
    nb::list out;
    for (const qconv::Diagnostic& d : all_)
      out.append(nb::make_tuple(std::string(qconv::levelName(d.level)), d.kind, bytesOf(d.file), bytesOf(d.node),
                                bytesOf(d.text), bytesOf(d.line)));
    return out;
  }

 private:
  std::mutex mutex_;
  std::vector<qconv::Diagnostic> all_;
};

/// `call(out, records, cancel)` with the GIL released (conversions from several threads run at
/// once, other Python threads meanwhile): (its exit code, what it wrote on stdout, its records).
/// `interruptible` (the caller is Python's main thread): Ctrl-C cancels, as the header says.
template <class Call>
std::tuple<int, nb::bytes, nb::list> released(Call call, bool interruptible) {
  std::ostringstream out;
  Records records;
  int code = 0;
  std::atomic<bool> cancel{false};
  bool interrupted = false;
  if (!interruptible) {
    nb::gil_scoped_release unlocked;
    code = call(out, records, &cancel);
  } else {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr failure;
    std::thread engine([&] {
      try {
        code = call(out, records, &cancel);
      } catch (...) {
        failure = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(m);
      done = true;
      cv.notify_one();
    });
    for (;;) {
      {
        nb::gil_scoped_release unlocked;
        std::unique_lock<std::mutex> lock(m);
        if (cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; })) break;
      }
      if (!interrupted && PyErr_CheckSignals() != 0) {  // a handler raised: cancel, then raise it
        interrupted = true;
        cancel = true;
      }
    }
    engine.join();
    if (failure) std::rethrow_exception(failure);
  }
  if (interrupted) throw nb::python_error();
  return {code, bytesOf(out.str()), records.list()};
}

/// (exit code, stdout, the records, the report's JSON, the converted model's bytes or None)
using ConvertReturn = std::tuple<int, nb::bytes, nb::list, nb::bytes, std::optional<nb::bytes>>;

/// One `qconv convert`: `input` (a path, or the name of `input_bytes`) into `output` (a path,
/// or, with `to_memory`, the bytes returned); a batch when `out_dir` is given.
ConvertReturn convert(const nb::bytes& input, std::optional<nb::bytes> input_bytes, const nb::bytes& output,
                      bool to_memory, const std::vector<nb::bytes>& inputs, const nb::bytes& out_dir, int jobs,
                      const nb::bytes& report, const nb::bytes& node_data, const std::string& format,
                      const std::string& target, const std::vector<std::string>& passes, bool dump, bool time_passes, bool raise_weight_scale,
                      bool approximate, bool annotate, bool inline_data, bool fsync, int32_t weight_type,
                      int32_t activation_type, bool check_saturation, bool contrib, int64_t opset, bool require_change,
                      int verbosity, bool interruptible) {
  qconv::ConvertOptions o;
  o.input = stringOf(input);
  o.output = stringOf(output);
  for (const nb::bytes& in : inputs) o.inputs.push_back(stringOf(in));
  o.out_dir = stringOf(out_dir);
  o.jobs = jobs;
  o.report = stringOf(report);
  o.node_data = stringOf(node_data);
  o.format = format == "qdq" ? qconv::Format::Qdq : qconv::Format::Qop;
  o.format_given = !format.empty();
  o.target = target;
  o.passes = passes;
  o.dump = dump;
  o.time_passes = time_passes;
  o.raise_weight_scale = raise_weight_scale;
  o.approximate = approximate;
  o.annotate = annotate;
  o.inline_data = inline_data;
  o.fsync = fsync;
  o.weight_type = weight_type;
  o.activation_type = activation_type;
  o.check_saturation = check_saturation;
  o.contrib = contrib;
  o.opset = opset;
  o.require_change = require_change;
  o.verbosity = verbosity;
  std::string_view in_view;
  if (input_bytes) {
    in_view = viewOf(*input_bytes);
    o.input_bytes = &in_view;
  }
  std::string converted, report_json;
  if (to_memory) o.output_bytes = &converted;
  o.report_json = &report_json;
  auto [code, out, records] = released(
      [&](std::ostream& os, qconv::DiagnosticSink& sink, const std::atomic<bool>* cancel) {
        o.cancel = cancel;
        return qconv::run(o, os, sink);
      },
      interruptible);
  std::optional<nb::bytes> result;
  if (to_memory && code == 0) result = filled(converted);
  return {code, std::move(out), std::move(records), bytesOf(report_json), std::move(result)};
}

/// `qconv verify MODEL --json`: (exit code, the JSON object, the records).
std::tuple<int, nb::bytes, nb::list> verify(const nb::bytes& model, std::optional<nb::bytes> model_bytes,
                                             const std::string& target, int fail_on, bool symmetric,
                                             const std::vector<std::string>& ignore, const nb::bytes& report,
                                             const nb::bytes& node_data, bool interruptible) {
  qconv::VerifyCommand c;
  c.model = stringOf(model);
  c.report = stringOf(report);
  c.node_data = stringOf(node_data);
  c.json = true;
  c.symmetric = symmetric;
  c.target = target;
  c.fail_on = static_cast<qconv::analysis::Severity>(fail_on);
  c.ignore = ignore;
  std::string_view view;
  if (model_bytes) {
    view = viewOf(*model_bytes);
    c.model_bytes = &view;
  }
  return released(
      [&](std::ostream& out, qconv::DiagnosticSink& sink, const std::atomic<bool>*) { return qconv::verify(c, out, sink); },
      interruptible);
}

/// `qconv inspect MODEL --json`: (exit code, the JSON object, the records).
std::tuple<int, nb::bytes, nb::list> inspect(const nb::bytes& model, std::optional<nb::bytes> model_bytes,
                                              const std::string& target, const std::string& format, bool interruptible) {
  qconv::InspectCommand c;
  c.model = stringOf(model);
  c.json = true;
  c.target = target;
  c.format = format == "qdq" ? qconv::Format::Qdq : qconv::Format::Qop;
  c.format_given = !format.empty();
  std::string_view view;
  if (model_bytes) {
    view = viewOf(*model_bytes);
    c.model_bytes = &view;
  }
  return released(
      [&](std::ostream& out, qconv::DiagnosticSink& sink, const std::atomic<bool>*) { return qconv::inspect(c, out, sink); },
      interruptible);
}

/// A lone conversion's node data (what --node-data writes) from its report's JSON text.
nb::bytes nodeData(const nb::bytes& report_json) { return bytesOf(qconv::nodeDataFromReport(viewOf(report_json))); }

/// The targets, as `qconv targets` lists them: (name, format, summary, runtime).
std::vector<std::tuple<std::string, std::string, std::string, std::string>> targets() {
  std::vector<std::tuple<std::string, std::string, std::string, std::string>> all;
  for (const qconv::TargetProfile& t : qconv::targetProfiles())
    all.emplace_back(std::string(t.name), t.default_qop ? "qop" : "qdq", std::string(t.summary), std::string(t.runtime));
  return all;
}

}  // namespace

NB_MODULE(_qconv, m) {
  m.doc() = "qconv's engine (the library the qconv command runs); the API is the qconv package";
  m.def("convert", &convert, nb::arg("input"), nb::arg("input_bytes").none(), nb::arg("output"), nb::arg("to_memory"),
        nb::arg("inputs"), nb::arg("out_dir"), nb::arg("jobs"), nb::arg("report"), nb::arg("node_data"), nb::arg("format"),
        nb::arg("target"), nb::arg("passes"), nb::arg("dump"), nb::arg("time_passes"),
        nb::arg("raise_weight_scale"), nb::arg("approximate"), nb::arg("annotate"), nb::arg("inline_data"),
        nb::arg("fsync"), nb::arg("weight_type"), nb::arg("activation_type"), nb::arg("check_saturation"),
        nb::arg("contrib"), nb::arg("opset"), nb::arg("require_change"), nb::arg("verbosity"), nb::arg("interruptible"));
  m.def("verify", &verify, nb::arg("model"), nb::arg("model_bytes").none(), nb::arg("target"), nb::arg("fail_on"),
        nb::arg("symmetric"), nb::arg("ignore"), nb::arg("report"), nb::arg("node_data"), nb::arg("interruptible"));
  m.def("inspect", &inspect, nb::arg("model"), nb::arg("model_bytes").none(), nb::arg("target"), nb::arg("format"),
        nb::arg("interruptible"));
  m.def("targets", &targets);
  m.def("node_data", &nodeData, nb::arg("report_json"));
  m.attr("version") = QCONV_VERSION;
  m.attr("commit") = QCONV_COMMIT;
  m.attr("built_with") = qconv::io::builtWith();
  m.attr("onnx_version") = QCONV_ONNX_VERSION;
}
