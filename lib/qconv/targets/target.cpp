// The targets, one profile each: what each runtime runs exactly, and what it is refused or
// computes wrong, as measured (docs/targets.md has the matrix and the versions).
#include "qconv/targets/target.h"

#include <onnx/onnx_pb.h>

#include <algorithm>

namespace qconv {

namespace {

constexpr Limit no(std::string_view why) { return Limit{false, why}; }

std::vector<TargetProfile> makeProfiles() {
  std::vector<TargetProfile> all;

  TargetProfile ort;
  ort.name = "onnxruntime";
  ort.runtime = "onnxruntime 1.32 (CPU)";
  ort.summary = "QOp (QLinearConv, QLinearMatMul; com.microsoft ops with --contrib) or QDQ; any granularity";
  ort.default_qop = true;
  ort.saturating_kernels = "onnxruntime";
  // measured 2026-11-26 (test_target_limits.py): Q -> DQ and a DQ'd constant of each type, exact; float4e2m1 NOT_IMPLEMENTED
  ort.quant_types = {onnx::TensorProto::INT8, onnx::TensorProto::UINT8, onnx::TensorProto::INT16, onnx::TensorProto::UINT16,
                     onnx::TensorProto::INT32, 22 /* INT4 */, 21 /* UINT4 */, 26 /* INT2 */, 25 /* UINT2 */,
                     17 /* FLOAT8E4M3FN */, 18 /* FLOAT8E4M3FNUZ */, 19 /* FLOAT8E5M2 */, 20 /* FLOAT8E5M2FNUZ */};
  ort.types_why = "onnxruntime 1.32 has no float4e2m1 QuantizeLinear/DequantizeLinear kernel (NOT_IMPLEMENTED)";
  // measured 2026-11-28: a QDQ Conv declared at opsets 21 to 27 runs; at 28, "Could not find an
  // implementation for QuantizeLinear(28)"
  ort.opset_max = 27;
  all.push_back(ort);

  TargetProfile trt;
  trt.name = "tensorrt";
  trt.runtime = "TensorRT 10 (explicit quantization, as documented; not run here: it needs a GPU)";
  trt.summary = "QDQ only, int8 at zero point 0 for activations and weights";
  trt.qop = no("TensorRT takes explicit quantization only (QuantizeLinear/DequantizeLinear), no QOperator ops");
  trt.contrib = no("TensorRT runs no com.microsoft quantized op");
  trt.activation_type = onnx::TensorProto::INT8;
  trt.weight_type = onnx::TensorProto::INT8;
  trt.nonzero_zero_point = no("TensorRT takes symmetric quantization only: every zero point must be 0");
  trt.uint8 = no("TensorRT quantizes to int8 (or float8/int4), never uint8");
  trt.int32_dequantize = no("TensorRT dequantizes int8 (float8, int4) only: a bias is given in float");
  trt.quant_types = {onnx::TensorProto::INT8, onnx::TensorProto::UINT8, onnx::TensorProto::INT32, 17 /* FLOAT8E4M3FN */,
                     22 /* INT4 */};
  trt.types_why = "TensorRT 10 quantizes to int8 and float8 e4m3fn, and dequantizes int4 weights, only";
  trt.weight_only_types = {22 /* INT4 */};
  trt.opset_min = 13;  // per-axis QuantizeLinear/DequantizeLinear
  all.push_back(trt);

  TargetProfile ov;
  ov.name = "openvino";
  ov.runtime = "OpenVINO 2026.4 (CPU)";
  ov.summary = "QDQ (default), or QOp with per-channel groups left in QDQ, uint8 activations; no com.microsoft ops";
  ov.contrib = no("OpenVINO 2026.4 computes com.microsoft QLinearAveragePool, QLinearLeakyRelu and QLinearAdd wrong and "
                  "has no conversion rule for QLinearGlobalAveragePool");
  ov.contrib_ops = {
      {"QLinearAveragePool", "OpenVINO 2026.4 computes com.microsoft QLinearAveragePool wrong (13-82 steps off)"},
      {"QLinearLeakyRelu", "OpenVINO 2026.4 computes com.microsoft QLinearLeakyRelu wrong (13-82 steps off)"},
      {"QLinearAdd", "OpenVINO 2026.4's com.microsoft QLinearAdd wraps around instead of saturating"},
      {"QLinearGlobalAveragePool", "OpenVINO 2026.4 has no conversion rule for com.microsoft QLinearGlobalAveragePool"},
      // measured 2026-11-26: MatMulNBits to float rounding (2.4e-7 of 2.6), DynamicQuantizeLSTM 0.0019 of 0.68 from
      // onnxruntime's (which quantizes the activations too)
      {"MatMulNBits", ""},
      {"DynamicQuantizeLSTM", ""},
  };
  ov.unlisted_why = "OpenVINO 2026.4 was not measured running com.microsoft {} (qconv keeps a com.microsoft op only where "
                    "its runtime was measured to run it)";
  ov.conv_per_channel = no("OpenVINO 2026.4 refuses a QLinearConv with per-channel weight scales (it checks the scale "
                           "count against x's axis 1)");
  ov.matmul_per_column = no("OpenVINO 2026.4 refuses a QLinearMatMul with per-column scales ('Scalar value can't be "
                            "derived')");
  // int8 activations: OpenVINO runs a QLinearConv on them, but not data movement between convs
  // measured under an emulated AVX2 CPU (qemu -cpu Haswell): OpenVINO's int8 kernels saturate too
  // measured 2026-11-28 (the corpus's PP-OCR classifier, QDQ and QOp): its low-precision AddTransformation throws
  // on an Add of a dequantized activation and a dequantized [1, C, 1, 1] constant ("index '0' out of range");
  // with the constant given in float (the very floats the DequantizeLinear computes) it compiles and runs
  // measured 2026-11-28 (the corpus's s8s8 inputs: captcha, orientation; test_targets' s8s8 CNN with int8 kept)
  ov.activation_why = "OpenVINO 2026.4 at its default precision (bf16 on a CPU with avx512_bf16) finds no kernel for "
                      "int8 activations ('No suitable implementations'): convert --target openvino stores them as uint8, "
                      "--target openvino-f32 keeps them for INFERENCE_PRECISION_HINT f32";
  ov.float_readers = {{"Add", "OpenVINO 2026.4's AddTransformation throws on an Add of a dequantized constant"}};
  // measured 2026-11-28 (the PP-OCR classifier's bias Add, and probes): a Conv's output plus a constant that the
  // model quantizes at run time (QuantizeLinear of a constant, or of a Reshape of one, then DequantizeLinear) throws,
  // at either precision (after a Relu, Sigmoid or MaxPool it runs); fold-producers computes such a constant's
  // integers, exactly, and the Add then runs
  const std::string_view ov_qconst = "OpenVINO 2026.4's AddTransformation throws on a Conv's output plus a constant quantized "
                                     "at run time ('index 0 out of range'); convert folds such a QuantizeLinear where it can "
                                     "compute it";
  ov.op_rules_measured = "openvino 2026.4, 2026-11-28 and 2026-11-29";
  // measured 2026-11-29 (Silero VAD, every form: its LSTM weights' gates reordered by Slices and a Concat of
  // constants, quantized at run time; and probes): such a weight fails to compile, at either precision;
  // given as floats it runs (fold-constant-weights computes them)
  const std::string_view ov_lstm = "OpenVINO 2026.4 takes an LSTM's W, R and B only as constants: one the model "
                                   "quantizes at run time fails to compile ('LSTMSequence ... expects Constant for port "
                                   "4'); convert computes such a weight to its floats where it can";
  // measured 2026-11-29 (probes): a quantized LSTM (X dequantized) whose W is an int8 constant dequantized
  // while R is a float constant, or the other way round, fails the same way, at either precision; with
  // both dequantized, or X float, it runs
  const std::string_view ov_lstm_mixed = "OpenVINO 2026.4 fails to compile a quantized LSTM with one of W and R "
                                         "dequantized and the other float ('LSTMSequence ... expects Constant for port "
                                         "4'); convert computes the dequantized one to its floats";
  ov.constant_inputs = {{"LSTM", {1, 2, 3}, ov_lstm}};
  ov.op_rules = {{"Add", OpForm::kQuantized, 0, 0, "QuantizeLinear", ov_qconst, true, "Conv"},
                 {"Add", OpForm::kQuantized, 0, 1, "QuantizeLinear", ov_qconst, true, "Conv"},
                 {"LSTM", OpForm::kAny, 0, 1, "QuantizeLinear", ov_lstm, true},
                 {"LSTM", OpForm::kAny, 0, 2, "QuantizeLinear", ov_lstm, true},
                 {"LSTM", OpForm::kAny, 0, 3, "QuantizeLinear", ov_lstm, true},
                 {"LSTM", OpForm::kQuantized, 0, 1, "DequantizeLinear", ov_lstm_mixed, true, {}, -1, {}, 0, 2},
                 {"LSTM", OpForm::kQuantized, 0, 2, "DequantizeLinear", ov_lstm_mixed, true, {}, -1, {}, 0, 1}};
  ov.saturating_kernels = "OpenVINO";
  ov.quant_types = {onnx::TensorProto::INT8, onnx::TensorProto::UINT8, onnx::TensorProto::INT16, onnx::TensorProto::INT32,
                    22 /* INT4 */, 21 /* UINT4 */};
  ov.types_why = "OpenVINO 2026.4 computes uint16 and float8 e4m3fn/e5m2 QuantizeLinear/DequantizeLinear wrong (1.2 to 3.2 off "
                 "on a 4-element test, silently) and reads no 2-bit, float8 fnuz or float4 ones (measured)";
  ov.activation_type = onnx::TensorProto::UINT8;
  ov.move_on = kUint8;
  ov.move_why = "OpenVINO 2026.4 fails to compile int8 activations at a zero point other than 0 moved on int8 between "
                "convs (MaxPool, Unsqueeze: 'No suitable implementations')";
  all.push_back(ov);

  // The same CPU plugin at INFERENCE_PRECISION_HINT f32 (issue 47, measured 2026-11-28 on the corpus): there the
  // int8 activations an input has compute exactly (the captcha OCR's s8s8 QDQ: 0 steps off the reference),
  // and the uint8 form --target openvino writes for the plugin's default precision is 10 steps off. At the
  // default precision (bf16 where the CPU has avx512_bf16) those int8 activations find no kernel ('No
  // suitable implementations'): one form for each, said by the target's name.
  TargetProfile ov32 = ov;
  ov32.name = "openvino-f32";
  ov32.runtime = "OpenVINO 2026.4 (CPU) at INFERENCE_PRECISION_HINT f32";
  ov32.summary = "OpenVINO with INFERENCE_PRECISION_HINT f32: as openvino, 8-bit activations in the type the input has";
  ov32.activation_type = 0;
  ov32.activation_why = "";
  all.push_back(ov32);

  TargetProfile iree;
  iree.name = "iree";
  iree.runtime = "IREE 3.13 (iree-import-onnx: torch-mlir's ONNX importer; llvm-cpu)";
  iree.summary = "QDQ (default), or QOp with per-channel convs left in QDQ and data movement on int8";
  iree.contrib = no("IREE 3.13 has no lowering for com.microsoft QLinearSoftmax (QLinearAdd and QLinearGlobalAveragePool "
                    "run once their types are declared)");
  iree.contrib_ops = {{"QLinearSoftmax", "IREE 3.13 has no lowering for com.microsoft QLinearSoftmax"}};
  iree.unlisted_why = "IREE 3.13 (torch-mlir's importer) was not measured running com.microsoft {} (qconv keeps a "
                      "com.microsoft op only where its runtime was measured to run it)";
  iree.conv_per_channel = no("IREE 3.13 computes a QLinearConv with per-channel weight scales and a bias wrong (150-255 "
                             "steps off on every element)");
  iree.quant_types = {onnx::TensorProto::INT8, onnx::TensorProto::UINT8, onnx::TensorProto::INT16, onnx::TensorProto::INT32};
  iree.types_why = "IREE 3.13's importer (torch-mlir) takes 8-bit and int16 quantization only: uint16, 4-bit, 2-bit, "
                   "float8 and float4 fail to import (measured)";
  // measured 2026-11-28 (test_op_tables.py; the corpus's PP-OCR and captcha models): torch-mlir's importer
  // fails to legalize BatchNormalization below opset 15 and Unsqueeze/Squeeze in their opset-11 form;
  // measured 2026-11-29 (the YOLO detector; a lone Slice, float and int8): no Slice below opset 13
  iree.op_opset_min = {{"BatchNormalization", 15}, {"Unsqueeze", 13}, {"Squeeze", 13}, {"Slice", 13}};
  // measured 2026-11-28: the captcha OCR's Reshape to a computed shape, undeclared after
  // quantize_static, fails iree-compile; declared, it compiles and runs
  iree.declare_shapes = "IREE 3.13's ONNX importer (torch-mlir's) takes it as rank 0, and iree-compile fails after it "
                        "('operand and result must have the same size and dtype')";
  // measured 2026-11-28: Silero VAD's strided 1-D Convs (input 2, kernel 3, pads 1 and 1, stride 2), every form
  // measured 2026-11-28: Silero VAD's STFT pads its input (reflect) by pads it computes from constants
  iree.fold_shapes = "IREE 3.13 fails on a reflect Pad whose pads the model computes ('linalg.generic' op inferred "
                     "input/output operand #1 has shape's dimension #2 to be ..., but found ...)";
  // measured 2026-11-28 (Silero VAD's STFT; probes of a [1, 576] input): pads of 16 and 24 to 64 fail, 8 and 17 compile
  iree.reflect_pad = "IREE 3.13's lowering of a reflect Pad fails for some pad sizes ('linalg.generic' op inferred "
                     "input/output operand #0 has shape's dimension #0 to be greater than or equal to 64, but found 57)";
  iree.trim_padding = "IREE 3.13's lowering of a Conv fails where the end padding holds positions no window reads "
                      "('linalg.generic' op inferred input/output operand ... to be 4, but found 3)";
  iree.activation_type = onnx::TensorProto::INT8;
  iree.move_on = kInt8;
  iree.move_why = "IREE 3.13 moves 8-bit data on int8 only: it computes MaxPool on uint8 wrong (as if signed: up to 221 "
                  "steps off on over 80% of outputs)";
  all.push_back(iree);

  TargetProfile tvm;
  tvm.name = "tvm";
  tvm.runtime = "TVM 0.27 (relax ONNX frontend, llvm)";
  tvm.summary = "QDQ only";
  tvm.qop = no("TVM 0.27's ONNX frontend has no QLinearConv, QLinearMatMul or other QOperator op (OpNotImplemented)");
  tvm.contrib = no("TVM 0.27's ONNX frontend has no com.microsoft quantized op");
  tvm.quant_types = {onnx::TensorProto::INT8, onnx::TensorProto::UINT8, onnx::TensorProto::INT16, onnx::TensorProto::UINT16,
                     onnx::TensorProto::INT32};
  tvm.op_rules_measured = "apache-tvm 0.27.0.post1, 2026-11-28";
  tvm.op_rules = {
      {"LSTM", OpForm::kAny, 0, -1, "",
       "TVM 0.27's ONNX frontend has no LSTM ('The following operators are not supported for frontend ONNX: LSTM')"},
      {"Reshape", OpForm::kAny, 0, 1, "Cast",
       "TVM 0.27's ONNX frontend takes a computed shape only as Shape, Slice, Concat..., not through a Cast ('Reshape "
       "requires the input new shape to be Shape. However, the given one is relax.TensorType')"},
  };
  // measured 2026-11-28: the PP-OCR models' Reshapes to shapes computed through Casts, folded, run
  tvm.fold_shapes = "TVM 0.27's ONNX frontend takes a computed shape only as Shape, Slice, Concat..., not through a Cast";
  tvm.types_why = "TVM 0.27 runs 8- and 16-bit quantization only: its 4- and 2-bit constants fail to load (TensorCopyFromBytes) "
                  "and its QuantizeLinear takes no float8 or float4 (measured)";
  all.push_back(tvm);

  TargetProfile aidge;
  aidge.name = "aidge";
  aidge.runtime = "Aidge 0.10.1 (aidge_onnx import, aidge_backend_cpu)";
  aidge.summary = "QDQ (default) or QOp, per tensor only, int8 activations";
  aidge.contrib = no("Aidge 0.10.1 imports no com.microsoft quantized op");
  const std::string_view per_tensor_only =
      "Aidge 0.10.1 runs per-tensor quantization only (a per-channel DequantizeLinear has no forward(); a per-channel "
      "QLinearConv becomes a GenericOperator)";
  aidge.per_axis = no(per_tensor_only);
  aidge.conv_per_channel = no(per_tensor_only);
  aidge.matmul_per_column = no(per_tensor_only);
  aidge.activation_type = onnx::TensorProto::INT8;
  aidge.weight_type = onnx::TensorProto::INT8;
  aidge.move_on = kInt8;
  aidge.move_why = "Aidge 0.10.1 moves 8-bit data on int8 only: it has no uint8 kernel for MaxPool or Resize ('missing or "
                   "invalid registrar key [uint8 ...]')";
  aidge.op_rules_measured = "aidge-core, aidge-onnx, aidge-backend-cpu 0.10.1, 2026-11-28";
  const std::string_view aidge_ln = "aidge_onnx 0.10.1 imports a LayerNormalization whose scale or bias is computed (a "
                                    "DequantizeLinear's output) as a GenericOperator, which has no forward()";
  aidge.op_rules = {{"LSTM", OpForm::kAny, 0, -1, "",
                     "Aidge 0.10.1 does not schedule an imported LSTM ('Pop operator requires known, non-empty, input dims "
                     "for scheduling')"},
                    {"LayerNormalization", OpForm::kAny, 0, 1, "", aidge_ln},
                    {"LayerNormalization", OpForm::kAny, 0, 2, "", aidge_ln}};
  // measured 2026-11-29 (Magika's file-type classifier; alone: test_op_tables.py): no GlobalMaxPool at
  // any rank, float or quantized; a ReduceMax over the spatial axes runs, exactly
  const std::string_view aidge_gmp = "aidge_onnx 0.10.1 imports GlobalMaxPool as a GenericOperator, which has no "
                                     "forward() (a ReduceMax over its spatial axes runs)";
  aidge.op_rules.push_back({"GlobalMaxPool", OpForm::kAny, 0, -1, "", aidge_gmp});
  aidge.global_max_pool = aidge_gmp;
  // measured 2026-11-29 (the corpus's captcha_unrolled, opset 12; probes at 11 and 12, float and uint8): a
  // Split with its sizes in the attribute split (before opset 13) imports as a GenericOperator; with them as
  // input 1 (opset 13) it runs
  aidge.op_opset_min = {{"Split", 13}};
  // quantize_static dequantizes a LayerNormalization's scale and bias: given in float, it imports
  aidge.float_readers = {{"LayerNormalization", aidge_ln}};
  // measured 2026-11-28: ocr_rec's s8s8 and QOp forms (its SVTR neck reshapes to Shape -> Slice -> Concat), folded, run
  aidge.fold_shapes = "Aidge 0.10.1 forwards no dims through a Reshape whose shape it computes, in a whole model, and a "
                      "Concat joining that branch with another fails ('Every input must have the same DataFormat')";
  aidge.computed_dims_concat = "Aidge 0.10.1 forwards no dims past a Reshape whose shape it computes (PP-OCR's recognizer), "
                               "and such a Concat fails ('Every input must have the same DataFormat')";
  aidge.quant_types = {onnx::TensorProto::INT8, onnx::TensorProto::UINT8, onnx::TensorProto::INT32};
  aidge.types_why = "Aidge 0.10.1 runs 8-bit quantization (and int32 biases) only";
  all.push_back(aidge);

  TargetProfile qnn;
  qnn.name = "qnn";
  qnn.runtime = "Qualcomm QNN HTP (onnxruntime-qnn 2.7.0 on onnxruntime 1.32; its x86 HTP simulator)";
  qnn.summary = "QDQ only, data movement between DQ and Q, 8- and 16-bit activations, per channel on weights only";
  qnn.qop = no("QNN HTP (onnxruntime-qnn 2.7) takes QDQ: a QOp CNN fails the session (MaxPool on the 8-bit tensor is 'not "
               "selected by that EP'), a per-column QLinearMatMul falls back to the CPU");
  qnn.contrib = no("QNN HTP (onnxruntime-qnn 2.7) runs no com.microsoft op: QLinearAdd, QLinearGlobalAveragePool, QGemm and "
                   "MatMulNBits fall back to the CPU");
  qnn.per_axis_activation = no("QNN HTP (onnxruntime-qnn 2.7) takes per-channel quantization on weights only ('QNN EP does "
                               "not support a standalone Q op with per-channel quantization')");
  qnn.blocked = no("QNN HTP (onnxruntime-qnn 2.7) runs blocked weights on the CPU, not the NPU ('BQ MatMul activation must "
                   "be INT16-quantized'; with uint16 activations 'Failed to add BQ MatMul node')");
  // measured 2026-11-28: "Operators of type `ConvInteger` (`MatMulInteger`) are not supported by QNN EP"
  qnn.integer_ops = no("QNN HTP (onnxruntime-qnn 2.7) runs neither ConvInteger nor MatMulInteger ('Operators of type "
                       "`ConvInteger` are not supported by QNN EP')");
  // measured 2026-11-28: a per-tensor constant DequantizeLinear read by a float Sub or MatMul runs
  // wholly on HTP; a per-channel one is 'Unsupported nodes in QNN EP: { ... DequantizeLinear }'
  qnn.float_compute_per_axis_only = true;
  qnn.float_compute = no("QNN HTP (onnxruntime-qnn 2.7) takes a per-channel DequantizeLinear only inside a quantized op "
                         "(DQ inputs, a Q output): with float activations it runs on the CPU ('QNN EP does not support a "
                         "standalone DQ op with per-channel quantization'); a per-tensor one runs");
  qnn.move_on = 0;
  qnn.move_why = "QNN HTP (onnxruntime-qnn 2.7) fails the session on data movement run on an 8-bit tensor (MaxPool 'was "
                 "inserted using the NHWC format ... but was not selected by that EP'): it takes it between DQ and Q";
  // measured 2026-11-26: 8- and 16-bit Q/DQ run on HTP; int4 per-channel weights run; int4 blocked weights fall back (blocked)
  qnn.quant_types = {onnx::TensorProto::INT8, onnx::TensorProto::UINT8, onnx::TensorProto::INT16, onnx::TensorProto::UINT16,
                     onnx::TensorProto::INT32, 22 /* INT4 */};
  qnn.types_why = "QNN HTP (onnxruntime-qnn 2.7) quantizes to 8 and 16 bits, and takes int4 weights, only (measured)";
  qnn.weight_only_types = {22 /* INT4 */};
  // measured 2026-11-28 (test_op_tables.py, soc_model 60, CPU fallback disabled): int8 HardSigmoid,
  // LeakyRelu and Neg are 'Unsupported nodes in QNN EP' while uint8 and uint16 ones run; 8-bit
  // activations are therefore stored as uint8 (exact: every zero point moves by 128)
  qnn.activation_type = onnx::TensorProto::UINT8;
  qnn.op_rules_measured = "onnxruntime-qnn 2.7.0 (QNN HTP simulator, soc_model 60), 2026-11-28";
  const std::string_view qnn_int8 = "QNN HTP (onnxruntime-qnn 2.7) runs it on uint8 and uint16 activations, not int8 "
                                    "('Unsupported nodes in QNN EP'; convert --target qnn stores them as uint8)";
  const std::string_view qnn_ln = "QNN HTP (onnxruntime-qnn 2.7) runs a LayerNormalization on uint8 or uint16 with a float "
                                  "scale, not a dequantized one ('Unsupported nodes in QNN EP')";
  const std::string_view qnn_bounds = "QNN HTP (onnxruntime-qnn 2.7) takes Clip with constant bounds only ('QNN doesn't "
                                      "support dynamic min/max')";
  qnn.op_rules = {
      {"HardSigmoid", OpForm::kQuantized, onnx::TensorProto::INT8, -1, "", qnn_int8},
      {"LeakyRelu", OpForm::kQuantized, onnx::TensorProto::INT8, -1, "", qnn_int8},
      {"Neg", OpForm::kQuantized, onnx::TensorProto::INT8, -1, "", qnn_int8},
      // BatchNormalization on int8 runs with float parameters, not with quantize_static's dequantized ones
      {"BatchNormalization", OpForm::kQuantized, onnx::TensorProto::INT8, 1, "", qnn_int8},
      {"Erf", OpForm::kAny, 0, -1, "", "QNN HTP (onnxruntime-qnn 2.7) has no Erf, float or quantized ('Unsupported nodes in QNN EP')"},
      {"Clip", OpForm::kAny, 0, 1, "", qnn_bounds},
      {"Clip", OpForm::kAny, 0, 2, "", qnn_bounds},
      // LayerNormalization with quantize_static's dequantized scale runs on int8 only; with a float
      // scale on every type: fold-dequantized-constants gives it so (float_readers)
      {"LayerNormalization", OpForm::kQuantized, onnx::TensorProto::UINT8, 1, "", qnn_ln},
      {"LayerNormalization", OpForm::kQuantized, onnx::TensorProto::UINT16, 1, "", qnn_ln},
  };
  qnn.float_readers = {{"LayerNormalization", qnn_ln}};
  // measured 2026-11-28: the corpus's encoder with its Gelu chains written as Gelu runs wholly on HTP (u8s8
  // per channel and s8s8 per tensor), Gelu read from opset 20
  qnn.gelu_for_erf = "QNN HTP (onnxruntime-qnn 2.7) has no Erf; it runs Gelu";
  // measured 2026-11-28: per-tensor QDQ models declared at opsets 11 and 12 (the corpus's PP-OCR and
  // YOLO models) run; a per-axis QuantizeLinear/DequantizeLinear needs 13, as ONNX says
  // (redeclare-opset raises to it then: opsetFloor)
  qnn.opset_min = 10;
  qnn.op_opset_min = {{"Gelu", 20}};  // approximate-gelu writes Gelu, which ONNX defines from opset 20
  // measured 2026-11-28: onnxruntime-qnn's default offload_graph_io_quantization runs the graph
  // input's Q and output's DQ on onnxruntime's CPU kernels, which stop at opset 27 (above)
  qnn.opset_max = 27;
  qnn.saturating_kernels = "";
  all.push_back(qnn);

  TargetProfile rknn;
  rknn.name = "rknn";
  rknn.runtime = "Rockchip RKNN (rknn-toolkit2 2.5.0, rk3588, optimization level 2; its PC simulator)";
  rknn.summary = "QDQ only, opset 19 or lower, 8-bit, every zero point explicit";
  // measured 2026-11-28 (its PC simulator): a ConvInteger fails the build; a MatMulInteger builds and
  // computes exactly on the one model tried, its NPU placement not measured: refused, saying so
  rknn.integer_ops = no("rknn-toolkit2 2.5 refuses ConvInteger ('Not Support Dtype: 2. please check precision!'); "
                        "MatMulInteger builds, but qconv has not measured where its NPU runs it");
  rknn.qop = no("rknn-toolkit2 2.5 refuses QOperator ops (a QLinearConv alone: 'Missing quantization parameters'; "
                "QLinearMatMul graphs fail its shape inference)");
  rknn.contrib = no("rknn-toolkit2 2.5 refuses every com.microsoft op");
  rknn.opset_max = 19;
  rknn.quant_types = {onnx::TensorProto::INT8, onnx::TensorProto::UINT8, onnx::TensorProto::INT32};
  rknn.types_why = "rknn-toolkit2 2.5 reads opset 19 or lower ('Unsupport onnx opset 21, need <= 19'), where "
                   "QuantizeLinear/DequantizeLinear are 8-bit only (--approximate requantizes 16-bit tensors to 8 bits)";
  rknn.blocked = no("rknn-toolkit2 2.5 reads opset 19 or lower, which has no blocked DequantizeLinear");
  // measured 2026-11-28 (test_npu_targets.py, 60 s each): the build never ends on A = DQ(Q(a float graph
  // input)) whatever B is (a constant [K, N], a second graph input, a batched [2, K, N] constant);
  // it builds a uint8 graph input read by its DequantizeLinear (rank 2 and 4) and a weight-first MatMul
  rknn.matmul_as_conv = "rknn-toolkit2 2.5 never finishes building a MatMul whose input A is a float graph input "
                        "quantized by a QuantizeLinear (its graph optimizer loops at levels 2 and 3); as a 1x1 Conv it "
                        "builds";
  rknn.explicit_zero_points = "rknn-toolkit2 2.5's constant folding fails on a DequantizeLinear without its zero point "
                              "input ('list index out of range'), as qconv writes an int32 bias";
  // measured 2026-11-28 (the corpus; test_op_tables.py): an op the model computes in float runs in float16 on
  // the NPU (its layer table: FLOAT16), an LSTM among them (exLSTM), with its Transposes on the CPU
  rknn.op_rules_measured = "rknn-toolkit2 2.5.0 (rk3588, its PC simulator), 2026-11-28";
  rknn.op_rules = {
      {"LSTM", OpForm::kAny, 0, -1, "", "rknn-toolkit2 2.5 runs an LSTM in float16 (exLSTM; its Transposes on the CPU), "
                                       "not in 8 or 16 bits"},
      {"*", OpForm::kFloat, 0, -1, "", "rknn-toolkit2 2.5 computes an op the model gives in float in float16 (its layer "
                                       "table: FLOAT16), not in 8 or 16 bits"},
      // measured 2026-11-28 (the corpus's YOLO focus layer, and probes): a Slice with steps 1 runs on the NPU
      {"Slice", OpForm::kAny, 0, -1, "", "rknn-toolkit2 2.5 runs a strided Slice on the CPU (its layer table: Slice INT8 "
                                         "on the CPU), float or quantized", false, "", 4},
      // measured 2026-11-28 (the corpus's layout detector, PP-PicoDet: its residual Add of two HardSwish outputs)
      {"Add", OpForm::kQuantized, 0, 0, "", "rknn-toolkit2 2.5 moves both inputs' Div past the Add and rescales the sum in "
                                           "float16 (its layer table: Mul FLOAT16, exDataConvert), not in 8 bits",
       false, "Div", -1, "Div"},
      // measured 2026-11-28 (the corpus's captcha_unrolled: an LSTM cell's gates written out; probes): two
      // such Sigmoids run in 8 bits, three are merged
      {"Sigmoid", OpForm::kQuantized, 0, -1, "", "rknn-toolkit2 2.5 merges three or more Sigmoids on the parts of "
                                                "one tensor into Concat -> Sigmoid -> Split and runs it in float16 "
                                                "(its layer table: Sigmoid FLOAT16, exDataConvert), not in 8 bits",
       false, "", -1, "", 3},
  };
  rknn.opset_min = 10;  // measured 2026-11-28: opset 11 and 12 QDQ models build; per axis needs 13 (opsetFloor)
  rknn.saturating_kernels = "";
  all.push_back(rknn);

  return all;
}

}  // namespace

bool movesDataOn(const TargetProfile& t, int32_t type) {
  const uint8_t bit = type == onnx::TensorProto::INT8 ? kInt8 : type == onnx::TensorProto::UINT8 ? kUint8 : 0;
  return !bit || (t.move_on & bit);
}

bool takesType(const TargetProfile& t, int32_t type) {
  return t.quant_types.empty() || std::find(t.quant_types.begin(), t.quant_types.end(), type) != t.quant_types.end();
}

const ContribOp* findContribOp(const TargetProfile& t, std::string_view op) {
  for (const ContribOp& c : t.contrib_ops)
    if (c.op == op) return &c;
  return nullptr;
}

const std::vector<TargetProfile>& targetProfiles() {
  static const std::vector<TargetProfile> all = makeProfiles();  // immutable once made
  return all;
}

std::string targetNames() {
  std::string names;
  for (const auto& p : targetProfiles()) names += (names.empty() ? "" : ", ") + std::string(p.name);
  return names;
}

const TargetProfile* findTarget(std::string_view name) {
  for (const auto& t : targetProfiles())
    if (t.name == name) return &t;
  return nullptr;
}

const TargetProfile& unrestricted() {
  static const TargetProfile none = [] {
    TargetProfile p;
    p.name = "";
    p.runtime = "any";
    p.saturating_kernels = "onnxruntime";
    return p;
  }();
  return none;
}

}  // namespace qconv
