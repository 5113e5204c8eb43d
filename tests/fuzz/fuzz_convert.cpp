// libFuzzer harness: read + every pass (validate first) (the qop or the qdq pipeline, with --approximate so every
// rewrite can run) + emit + write + the checker, on mutated model bytes. Model data must only
// ever give an Error of the input tiers (bad input, unsupported, usage); an internal error, a
// crash, a sanitizer report, or a checker-valid input whose output the checker rejects is a bug.
// So is any difference from protobuf: the reader that leaves tensor bytes in the file must parse
// what protobuf parses, to the same model, and the writer that splices them back must write the
// bytes protobuf writes (io/splice.h). Both run with a threshold of 1 byte here, so that every
// raw_data takes that path. Built by scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
#include <algorithm>
#include <google/protobuf/io/coded_stream.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "qconv/diag.h"
#include "qconv/io/external_data.h"
#include "qconv/io/external_refs.h"
#include "qconv/io/model_io.h"
#include "qconv/io/splice.h"
#include "qconv/io/op_schemas.h"
#include "qconv/pipeline/declare_types.h"
#include "qconv/pipeline/pass_manager.h"
#include "qconv/pipeline/run.h"

namespace {

constexpr uint64_t kThreshold = 1;
// external data would name files: the harness has no model folder ("fuzz/" does not exist)
constexpr const char* kPath = "fuzz/model.onnx";

[[noreturn]] void bug(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "%s%s%s\n", what, detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}

struct StringSink : qconv::io::SpliceSink {
  std::string out;
  void bytes(const char* data, size_t size) override { out.append(data, size); }
  void fileRange(int fd, uint64_t from, uint64_t size) override {
    std::string buf(size, '\0');
    if (pread(fd, buf.data(), size, static_cast<off_t>(from)) != static_cast<ssize_t>(size)) bug("short read of a span");
    out += buf;
  }
};

/// The model file, in memory: the descriptor file-backed tensors read from.
int memoryFile(const uint8_t* data, size_t size) {
  const int fd = memfd_create("model", MFD_CLOEXEC);
  if (fd < 0 || write(fd, data, size) != static_cast<ssize_t>(size)) bug("memfd");
  return fd;
}

/// The reader against protobuf: false when protobuf does not parse the data into a model.
/// *whole is protobuf's parse.
bool readBothWays(const uint8_t* data, size_t size, qconv::io::InputModel* in, onnx::ModelProto* whole_) {
  onnx::ModelProto& whole = *whole_;
  google::protobuf::io::CodedInputStream stream(data, static_cast<int>(size));
  stream.SetRecursionLimit(qconv::io::kRecursionLimit);
  const bool parsed = whole.ParseFromCodedStream(&stream) && stream.ConsumedEntireMessage();
  const bool walked = qconv::io::parseLeavingTensors(data, size, &in->proto, &in->spans, kThreshold);
  if (walked) {
    if (!parsed) bug("the walker accepted what protobuf rejects");
    onnx::ModelProto filled = in->proto;
    for (const auto& s : in->spans)
      filled.mutable_graph()->mutable_initializer(s.index)->set_raw_data(reinterpret_cast<const char*>(data) + s.offset,
                                                                         s.length);
    if (filled.SerializeAsString() != whole.SerializeAsString()) bug("the walker's model differs from protobuf's");
  } else {
    in->proto = whole;
  }
  return parsed && in->proto.has_graph();
}

/// The writer against protobuf: the spliced bytes are protobuf's for the model with every
/// file-backed tensor loaded (and written, as the writer does, without data_location).
void writeBothWays(onnx::ModelProto& out, const qconv::io::FileBacked& file_backed) {
  const qconv::io::InlineModel plan(out, kThreshold, &file_backed);
  if (plan.size() > static_cast<uint64_t>(INT32_MAX)) return;
  StringSink sink;
  plan.write(sink);
  onnx::ModelProto loaded = out;
  for (int k = 0; k < out.graph().initializer_size(); ++k) {
    const qconv::io::FileRange* r = qconv::io::findRange(&file_backed, out.graph().initializer(k));
    if (!r) continue;
    onnx::TensorProto& t = *loaded.mutable_graph()->mutable_initializer(k);
    std::string bytes(r->length, '\0');
    if (pread(r->fd, bytes.data(), r->length, static_cast<off_t>(r->offset)) != static_cast<ssize_t>(r->length))
      bug("a span cannot be read");
    t.clear_external_data();
    t.clear_data_location();
    t.set_raw_data(std::move(bytes));
  }
  if (sink.out != loaded.SerializeAsString()) bug("the spliced bytes differ from protobuf's");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const qconv::Diagnostics log(nullptr, 0);  // said nowhere: the fuzzer looks for crashes
  try {
    qconv::io::InputModel in;
    onnx::ModelProto input;
    if (!readBothWays(data, size, &in, &input)) return 0;
    // the write plan protects what io::externalLocations finds: it must find every location
    // protobuf parses (here, the main graph's initializers and the tensors of its nodes' attributes)
    const std::vector<std::string> found = qconv::io::externalLocations(data, size);
    auto check = [&](const onnx::TensorProto& t) {
      for (const auto& e : t.external_data())
        if (e.key() == "location" && std::find(found.begin(), found.end(), e.value()) == found.end())
          bug("a location the wire scanner missed", e.value());
    };
    for (const auto& t : input.graph().initializer()) check(t);
    for (const auto& n : input.graph().node())
      for (const auto& a : n.attribute()) {
        if (a.has_t()) check(a.t());
        for (const auto& t : a.tensors()) check(t);
      }
    in.files = std::make_shared<qconv::io::ExternalFiles>(kPath);
    if (!in.spans.empty()) in.files->adoptModelFile(memoryFile(data, size));
    // as qconv convert: no checker before the pipeline, which must hold on any parsed model;
    // the checker judges the output, and the input only when the output fails
    qconv::ir::Model model = qconv::io::importModel(std::move(in), kPath);
    // every other input runs the --format qdq pipeline (unfuse-qop, unfuse-integer-ops)
    const bool qdq = size / 3 % 2;
    qconv::PassManager pm(qconv::pipelineFor(qdq ? qconv::Format::Qdq : qconv::Format::Qop));
    // every third input also moves 8-bit tensors to the other type (shift-types), both ways;
    // the qop inputs write com.microsoft ops too (--contrib) every other time
    qconv::PassOptions options{true, true};
    options.one_step = !qdq;
    options.contrib = !qdq && size / 6 % 2;
    if (size % 3 == 1) options.weight_type = onnx::TensorProto::UINT8;
    if (size % 3 == 2) options.activation_type = onnx::TensorProto::INT8;
    // half the inputs are converted for a --target, each in turn, with its storage types and
    // --approximate (requantize-per-tensor, fold-dequantized-constants, check-target)
    const auto& targets = qconv::targetProfiles();
    if (size / 7 % 2) {
      const qconv::TargetProfile& t = targets[size / 14 % targets.size()];
      options.target = &t;
      if (!t.contrib.allowed) options.contrib = false;
      if (t.weight_type) options.weight_type = t.weight_type;
      if (t.activation_type) options.activation_type = t.activation_type;
      if (options.activation_type == onnx::TensorProto::INT8) options.weight_type = onnx::TensorProto::INT8;
    }
    qconv::PassContext ctx(log, options, kPath);
    pm.run(model, ctx, nullptr);
    qconv::io::FileBacked file_backed;
    qconv::io::ValueTypes untyped;
    onnx::ModelProto out = qconv::io::exportModel(model, &file_backed, &untyped);
    const qconv::io::OpSchemas schemas;
    qconv::declareValueTypes(out, untyped, schemas);
    writeBothWays(out, file_backed);
    if (std::string why = qconv::io::checkModel(out, &file_backed); !why.empty() && qconv::io::checkModel(input).empty())
      bug("a valid model became invalid", why);
  } catch (const qconv::Error& e) {
    if (e.code() == qconv::ExitCode::Internal) bug("internal error on model data", e.what());
  }
  return 0;
}
