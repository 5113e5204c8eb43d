// shift-types: 8-bit tensors stored in the other 8-bit type, their zero points moved by 128.
//
// Before:  w:int8 -> DQ(s, z:int8)                   x -> Q(s, zx:int8) -> x_q:int8 -> DQ(s, zx)
// After:   w + 128:uint8 -> DQ(s, z + 128:uint8)      x -> Q(s, zx + 128:uint8) -> x_q:uint8 -> DQ(s, zx + 128)
//   (and the same for QLinearConv / QLinearMatMul / ConvInteger / MatMulInteger operands)
//
// q - z is unchanged for every element, so every real value and every result is the same: the
// shift is exact by construction. It exists for runtimes whose kernels differ by type:
// onnxruntime's x86 u8 x s8 kernels saturate on CPUs without VNNI, its u8 x u8 ones do not
// (docs/onnxruntime-cpu.md). --weight-type moves weights (groups whose sources are all constant
// initializers), --activation-type the others. No kernel takes int8 activations with uint8
// weights, so --weight-type uint8 alone moves activations to uint8 too, and --activation-type
// int8 alone moves weights to int8 (run() refuses the two flags asking for that pair).
//
// The unit is a group (shift_group.h): 8-bit tensors joined by data-movement ops. A group moves
// when all of these hold (select_shift.cpp); otherwise it stays, with a warning naming the
// tensor and the requirement that failed:
//   1. all its tensors are int8 or uint8, one type;
//   2. no subgraph reads any of them;
//   3. every zero point of the quantized-data slots that read or write them (quant_slots.h) is
//      a constant, or absent (0).
//   4. (--target whose runtime takes zero points 0 only, without --approximate) no zero point of
//      the group would be other than 0 once moved: else the group is unconvertible, the reason
//      quoting the model's own zero point and the one the shift would make (TensorRT's uint8 at
//      0 is int8 at -128).
// A constant that is also a zero point moves as a zero point only with the data it describes: its
// data uses and its zero point uses may belong to different groups, one moving and one not.
// What has no zero point to move keeps its type: a graph input, or a tensor written by another
// op, moves through DQ(1, 0) -> Q(1, +-128) right after it; a graph output, or a read by another
// op (a Cast, a contrib op), gets the old type back through the reverse converter right before
// it. A converter reads and writes at the group's own scale and zero point (its representation,
// so verify sees one per tensor), exact: ((q - z) * s) / s rounds back to q - z for 8-bit values
// and a normal scale; scale 1 where the group has no constant scalar one.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "qconv/diag.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/common/quant_slots.h"
#include "qconv/passes/common/target_fit.h"
#include "qconv/passes/target/shift_group.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

using onnx::TensorProto;

/// Shifted copies of constants, made once per (constant, target type).
class Shifted {
 public:
  Shifted(ir::Graph& g, ir::ByteKeeper* keeper, std::string path) : g_(g), keeper_(keeper), path_(std::move(path)) {}

