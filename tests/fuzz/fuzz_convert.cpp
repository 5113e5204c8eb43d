// libFuzzer harness: parse + validate + every pass (the qop pipeline, with --approximate so
// every rewrite can run) + emit + serialize + the checker, on mutated model bytes. Model data
// must only ever give an Error of the input tiers (bad input, unsupported, usage); an internal
// error, a crash, a sanitizer report, or a checker-valid input whose output the checker
// rejects is a bug. Built by scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
#include <google/protobuf/io/coded_stream.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>

#include "qconv/diag.h"
#include "qconv/io/model_io.h"
#include "qconv/pipeline/pass_manager.h"
#include "qconv/pipeline/run.h"
#include "qconv/pipeline/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto log = spdlog::logger("fuzz", std::make_shared<spdlog::sinks::null_sink_st>());
  try {
    onnx::ModelProto proto;
    google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
    in.SetRecursionLimit(256);  // as io::readModelFile
    if (!proto.ParseFromCodedStream(&in) || !proto.has_graph()) return 0;
    // as qconv convert: no checker before the pipeline, which must hold on any parsed model;
    // the checker judges the output, and the input only when the output fails
    const onnx::ModelProto input = proto;
    // external data would name files: the harness has no model folder ("fuzz/" does not exist)
    qconv::ir::Model model = qconv::io::importModel(std::move(proto), "fuzz/model.onnx");
    qconv::validateModel(model, "fuzz/model.onnx");
    qconv::PassManager pm(qconv::pipelineFor(qconv::Format::Qop));
    qconv::PassContext ctx(log, qconv::PassOptions{true, true}, "fuzz/model.onnx");
    pm.run(model, ctx, nullptr);
    onnx::ModelProto out = qconv::io::exportModel(model);
    std::string bytes;
    out.SerializeToString(&bytes);
    if (std::string why = qconv::io::checkModel(out); !why.empty() && qconv::io::checkModel(input).empty()) {
      std::fprintf(stderr, "a valid model became invalid: %s\n", why.c_str());
      std::abort();
    }
  } catch (const qconv::Error& e) {
    if (e.code() == qconv::ExitCode::Internal) {
      std::fprintf(stderr, "internal error on model data: %s\n", e.what());
      std::abort();
    }
  }
  return 0;
}
