#include "qconv/analysis/contents.h"

#include <unordered_set>
#include <string_view>

#include "qconv/quant.h"

namespace qconv::analysis {

namespace {

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool isOnnxruntimeQuantOp(const std::string& op) {
  static constexpr std::string_view kOps[] = {"QGemm",      "QuantizeLinear",       "DequantizeLinear", "QAttention",
                                     "MatMulNBits", "MatMulBnb4",          "GatherBlockQuantized"};
  for (std::string_view o : kOps)
    if (op == o) return true;
  return startsWith(op, "QLinear") || startsWith(op, "DynamicQuantize") || op.find("Integer") != std::string::npos;
}

}  // namespace

std::vector<std::string> Contents::dialectNames() const {
  std::vector<std::string> names;
  for (const auto& [name, ops] : dialects) names.push_back(name);
  return names;
}

const char* dialectOf(const ir::Node& n) {
  const std::string& d = n.domain();
  if (const char* foreign = foreignQuantDialect(d)) return foreign;
  if (n.opIs("FakeQuantize")) return "OpenVINO FakeQuantize";  // in any domain
  if (d == "com.microsoft") return isOnnxruntimeQuantOp(n.opType()) ? "onnxruntime com.microsoft" : nullptr;
  if (!d.empty()) return nullptr;
  if (isQuantize(n) || isDequantize(n)) return "standard QDQ";
  if (n.is("QLinearConv") || n.is("QLinearMatMul") || n.is("ConvInteger") || n.is("MatMulInteger") ||
      n.is("DynamicQuantizeLinear"))
    return "standard QOp";
  if (n.is("Round") && n.input(0) && n.input(0)->producer() &&
      (n.input(0)->producer()->is("Mul") || n.input(0)->producer()->is("Div")))
    return "scaling factors (Aidge: Mul -> Round -> Clip)";
  return nullptr;
}

std::string opName(const ir::Node& n) { return n.domain().empty() ? n.opType() : n.domain() + "::" + n.opType(); }

Contents contentsOf(const ir::Model& model) {
  Contents c;
  std::unordered_set<const ir::Value*> seen;
  for (const ir::Node* n : model.graph.nodes()) {
    ++c.ops[opName(*n)];
    if (const char* dialect = dialectOf(*n)) ++c.dialects[dialect][opName(*n)];
    for (QuantSite& s : quantSites(*n))
      if (seen.insert(s.tensor).second) c.tensors.push_back(std::move(s));
  }
  return c;
}

}  // namespace qconv::analysis
