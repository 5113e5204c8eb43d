// Selector of shift-types: reads the graph, returns the group of 8-bit tensors around a seed and
// the first requirement it fails (numbers as in shift_types.cpp).
#include <fmt/format.h>

#include <deque>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/quant_slots.h"
#include "qconv/passes/target/shift_group.h"

namespace qconv {

namespace {

const QuantSlot* slotAt(const std::vector<QuantSlot>& slots, bool output, int index) {
  for (const auto& s : slots)
    if (s.output == output && s.data == index) return &s;
  return nullptr;
}

bool contains(const std::vector<int>& v, int x) {
  for (int y : v)
    if (y == x) return true;
  return false;
}

class Walk {
 public:
  Walk(ShiftGroup& g, std::set<const ir::Value*>& seen) : g_(g), seen_(seen) {}

  void run(ir::Value* seed) {
    queue_.push_back(seed);
    while (!queue_.empty()) {
      ir::Value* v = queue_.front();
      queue_.pop_front();
      if (!v || inGroup_.count(v)) continue;
      inGroup_.insert(v);
      seen_.insert(v);
      g_.values.push_back(v);
      visitProducer(v);
      visitReaders(v);
    }
  }

 private:
  void fail(const std::string& why) {
    if (g_.why.empty()) g_.why = why;
  }

  void type(int32_t t, const std::string& where) {  // (1) one 8-bit type
    if (t == 0) return;
    if (!ir::isInt8Like(t)) {
      g_.eight_bit = false;
      return fail(fmt::format("{} is {}, not int8 or uint8", where, ir::typeName(t)));
    }
    if (g_.type != 0 && g_.type != t) return fail(fmt::format("{} is {}, where the rest is {}", where, ir::typeName(t),
                                                              ir::typeName(g_.type)));
    g_.type = t;
  }

  void zeroPoint(ir::Node* n, int slot) {  // (4) constant zero points
    g_.zero_points.emplace_back(n, slot);
    const ir::Value* z = n->input(static_cast<size_t>(slot));
    if (!z) return;
    if (!z->isConstant()) return fail(fmt::format("{}: its zero point is not a constant", n->label()));
    const int32_t t = z->initializer()->data_type();
    type(t, fmt::format("{}'s zero point", n->label()));
    if (!ir::isInt8Like(t)) return;
    std::string why;
    auto values = ir::readInts(*z, &why);
    if (!values) return fail(fmt::format("{}: its zero point cannot be read: {}", n->label(), why));
    auto [lo, hi] = ir::intRange(t);
    for (int64_t v : *values)
      if (v < lo || v > hi) return fail(fmt::format("{}: its zero point {} is out of the {} range", n->label(), v, ir::typeName(t)));
  }

  void visitProducer(ir::Value* v) {  // (2)
    if (v->isConstant()) return type(v->initializer()->data_type(), v->name());
    type(v->elemType(), v->name());
    ir::Node* p = v->producer();
    if (!p) {
      g_.weight = false;  // a graph input
      return;
    }
    if (movesData(*p)) {
      for (int i : dataInputs(*p)) queue_.push_back(p->input(static_cast<size_t>(i)));
      for (int o : dataOutputs(*p)) queue_.push_back(p->output(static_cast<size_t>(o)));
      return;
    }
    g_.weight = false;
    const auto slots = quantSlots(*p);
    if (const QuantSlot* s = slotAt(slots, true, v->producerSlot())) {
      zeroPoint(p, s->zero_point);
      if (p->is("QuantizeLinear")) {
        g_.quantizers.push_back(p);
        if (!p->input(2)) type(static_cast<int32_t>(p->attrInt("output_dtype", onnx::TensorProto::UINT8)),
                               p->label() + "'s output");
      }
      return;
    }
    g_.foreign_written.push_back(v);  // e.g. a contrib op: moved by a converter after it
  }

  void visitReaders(ir::Value* v) {  // (3)
    if (v->hasImplicitUses()) fail(fmt::format("{} is read by a subgraph", v->name()));
    for (const ir::Use& u : v->uses()) {
      if (u.index < 0) continue;
      ir::Node* n = u.node;
      if (movesData(*n) && contains(dataInputs(*n), u.index)) {
        for (int i : dataInputs(*n)) queue_.push_back(n->input(static_cast<size_t>(i)));
        for (int o : dataOutputs(*n)) queue_.push_back(n->output(static_cast<size_t>(o)));
        continue;
      }
      if (isZeroPointInput(*n, u.index)) {  // v is also a zero point (of data in this group or another)
        if (!v->isConstant()) g_.foreign_readers.push_back(u);  // computed: it reads the old values, converted back
        continue;  // a constant: moved by the group of the data it describes, if that group moves
      }
      const auto slots = quantSlots(*n);
      if (const QuantSlot* s = slotAt(slots, false, u.index)) {
        zeroPoint(n, s->zero_point);
        continue;
      }
      g_.foreign_readers.push_back(u);  // e.g. a Cast: it gets the old type back through a converter
    }
  }

  ShiftGroup& g_;
  std::set<const ir::Value*>& seen_;
  std::set<const ir::Value*> inGroup_;
  std::deque<ir::Value*> queue_;
};

}  // namespace

ShiftGroup selectShiftGroup(ir::Value* seed, std::set<const ir::Value*>& seen) {
  ShiftGroup g;
  Walk(g, seen).run(seed);
  if (g.why.empty() && g.type == 0) g.why = "its type is not known (no value_info, zero point or initializer says it)";
  return g;
}

}  // namespace qconv
