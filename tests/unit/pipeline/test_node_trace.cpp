// The report's per-node trace (node_trace.h): the ids Model Explorer gives nodes, and a node
// followed through a fusion to the node it became.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "model_builder.h"
#include "qconv/pipeline/node_trace.h"
#include "qconv/pipeline/report.h"
#include "qconv/pipeline/run.h"

using namespace qtest;

TEST_CASE("node ids are those onnx_ir's NameFixPass gives, as Model Explorer's ONNX adapter shows them") {
  // checked against onnx_ir 1.1.0 (model-explorer-onnx 0.4.2's): ['a', 'node', 'a_1', 'node_1',
  // 'node_2', 'node_1_1', 'node_3', 'node_6'], the If's two branches taking node_4 and node_5
  onnx::GraphProto branch;
  branch.add_node()->set_op_type("Identity");
  branch.add_node()->set_op_type("Identity");
  std::vector<onnx::NodeProto> nodes(8);
  const char* names[] = {"a", "", "a", "", "node", "node_1", "", ""};
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].set_op_type("Relu");
    nodes[i].set_name(names[i]);
  }
  nodes[6].set_op_type("If");
  for (const char* branch_name : {"then_branch", "else_branch"}) {
    auto* a = nodes[6].add_attribute();
    a->set_name(branch_name);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = branch;
  }
  std::vector<const onnx::NodeProto*> all;
  for (const auto& n : nodes) all.push_back(&n);
  CHECK(qconv::explorerNodeIds(all) ==
        std::vector<std::string>{"a", "node", "a_1", "node_1", "node_2", "node_1_1", "node_3", "node_6"});
  CHECK(qconv::graphId("") == "<main>");
  CHECK(qconv::graphId("small_cnn") == "small_cnn");
}

TEST_CASE("a fused node's input nodes become the fused node; what a pass refused stays, saying why") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, 2, 4, 4});
  b.floats("xs", {}, {0.05f});
  b.ints("xz", TensorProto::UINT8, {}, {128});
  b.floats("ws", {}, {0.02f});
  b.ints("wz", TensorProto::INT8, {}, {0});
  b.ints("w", TensorProto::INT8, {2, 2, 1, 1}, {1, -2, 3, -4});
  b.node("QuantizeLinear", {"x", "xs", "xz"}, {"q"}, "q_x");
  b.node("DequantizeLinear", {"q", "xs", "xz"}, {"d"}, "dq_x");
  b.node("DequantizeLinear", {"w", "ws", "wz"}, {"wf"}, "dq_w");
  b.node("Conv", {"d", "wf"}, {"y"}, "conv");
  b.node("QuantizeLinear", {"y", "xs", "xz"}, {"qy"}, "q_y");
  b.node("DequantizeLinear", {"qy", "xs", "xz"}, {"dy"}, "dq_y");
  b.node("Softmax", {"dy"}, {"out"}, "");  // unnamed: "Softmax #6", Model Explorer's "node"
  b.output("out", TensorProto::FLOAT);
  const std::string in = (std::filesystem::temp_directory_path() / "qconv-trace-in.onnx").string();
  const std::string out = (std::filesystem::temp_directory_path() / "qconv-trace-out.onnx").string();
  {
    std::ofstream f(in, std::ios::binary);
    b.proto().SerializeToOstream(&f);
  }
  qconv::ConvertOptions o;
  o.input = in;
  o.output = out;
  std::string json;
  o.report_json = &json;
  std::ostringstream sout, serr;
  REQUIRE(qconv::run(o, sout, serr) == 0);
  const auto item = nlohmann::json::parse(json)["items"][0];
  std::map<std::string, nlohmann::json> row;
  for (const auto& r : item["nodes"]) row[r["name"]] = r;
  REQUIRE(row.size() == 7);
  for (const char* taken : {"dq_x", "dq_w", "q_y"}) {
    CHECK(row[taken]["outcome"] == "fused");
    CHECK(row[taken]["reason"] == "taken into conv's group");
    CHECK(row[taken]["became"] == nlohmann::json::array({"conv"}));
  }
  CHECK(row["conv"]["passes"] == "fuse-qlinear-conv");
  CHECK(row["q_x"]["outcome"] == "left");
  CHECK(row["Softmax #6"]["became"] == nlohmann::json::array({"node"}));
  std::map<std::string, nlohmann::json> output;
  for (const auto& n : item["output_nodes"]) output[n["id"]] = n;
  CHECK(output["conv"]["op"] == "QLinearConv");
  CHECK(output["conv"]["from"] == nlohmann::json::array({"dq_x", "dq_w", "conv", "q_y"}));
  CHECK(output["node"]["op"] == "Softmax");
  std::filesystem::remove(in);
  std::filesystem::remove(out);
}
