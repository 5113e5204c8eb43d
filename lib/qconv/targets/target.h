// A target: one runtime that reads quantized ONNX, as data. What each field says was measured by
// running that runtime (tests/integration/test_targets.py; the matrix is docs/targets.md), or
// for TensorRT, which needs a GPU, read off its documented explicit-quantization rules.
//
// The passes read the profile (PassOptions::target) where they choose a form: the fusions, move-
// on-int8, shift-types (through the storage types), check-saturation, check-zero-points and
// check-target. No pass tests a target's name. Without --target the profile is unrestricted():
// every form qconv writes is allowed, today's behaviour.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qconv {

/// One thing a runtime may not be given, and what it does with it when it is (the message
/// of every refusal it causes). `allowed` false: qconv does not write it for this target.
struct Limit {
  bool allowed = true;
  std::string_view why;  // "IREE 3.13 computes a per-channel QLinearConv 198-255 steps off"
};

/// A com.microsoft op a runtime was measured with: `why` empty when it runs it (qconv keeps it in
/// that target's output), else what it does with it (the message of its refusal).
struct ContribOp {
  std::string_view op;
  std::string_view why;
};

/// How a node is given to a runtime, as the per-op support tables tell them apart.
enum class OpForm : uint8_t {
  kAny,        // every form
  kFloat,      // on float tensors: its input 0 does not come from a DequantizeLinear
  kQuantized,  // between DequantizeLinear and QuantizeLinear: input 0 from a DequantizeLinear
};

/// An op a runtime does not run in some form, measured there: check-ops refuses such a node
/// with `why`. tests/integration/test_op_tables.py runs each rule's probe in its runtime.
struct OpRule {
  std::string_view op;
  OpForm form = OpForm::kAny;
  int32_t type = 0;             // kQuantized: only when input 0 is dequantized from this type (0: any)
  int non_constant_input = -1;  // >= 0: only when this input is not a constant (an initializer or a Constant node)
  std::string_view through;     // non-empty: only when a node of this type computes that input (a Cast in a shape)
  std::string_view why;         // the runtime's words
  bool from_constants = false;  // only when that input is computed from constants alone (a constant quantized at run time)
  std::string_view other_from = {};  // non-empty: only when the other input of a two-input op is this op's output, through Q/DQ
  int not_ones_input = -1;  // >= 0: only when this input is a constant holding a value other than 1 (a Slice's steps)
  std::string_view from = {};  // non-empty: only when that input (of a two-input op) is this op's output, through Q/DQ
  int siblings = 0;  // >= 2: only when this many nodes of the op (the node among them) each read, through Q/DQ, a
                     // different output of one Split, or a Slice of one tensor (an LSTM cell's gates, written out)
  int constant_input = -1;  // >= 0: only when this input is a constant (an initializer or a Constant node's output)
};

/// Inputs of an op that a runtime takes only as constants, and its words for what it does otherwise.
struct ConstantInputs {
  std::string_view op;
  std::vector<int> inputs;
  std::string_view why;
};

/// An op that takes a constant only in float, and the runtime's words for what it does otherwise.
struct FloatReader {
  std::string_view op;
  std::string_view why;
};

/// 8-bit storage types, as a set.
enum : uint8_t { kUint8 = 1, kInt8 = 2 };

struct TargetProfile {
  std::string_view name;      // --target NAME
  std::string_view runtime;   // the runtime and version the profile was measured on
  std::string_view summary;   // one line for 'qconv targets'

  // ---- the format: which groups become QOp and which stay QDQ
  Limit qop;                   // QOperator ops at all (QLinearConv, QLinearMatMul)
  /// ConvInteger and MatMulInteger (quantize_dynamic's, left where no scale chain follows them):
  /// refused with this where it says no; where it allows them, with `qop`'s rule and words.
  Limit integer_ops;
  Limit qdq;                   // QuantizeLinear/DequantizeLinear pairs
  bool default_qop = false;    // what --target alone writes: --format qop, else qdq
  Limit contrib;               // com.microsoft QLinear* ops (with --contrib); and any com.microsoft op not listed below
  /// com.microsoft ops measured one by one: kept where `why` is empty, else refused with it.
  std::vector<ContribOp> contrib_ops;
  /// An unlisted com.microsoft op's refusal, when `contrib`'s does not hold for every op ({} is
  /// the op); empty: contrib.why.
  std::string_view unlisted_why;

  // ---- granularity each op may have
  Limit per_axis;              // QuantizeLinear/DequantizeLinear with one scale per channel
  Limit per_axis_activation;   // the same on a tensor that is not a constant (per channel only on weights)
  Limit blocked;               // QuantizeLinear/DequantizeLinear with block_size (blocked weights)
  Limit float_compute;         // a dequantized constant read by an op whose output is not quantized (weight-only)
  bool float_compute_per_axis_only = false;  // float_compute holds for a constant with several scales only
  Limit conv_per_channel;      // QLinearConv with per-channel weight scales
  Limit matmul_per_column;     // QLinearMatMul with per-column b scales

