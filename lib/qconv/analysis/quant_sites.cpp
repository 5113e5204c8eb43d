#include "qconv/analysis/quant_sites.h"

#include "qconv/passes/common/qop_forms.h"
#include "qconv/quant.h"

namespace qconv::analysis {

namespace {

bool isQorDQ(const ir::Node& n, const char* op) {
  return n.opIs(op) && (n.domain().empty() || n.domain() == "com.microsoft");
}

/// `axis` of a value of rank `rank` (-1: unknown), normalized.
int64_t normalized(int64_t axis, int64_t rank) {
  if (axis >= 0) return axis;
  return rank < 0 ? kUnknownAxis : axis + rank;
}

int64_t axisOf(ScaleAxis a, const ir::Node& n, const ir::Value* v) {
  const int64_t rank = knownRank(v);
  switch (a) {
    case ScaleAxis::kNone:
      return -1;
    case ScaleAxis::kFirst:
      return 0;
    case ScaleAxis::kSecond:
      return 1;
    case ScaleAxis::kRow:
      return rank < 0 ? kUnknownAxis : rank - 2;
    case ScaleAxis::kColumn:
      return rank < 0 ? kUnknownAxis : rank - 1;
    case ScaleAxis::kGemmB:
      return n.attrInt("transB", 0) ? 0 : 1;
  }
  return -1;
}

}  // namespace

std::vector<QuantSite> quantSites(const ir::Node& n) {
  std::vector<QuantSite> sites;
  const bool q = isQorDQ(n, "QuantizeLinear"), dq = isQorDQ(n, "DequantizeLinear");
  if (q || dq) {
    const ir::Value* t = q ? n.output(0) : n.input(0);
    int64_t axis = -1;  // com.microsoft's Q/DQ have no default axis: absent is per tensor (one scale)
    if (n.domain().empty() || n.attribute("axis")) axis = normalized(n.attrInt("axis", 1), knownRank(t));
    if (t && n.input(1)) sites.push_back({&n, t, n.input(1), n.input(2), axis, q ? "y" : "x", n.attrInt("block_size", 0)});
    return sites;
  }
  if (n.domain() == "com.microsoft" && (n.opIs("MatMulNBits") || n.opIs("GatherBlockQuantized"))) {
    const bool matmul = n.opIs("MatMulNBits");
    const ir::Value* t = n.input(matmul ? 1 : 0);
    if (t && n.input(2))
      sites.push_back({&n, t, n.input(2), n.input(3), -1, matmul ? "B" : "data", n.attrInt("block_size", 0), true});
    return sites;
  }
  const QOpForm* form = qopFormOf(n);
  if (!form) return sites;
  auto add = [&](const ir::Value* t, int s, int zp, int64_t axis, const std::string& role) {
    const ir::Value* scale = s >= 0 ? n.input(static_cast<size_t>(s)) : nullptr;
    if (t && scale) sites.push_back({&n, t, scale, zp >= 0 ? n.input(static_cast<size_t>(zp)) : nullptr, axis, role});
  };
  for (const QOperand& op : form->operands)
    if (op.kind == QOperand::kDequantized)
      add(n.input(static_cast<size_t>(op.x)), op.s, op.zp, axisOf(op.axis, n, n.input(static_cast<size_t>(op.x))),
          op.name);
  if (form->variadic_from >= 0)
    for (size_t i = static_cast<size_t>(form->variadic_from); i + 2 < n.inputs().size(); i += 3)
      add(n.input(i), static_cast<int>(i + 1), static_cast<int>(i + 2), -1, "x" + std::to_string(i));
  if (form->y_scale >= 0) add(n.output(0), form->y_scale, form->y_zero_point, -1, "y");
  return sites;
}

}  // namespace qconv::analysis