  /// `v`'s values plus delta, as `to`; v null: the scalar delta (an absent zero point, 0).
  /// Moving an 8-bit value by 128 to the other 8-bit type flips its top bit: the bytes are
  /// streamed through once (ir::ByteStream), 1 MiB at a time, and a weight of 1 MiB or more goes
  /// to the keeper's file piece by piece (ir::ByteKeeper::keepPieces): never whole in memory.
  ir::Value* of(const ir::Value* v, int32_t to) {
    auto key = std::make_tuple(v, to);
    if (auto it = made_.find(key); it != made_.end()) return it->second;
    auto t = std::make_unique<onnx::TensorProto>();
    t->set_data_type(to);
    ir::Value* made = nullptr;
    if (!v) {
      t->mutable_raw_data()->assign(1, static_cast<char>(0x80));
      made = g_.addInitializer("zero_point", std::move(t));
    } else {
      for (int64_t d : ir::dimsOf(*v->initializer())) t->add_dims(d);
      ir::ByteStream in(*v, buffer_);  // a file that cannot be read throws Error(BadInput): the input's fault
      if (!in.ok()) throw Error(ExitCode::BadInput, fmt::format("{}: {}: {}", path_, v->name(), in.why()));
      constexpr int64_t kPiece = int64_t{1} << 20;
      auto flipped = [&](std::string& out, int64_t n) {  // the next n bytes, top bit flipped
        const uint8_t* bytes = in.next(static_cast<size_t>(n));
        QCONV_ASSERT(bytes, "{}: {}: {} bytes past the end of a {}-byte stream", path_, v->name(), n, in.size());
        const size_t at = out.size();
        out.resize(at + static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) out[at + static_cast<size_t>(i)] = static_cast<char>(bytes[i] ^ 0x80);
      };
      if (keeper_ && in.size() >= kPiece) {
        t->set_name(v->name());
        int64_t left = in.size();
        const ir::FileBytes kept = keeper_->keepPieces(*t, static_cast<uint64_t>(in.size()), [&](std::string& piece) {
          piece = keeper_->buffer(0);
          const int64_t n = std::min(left, kPiece);
          flipped(piece, n);
          left -= n;
        });
        made = g_.newValue(v->name(), to);
        g_.setInitializer(made, std::move(t), kept);
      } else {
        std::string* raw = t->mutable_raw_data();
        raw->reserve(static_cast<size_t>(in.size()));
        for (int64_t left = in.size(); left > 0; left -= std::min(left, kPiece)) flipped(*raw, std::min(left, kPiece));
        made = g_.addInitializer(v->name(), std::move(t));
      }
    }
    made_.emplace(key, made);
    return made;
  }

  /// A scalar integer constant of type `t`.
  ir::Value* scalar(int32_t t, int64_t value) {
    return g_.addInitializer("shift_zero_point", ir::makeIntTensor(t, {}, {value}));
  }

 private:
  ir::Graph& g_;
  ir::ByteKeeper* keeper_;  // the model's: where a large shifted weight goes, or null
  std::map<std::tuple<const ir::Value*, int32_t>, ir::Value*> made_;
  std::string path_;
  std::string buffer_;  // file bytes, for ir::ByteStream
};

/// The representation a converter reads and writes a group's tensors at: the group's own scale
/// (a constant scalar of one of its quantizers) and its zero point in the group's old type; or
/// scale 1 at zero point 0 when the group has none such (the same numbers, exactly, either way).
struct Representation {
  ir::Value* scale = nullptr;  // null: 1
  int64_t zero_point = 0;
};

Representation representationOf(const ShiftGroup& g) {
  for (auto [n, slot] : g.zero_points) {
    std::string why;
    ir::Value* s = n->input(static_cast<size_t>(slot - 1));
    const ir::Value* z = n->input(static_cast<size_t>(slot));
    if (!s || !s->isConstant() || ir::numElements(*s->initializer()).value_or(0) != 1) continue;
    const auto sv = ir::readFloats(*s, &why);
    // ((q - z) * s) / s rounds back to q - z exactly for 8-bit values when s is a normal float
    if (!sv || !std::isnormal((*sv)[0]) || (*sv)[0] > 1e36f) continue;
    if (!z) return {s, 0};
    if (!z->isConstant()) continue;
    const auto zv = ir::readInts(*z, &why);
    if (zv && zv->size() == 1) return {s, (*zv)[0]};
  }
  return {};
}