  // ---- storage
  int32_t activation_type = 0;  // store 8-bit activations as this onnx::TensorProto type (0: keep)
  /// Non-empty: why, an input's 8-bit activations of the other type do not run there as they are
  /// (verify --target says so; convert stores them as activation_type).
  std::string_view activation_why;
  int32_t weight_type = 0;      // the same for weights
  uint8_t move_on = kUint8 | kInt8;  // data movement (MaxPool, Reshape, ...) runs on these 8-bit types
  std::string_view move_why;    // what the runtime does on the others (dequantize-moves then moves them between
                                // DQ and Q, in float, where that is exact)
  Limit nonzero_zero_point;     // a zero point other than 0
  Limit uint8;                  // uint8 Q/DQ at all
  Limit int32_dequantize;       // DequantizeLinear of int32 (a bias): else given in float, exactly
  /// Ops that take a constant only in float where the model dequantizes it (a bias an Add reads, a
  /// LayerNormalization's scale and bias): fold-dequantized-constants gives them the very floats.
  std::vector<FloatReader> float_readers;
  /// The element types its QuantizeLinear/DequantizeLinear take (onnx::TensorProto numbers; uint8
  /// and int32 as the two limits above say); empty: every type ONNX allows. Another type is
  /// refused with `types_why`.
  std::vector<int32_t> quant_types;
  std::string_view types_why;
  /// Of those, the types it takes for weights only: a DequantizeLinear of a constant.
  std::vector<int32_t> weight_only_types;

  // ---- ops: what it does not run, per op and form (measured; `op_rules_measured` says on what)
  std::vector<OpRule> op_rules;
  std::string_view op_rules_measured;

  // ---- the rest
  int64_t opset_min = 1;        // the default-domain opsets it reads (a model with per-axis Q/DQ needs 13 anyway)
  int64_t opset_max = 0;        // 0: none known above what qconv writes
  /// Ops it reads only from an opset on (measured): a model with one is declared at that opset at
  /// least (redeclare-opset, where every node keeps its meaning; else exit 4 naming the node).
  std::vector<std::pair<std::string_view, int64_t>> op_opset_min;
  /// Non-empty: a 2-D MatMul whose A is a quantized graph input is written as a 1x1 Conv between
  /// Unsqueeze and Squeeze (matmul-as-conv), and this says why (RKNN's build never ends on it).
  std::string_view matmul_as_conv;
  /// Non-empty: every QuantizeLinear/DequantizeLinear is given its zero point input, 0 where it
  /// had none (add-zero-points), and this says why (RKNN's constant folding reads input 2).
  std::string_view explicit_zero_points;
  /// Non-empty: a Reshape's output to a computed shape that the model leaves undeclared and a
  /// QuantizeLinear reads is declared with its quantized form's shape (declare-shapes), and this
  /// says why (IREE's importer takes it as rank 0).
  std::string_view declare_shapes;
  /// Non-empty: a shape the model computes from static shapes (Shape -> Slice -> Concat, Casts
  /// of constants) becomes that constant (fold-shapes), and this says why.
  std::string_view fold_shapes;
  /// Non-empty: a convolution's end padding that no output window reads is dropped (trim-padding),
  /// and this says why.
  std::string_view trim_padding;
  /// Non-empty: a reflect Pad becomes a Gather per padded axis (reflect-pad-as-gather), and this
  /// says why.
  std::string_view reflect_pad;
  /// Non-empty: a GlobalMaxPool becomes a ReduceMax over its spatial axes
  /// (global-max-pool-as-reduce-max), and this says why.
  std::string_view global_max_pool;
  /// Inputs the runtime takes only as constants: one the model computes from constants becomes its
  /// float value (fold-constant-weights).
  std::vector<ConstantInputs> constant_inputs;
  /// Non-empty: a Concat joining a tensor computed after a Reshape to a computed shape with one
  /// that is not fails (computed_dims.h), and this says why: refused where fold-shapes leaves one.
  std::string_view computed_dims_concat;
  /// Non-empty: the target runs no Erf, and says so; with --approximate a Gelu written with Erf
  /// becomes one Gelu (approximate-gelu; Gelu is in op_opset_min then).
  std::string_view gelu_for_erf;
  /// The runtime whose x86 u8 x s8 kernels can saturate on CPUs without VNNI ("onnxruntime"):
  /// check-saturation's advisory names it; empty: the runtime has none that can, no advisory.
  std::string_view saturating_kernels;

  /// Whether a pass for this target reads shapes ONNX's inference gives where the model declares
  /// none (trim_padding, reflect_pad, global_max_pool): the pass manager's stage "infer shapes".
  bool readsInferredShapes() const {
    return !trim_padding.empty() || !reflect_pad.empty() || !global_max_pool.empty();
  }

  /// The runtime's failure, in this profile's words, that every rewrite of the --target pass `pass`
  /// repairs (its contract's conditions are the failure's, as probed), or empty: verify names each
  /// node such a pass rewrites. trim-padding only: reflect-pad-as-gather rewrites pads IREE
  /// compiles too, fold-constant-weights weights OpenVINO runs too.
  std::string_view failsAsItIs(std::string_view pass) const { return pass == "trim-padding" ? trim_padding : ""; }
};

/// Whether `t` runs data movement on a tensor of ONNX type `type` (move_on; any type but int8 and
/// uint8: yes).
bool movesDataOn(const TargetProfile& t, int32_t type);
/// Whether `t`'s QuantizeLinear/DequantizeLinear take ONNX type `type` (quant_types; empty: every type).
bool takesType(const TargetProfile& t, int32_t type);

/// The line of `t.contrib_ops` for `op`, or null.
const ContribOp* findContribOp(const TargetProfile& t, std::string_view op);

/// Every target, in the order 'qconv targets' lists them.
const std::vector<TargetProfile>& targetProfiles();
/// The targets' names, comma-separated, in that order: what a usage error lists.
std::string targetNames();
/// The target called `name`, or null.
const TargetProfile* findTarget(std::string_view name);
/// The profile without --target: every form allowed, the saturation advisory on.
const TargetProfile& unrestricted();

}  // namespace qconv
