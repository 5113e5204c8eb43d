// io::externalLocations: every file a model's external data names, read off its bytes
// (the write plan's "what the run reads", and the commit's "what the replaced model names").
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "qconv/io/external_refs.h"
#include "onnx/onnx_pb.h"

namespace {

void external(onnx::TensorProto* t, const std::string& name, const std::string& location) {
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = t->add_external_data();
  e->set_key("length");
  e->set_value("4");
  e = t->add_external_data();
  e->set_key("location");
  e->set_value(location);
}

std::vector<std::string> scan(const std::string& bytes) {
  return qconv::io::externalLocations(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

TEST_CASE("every place a tensor can sit names its file: initializers, attributes, subgraphs, functions, sparse") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* g = m.mutable_graph();
  external(g->add_initializer(), "a", "a.data");
  auto* inline_tensor = g->add_initializer();  // inline: names nothing
  inline_tensor->set_name("i");
  inline_tensor->set_raw_data(std::string(4, 'x'));
  external(g->add_initializer(), "a2", "a.data");  // the same file again: listed once
  auto* node = g->add_node();
  node->set_op_type("Constant");
  auto* attr = node->add_attribute();
  attr->set_name("value");
  external(attr->mutable_t(), "b", "sub/b.data");
  auto* branch = g->add_node();
  branch->set_op_type("If");
  auto* then_branch = branch->add_attribute();
  then_branch->set_name("then_branch");
  auto* inner = then_branch->mutable_g()->add_node();
  auto* inner_attr = inner->add_attribute();
  external(inner_attr->add_tensors(), "c", "c.data");
  auto* sparse = g->add_sparse_initializer();
  external(sparse->mutable_values(), "e", "e.data");
  external(sparse->mutable_indices(), "e_i", "e_i.data");
  auto* f = m.add_functions();
  auto* fn = f->add_node();
  external(fn->add_attribute()->mutable_t(), "d", "d.data");
  const std::string bytes = m.SerializeAsString();
  // in the order of the bytes: a graph's nodes (field 1) come before its initializers (5)
  REQUIRE(scan(bytes) == std::vector<std::string>{"sub/b.data", "c.data", "a.data", "e.data", "e_i.data", "d.data"});

  // truncated anywhere: what was read before the fault, never more, never a crash
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<std::string> part = scan(bytes.substr(0, n));
    REQUIRE(part.size() <= 6);
  }
  REQUIRE(scan("").empty());
  REQUIRE(qconv::io::externalLocations(std::string("/nonexistent/model.onnx")).empty());
}