/// Insert before `before`: DQ(v, s, z_from) -> Q(s, z_to): v's integers moved from `from` to `to`
/// (z_to = z_from +- 128), at the group's own representation `r` (its scale, and its zero point
/// in the group's old type `old`), so that the converter reads v as every other reader does.
ir::Node* converter(ir::Graph& g, Shifted& c, ir::Value* v, int32_t from, int32_t to, ir::Node* before, const Representation& r,
                    int32_t old) {
  ir::Value* scale = r.scale ? r.scale : g.addInitializer("shift_scale", ir::makeFloatTensor({}, {1.0f}));
  const int64_t moved = r.zero_point + (old == TensorProto::UINT8 ? -128 : 128);  // the zero point in the other type
  const int64_t z_from = from == old ? r.zero_point : moved, z_to = to == old ? r.zero_point : moved;
  ir::Node* dq = g.createNode("DequantizeLinear", "", {v, scale, c.scalar(from, z_from)}, 1, before);
  ir::Node* q = g.createNode("QuantizeLinear", "", {dq->output(0), scale, c.scalar(to, z_to)}, 1, before);
  q->output(0)->setElemType(to);
  return q;
}

bool foreign(const std::vector<ir::Value*>& vs, const ir::Value* v) { return std::find(vs.begin(), vs.end(), v) != vs.end(); }
bool foreign(const std::vector<ir::Use>& us, const ir::Use& u) {
  return std::any_of(us.begin(), us.end(), [&](const ir::Use& x) { return x.node == u.node && x.index == u.index; });
}

/// The rewrite: every value, zero point and quantizer of the group moves from g.type to `to`.
void shiftGroup(ir::Graph& graph, Shifted& c, const ShiftGroup& g, int32_t to) {
  ir::Node* first = graph.nodes().front();
  const Representation rep = representationOf(g);  // read before the zero points move
  std::vector<ir::Value*> kept;  // values that keep the old type (a converter after them)
  for (ir::Value* v : g.values) {
    const std::vector<ir::Use> uses = v->uses();
    if (v->isConstant()) {  // a weight: its values move, where they are data
      ir::Value* moved = c.of(v, to);
      for (const ir::Use& u : uses)  // where v is also a zero point, the group of the data it describes moves it
        if (!isZeroPointInput(*u.node, u.index)) graph.setInput(u.node, static_cast<size_t>(u.index), moved);
      graph.pruneIfDead(v);
    } else if (!v->producer() || foreign(g.foreign_written, v)) {  // keeps its type: moved right after it
      kept.push_back(v);
      ir::Node* q = converter(graph, c, v, g.type, to, v->producer() ? graph.nextNode(v->producer()) : first, rep, g.type);
      for (const ir::Use& u : uses)
        if (!foreign(g.foreign_readers, u)) graph.setInput(u.node, static_cast<size_t>(u.index), q->output(0));
    } else if (v->isGraphOutput()) {  // a graph output keeps its type: moved back right before it
      ir::Node* p = v->producer();
      const int slot = v->producerSlot();
      ir::Node* back = converter(graph, c, v, to, g.type, nullptr, rep, g.type);
      graph.takeOutput(back, 0, v);
      ir::Value* inner = p->output(static_cast<size_t>(slot));
      inner->setElemType(to);
      graph.setInput(back->inputs()[0]->producer(), 0, inner);
      for (const ir::Use& u : uses) graph.setInput(u.node, static_cast<size_t>(u.index), inner);
    } else {
      v->setElemType(to);
    }
  }
  for (const ir::Use& u : g.foreign_readers) {  // the old type back, right before the reader
    if (foreign(kept, u.node->input(static_cast<size_t>(u.index)))) continue;  // it reads the unmoved value
    ir::Node* back = converter(graph, c, u.node->input(static_cast<size_t>(u.index)), to, g.type, u.node, rep, g.type);
    graph.setInput(u.node, static_cast<size_t>(u.index), back->output(0));
  }
  for (auto [n, slot] : g.zero_points) {
    ir::Value* old = n->input(static_cast<size_t>(slot));
    graph.setInput(n, static_cast<size_t>(slot), c.of(old, to));
    if (old) graph.pruneIfDead(old);
  }
  for (ir::Node* q : g.quantizers)
    for (auto& a : *q->mutableProto().mutable_attribute())
      if (a.name() == "output_dtype") a.set_i(to);
}

