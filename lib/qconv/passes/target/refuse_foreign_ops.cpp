// refuse-foreign-ops: the model is refused (exit 4) while a node no standard runtime runs is
// still in the graph.
//
// Such a node is one in a quantization dialect's domain (QONNX, Vitis AI, AMD Quark, OpenVINO;
// quant.h), or one a pass reported as Report::Unconvertible (an integer Conv, an opset that
// cannot be re-declared). The message names the file, the first such node in graph order and
// its reason (the unconvertible text, else "<domain>::<op> has no standard ONNX form"), and
// how many more there are. Nothing changes in the graph.
#include <fmt/format.h>

#include "qconv/diag.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct FindForeignOps {
  static constexpr bool kNeedsOutput = false;
  struct Group {
    ir::Node* node;
  };
  const PassContext& ctx;
  std::vector<const ir::Node*> left;

  bool root(const ir::Node& n) const {
    return isForeignQuantDomain(n.domain()) || !ctx.unconvertibleReason(n.label()).empty();
  }
  std::string declined(const ir::Node&) const { return ""; }
  Match<Group> select(ir::Node& n) { return Group{&n}; }
  void rewrite(ir::Graph&, Group& g, PassContext&) { left.push_back(g.node); }
};

}  // namespace

void refuseForeignOps(ir::Model& model, PassContext& ctx) {
  FindForeignOps rule{ctx, {}};
  applyRule(model.graph, ctx, rule);
  if (rule.left.empty()) return;
  const ir::Node& first = *rule.left.front();
  std::string why = ctx.unconvertibleReason(first.label());
  if (why.empty()) why = fmt::format("{}::{} has no standard ONNX form in qconv", first.domain(), first.opType());
  throw Error(ExitCode::Unsupported,
              fmt::format("{}: {}: {}{}", ctx.path(), first.label(), why,
                          rule.left.size() > 1 ? fmt::format(" (and {} more nodes refused)", rule.left.size() - 1) : ""),
              first.label());
}

}  // namespace qconv