/// The rule: at each node with quantized-data slots, the groups of the tensors in them not seen
/// yet, one per answer (kSeveralPerNode).
struct ShiftTypes {
  static constexpr bool kSeveralPerNode = true;
  struct Group {
    ShiftGroup group;
    int32_t to;
    ir::Node* at;
    ir::Value* seed;
  };
  Shifted shifted;
  int32_t weight_to, activation_to;
  bool implied_weights, implied_activations;
  const TargetProfile& target;
  bool approximate;
  std::set<const ir::Value*> seen;

  /// (5) The zero point the shift would give, where the target takes 0 only: a reason quoting
  /// the model's own value, or empty. (--approximate: requantize-symmetric handles it after.)
  std::string zeroPointAfterShift(const ShiftGroup& g, int32_t to, const ir::Node& at) const {
    if (target.nonzero_zero_point.allowed || approximate) return {};
    const int64_t delta = to == onnx::TensorProto::UINT8 ? 128 : -128;
    for (auto [n, slot] : g.zero_points) {
      const ir::Value* z = n->input(static_cast<size_t>(slot));
      std::string why;
      const auto values = z ? ir::readInts(*z, &why) : std::optional<std::vector<int64_t>>(std::vector<int64_t>{0});
      if (!values) continue;  // the selector said why already
      for (int64_t v : *values)
        if (v + delta != 0)
          return fmt::format("{}its zero point is {} on {}, which is {} stored as {}: {}", n == &at ? "" : n->label() + ": ", v,
                             ir::typeName(g.type), v + delta, ir::typeName(to), target.nonzero_zero_point.why);
    }
    return {};
  }

  bool root(const ir::Node& n) const { return !quantSlots(n).empty(); }
  std::string declined(const ir::Node&) const { return ""; }

  Match<Group> select(ir::Node& n) {
    for (const auto& s : quantSlots(n)) {
      ir::Value* seed = s.output ? n.output(static_cast<size_t>(s.data)) : n.input(static_cast<size_t>(s.data));
      if (!seed || seen.count(seed)) continue;
      ShiftGroup g = selectShiftGroup(seed, seen);
      const int32_t to = g.weight ? weight_to : activation_to;
      if (!to || g.type == to || !g.eight_bit) continue;
      if (!g.why.empty())
        return Match<Group>::refuseAbout(seed->name(), fmt::format("{} not stored as {}: {}", g.weight ? "weight" : "activation",
                                                                   ir::typeName(to), g.why),
                                         Report::Warning);
      if (std::string why = zeroPointAfterShift(g, to, n); !why.empty()) return Match<Group>::unconvertible(why);
      return Group{std::move(g), to, &n, seed};
    }
    return Match<Group>::none();
  }

  void rewrite(ir::Graph& graph, Group& s, PassContext& ctx) {
    const char* kind = s.group.weight ? "weight" : "activation";
    const std::string seed = s.seed->name();
    shiftGroup(graph, shifted, s.group, s.to);
    ctx.count(fmt::format("{}s stored as {}", kind, ir::typeName(s.to)));
    if ((s.group.weight && implied_weights) || (!s.group.weight && implied_activations))
      ctx.report(Report::Detail, *s.at, fmt::format("{} {} stored as {} too: onnxruntime has no kernel for int8 activations with "
                                                    "uint8 weights", kind, seed, ir::typeName(s.to)));
  }
};

}  // namespace

void shiftTypes(ir::Model& model, PassContext& ctx) {
  const StorageTypes to = storageTypes(ctx.options());
  const int32_t weight_to = to.weight, activation_to = to.activation;
  const bool implied_activations = activation_to != ctx.options().activation_type;
  const bool implied_weights = weight_to != ctx.options().weight_type;
  if (!weight_to && !activation_to) return;
  ShiftTypes rule{Shifted(model.graph, model.byte_keeper.get(), ctx.path()), weight_to, activation_to, implied_weights,
                  implied_activations, ctx.target(), ctx.options().approximate, {}};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
