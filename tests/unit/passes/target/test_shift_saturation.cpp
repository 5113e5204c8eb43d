// shift-types and check-saturation on small graphs: zero points and values moved by 128,
// boundaries kept, the weight pairs counted in onnxruntime's packing order, and the messages.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <random>

#include "model_builder.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/target/weight_pairs.h"

using namespace qtest;

namespace {

std::string run(qconv::ir::Model& m, qconv::PassOptions options, std::vector<std::string>* warnings = nullptr) {
  Reporter r(options);
  qconv::pairQdq(m, r.ctx);
  qconv::shiftTypes(m, r.ctx);
  qconv::checkSaturation(m, r.ctx);
  if (warnings) *warnings = r.ctx.warnings();
  return r.text.str();
}

qconv::PassOptions types(int32_t weight, int32_t activation) {
  qconv::PassOptions o;
  o.weight_type = weight;
  o.activation_type = activation;
  return o;
}

/// One int8 QLinearConv-ready QDQ conv whose weights are `w` ([M, C, 1, k]) and group `group`.
ModelBuilder pairsModel(int64_t m, int64_t c, int64_t k, int64_t group, const std::vector<int64_t>& w) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, c, 1, 8});
  b.floats("s", {}, {0.1f});
  b.ints("z", TensorProto::UINT8, {}, {128});
  b.ints("wz", TensorProto::INT8, {}, {0});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"x_q"}, "q_x");
  b.node("DequantizeLinear", {"x_q", "s", "z"}, {"x_dq"}, "dq_x");
  b.ints("w", TensorProto::INT8, {m, c / group, 1, k}, w);
  b.node("DequantizeLinear", {"w", "s", "wz"}, {"w_dq"}, "dq_w");
  auto& conv = b.node("Conv", {"x_dq", "w_dq"}, {"conv_y"}, "conv_1");
  setInt(conv, "group", group);
  b.node("QuantizeLinear", {"conv_y", "s", "z"}, {"y_q"}, "q_y");
  b.node("DequantizeLinear", {"y_q", "s", "z"}, {"y"}, "dq_y");
  b.output("y", TensorProto::FLOAT);
  return b;
}

}  // namespace

TEST_CASE("shift-types: uint8 weights move values and zero points by 128 and int8 activations follow") {
  ConvSpec spec;
  spec.x_type = spec.y_type = TensorProto::INT8;
  spec.x_zp = spec.y_zp = -5;
  spec.per_channel = true;
  auto m = convModel(spec).build();
  run(m, types(TensorProto::UINT8, 0));
  auto* dqw = nodesOf(m.graph, "DequantizeLinear")[1];
  REQUIRE(dqw->name() == "dq_w");
  REQUIRE(dqw->input(0)->initializer()->data_type() == TensorProto::UINT8);
  auto w = intsOf(dqw->input(0));
  REQUIRE(w[0] == -3 + 128);
  REQUIRE(w[1] == -2 + 128);
  REQUIRE(intsOf(dqw->input(2)) == std::vector<int64_t>{128, 128, 128});
  auto* qx = nodesOf(m.graph, "QuantizeLinear")[0];
  REQUIRE(qx->input(2)->initializer()->data_type() == TensorProto::UINT8);
  REQUIRE(intsOf(qx->input(2)) == std::vector<int64_t>{0 + 128});  // convModel gives int8 x zero point 0
  REQUIRE(qx->output(0)->elemType() == TensorProto::UINT8);
  // the int32 bias is no 8-bit tensor: untouched, no warning
  auto* dqb = nodesOf(m.graph, "DequantizeLinear")[2];
  REQUIRE(dqb->input(0)->initializer()->data_type() == TensorProto::INT32);
}

TEST_CASE("shift-types: nothing asked is nothing moved and int8 activations alone bring int8 weights") {
  ConvSpec spec;
  spec.w_type = TensorProto::UINT8;
  auto m = convModel(spec).build();
  run(m, {});
  REQUIRE(nodesOf(m.graph, "DequantizeLinear")[1]->input(0)->initializer()->data_type() == TensorProto::UINT8);
  run(m, types(0, TensorProto::INT8));
  auto* dqw = nodesOf(m.graph, "DequantizeLinear")[1];
  REQUIRE(dqw->input(0)->initializer()->data_type() == TensorProto::INT8);
  REQUIRE(intsOf(dqw->input(2)) == std::vector<int64_t>{3 - 128});
  REQUIRE(intsOf(nodesOf(m.graph, "QuantizeLinear")[0]->input(2)) == std::vector<int64_t>{128 - 128});
}

TEST_CASE("shift-types: a non-constant zero point keeps the group and the warning says why") {
  ConvSpec spec;
  spec.x_type = spec.y_type = TensorProto::INT8;
  spec.y_zp = 0;
  auto b = convModel(spec);
  b.input("zp_in", TensorProto::INT8, {});
  for (auto& n : *b.graph().mutable_node())
    if (n.name() == "dq_y") n.set_input(2, "zp_in");
  auto m = b.build();
  std::vector<std::string> warnings;
  run(m, types(0, TensorProto::UINT8), &warnings);
  REQUIRE(warnings == std::vector<std::string>{"y_q: activation not stored as uint8: dq_y: its zero point is not a constant"});
}

TEST_CASE("check-saturation: pairs in kernel-position-major order with one sign and |w0 + w1| >= 129") {
  // M=1, C=3, kernel 1x2: K order (position, channel) = w[c0,p0] w[c1,p0] | w[c2,p0] w[c0,p1] | w[c1,p1] w[c2,p1]
  // weights by [c][p]: c0 = {100, 29}, c1 = {29, -100}, c2 = {-60, -69}
  // pairs: (100, 29) = 129 saturates; (-60, 29) mixed; (-100, -69) = -169 saturates
  auto m = pairsModel(1, 3, 2, 1, {100, 29, 29, -100, -60, -69}).build();
  std::vector<std::string> warnings;
  run(m, {}, &warnings);
  REQUIRE(warnings.size() == 2);
  REQUIRE(warnings[0] == "conv_1: 2 of 3 weight pairs can saturate onnxruntime's u8 x s8 kernel on x86 CPUs without "
                         "VNNI; --weight-type uint8 computes exactly on every CPU");
  REQUIRE(warnings[1].find("2 weight pairs in 1 of 1 u8 x s8 nodes can saturate") != std::string::npos);
  // 128 does not: 255 * 128 fits int16
  auto fits = pairsModel(1, 2, 1, 1, {100, 28}).build();
  run(fits, {}, &warnings);
  REQUIRE(warnings.empty());
}

TEST_CASE("check-saturation: depthwise convs have no pairs and uint8 weights none either") {
  auto dw = pairsModel(2, 2, 2, 2, {127, 127, 127, 127}).build();  // group 2: one channel in, one out
  std::vector<std::string> warnings;
  run(dw, {}, &warnings);
  REQUIRE(warnings.empty());
  auto m = pairsModel(1, 2, 1, 1, {127, 127}).build();
  run(m, types(TensorProto::UINT8, 0), &warnings);
  REQUIRE(warnings.empty());
  auto again = pairsModel(1, 2, 1, 1, {127, 127}).build();
  run(again, {}, &warnings);
  REQUIRE(warnings.size() == 2);
}

TEST_CASE("ByteStream: raw_data in place and int32_data converted while other types and short storage are refused") {
  std::string buffer;
  onnx::TensorProto raw;
  raw.set_data_type(TensorProto::INT8);
  raw.add_dims(4);
  raw.set_raw_data(std::string("\x01\xff\x7f\x80", 4));
  qconv::ir::ByteStream a(raw, buffer);
  REQUIRE(a.ok());
  REQUIRE(a.size() == 4);
  const uint8_t* first = a.next(3);
  REQUIRE(first);
  REQUIRE(static_cast<int8_t>(first[1]) == -1);
  REQUIRE(a.next(2) == nullptr);  // past the end
  REQUIRE(a.next(1)[0] == 0x80);

  onnx::TensorProto typed;
  typed.set_data_type(TensorProto::INT8);
  typed.add_dims(2);
  typed.add_int32_data(-128);
  typed.add_int32_data(127);
  qconv::ir::ByteStream b(typed, buffer);
  const uint8_t* v = b.next(2);
  REQUIRE((v && static_cast<int8_t>(v[0]) == -128 && static_cast<int8_t>(v[1]) == 127));

  onnx::TensorProto wide;
  wide.set_data_type(TensorProto::INT32);
  REQUIRE(qconv::ir::ByteStream(wide, buffer).why() == "tensor is int32, not int8 or uint8");
  raw.add_dims(2);  // dims now need 8 bytes
  REQUIRE(qconv::ir::ByteStream(raw, buffer).why() == "tensor holds 4 bytes, dims need 8");
}

TEST_CASE("check-saturation: every pair of int8 values counted by the vector loop as by the formula") {
  // all 65536 (a, b): |a + b| >= 129 for 8001 positive and 8256 negative pairs
  std::vector<int64_t> kn(2 * 65536), mck(2 * 65536);
  for (int64_t a = -128; a < 128; ++a)
    for (int64_t b = -128; b < 128; ++b) {
      const int64_t col = (a + 128) * 256 + (b + 128);
      kn[static_cast<size_t>(col)] = a;  // row 0
      kn[static_cast<size_t>(65536 + col)] = b;  // row 1
      mck[static_cast<size_t>(2 * col)] = a;  // output channel col, channels 0 and 1
      mck[static_cast<size_t>(2 * col + 1)] = b;
    }
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, 2});
  b.floats("s", {}, {0.1f});
  b.ints("z", TensorProto::UINT8, {}, {128});
  b.ints("wz", TensorProto::INT8, {}, {0});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"x_q"}, "q_x");
  b.node("DequantizeLinear", {"x_q", "s", "z"}, {"x_dq"}, "dq_x");
  b.ints("w", TensorProto::INT8, {2, 65536}, kn);
  b.node("DequantizeLinear", {"w", "s", "wz"}, {"w_dq"}, "dq_w");
  b.node("MatMul", {"x_dq", "w_dq"}, {"y"}, "matmul_1");
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  std::vector<std::string> warnings;
  run(m, {}, &warnings);
  REQUIRE(!warnings.empty());
  REQUIRE(warnings[0].rfind("matmul_1: 16257 of 65536 weight pairs", 0) == 0);

  auto conv = pairsModel(65536, 2, 1, 1, mck).build();
  run(conv, {}, &warnings);
  REQUIRE(!warnings.empty());
  REQUIRE(warnings[0].rfind("conv_1: 16257 of 65536 weight pairs", 0) == 0);
}

namespace {

/// One int8 MatMul-ready QDQ MatMul whose weight is `w` ([K, N]).
ModelBuilder matmulModel(int64_t k, int64_t n, const std::vector<int64_t>& w) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, k});
  b.floats("s", {}, {0.1f});
  b.ints("z", TensorProto::UINT8, {}, {128});
  b.ints("wz", TensorProto::INT8, {}, {0});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"x_q"}, "q_x");
  b.node("DequantizeLinear", {"x_q", "s", "z"}, {"x_dq"}, "dq_x");
  b.ints("w", TensorProto::INT8, {k, n}, w);
  b.node("DequantizeLinear", {"w", "s", "wz"}, {"w_dq"}, "dq_w");
  b.node("MatMul", {"x_dq", "w_dq"}, {"y"}, "matmul_1");
  b.output("y", TensorProto::FLOAT);
  return b;
}

bool saturable(int64_t a, int64_t b) { return a + b >= 129 || a + b <= -129; }

/// What check-saturation says of `node`: "<hits> of <pairs>", or "none" when it gives no warning.
std::string counted(qconv::ir::Model& m, const std::string& node) {
  std::vector<std::string> warnings;
  run(m, {}, &warnings);
  if (warnings.empty()) return "none";
  const std::string head = node + ": ";
  REQUIRE(warnings[0].rfind(head, 0) == 0);
  return warnings[0].substr(head.size(), warnings[0].find(" weight pairs") - head.size());
}

std::string expected(int64_t hits, int64_t pairs) { return hits ? fmt::format("{} of {}", hits, pairs) : "none"; }

}  // namespace

TEST_CASE("check-saturation: random weights of every period and parity counted as the definition counts them") {
  std::mt19937 gen(20261126);
  std::uniform_int_distribution<int> value(-128, 127);
  auto randoms = [&](int64_t n) {
    std::vector<int64_t> w(static_cast<size_t>(n));
    for (auto& x : w) x = value(gen);
    return w;
  };
  // Conv [M, C, 1, k]: each output channel's weights in onnxruntime's order (position major,
  // channel minor), consecutive pairs; an odd count leaves the last one alone
  for (int64_t c : {2, 3, 4, 5})
    for (int64_t k : {1, 2, 3, 5, 8, 9, 15, 16, 17, 25, 49}) {
      const int64_t m = 7, per = c * k;
      const std::vector<int64_t> w = randoms(m * per);
      int64_t hits = 0;
      for (int64_t oc = 0; oc < m; ++oc)
        for (int64_t j = 0; j + 1 < per; j += 2) {
          auto at = [&](int64_t kk) { return w[static_cast<size_t>(oc * per + (kk % c) * k + kk / c)]; };
          hits += saturable(at(j), at(j + 1));
        }
      auto model = pairsModel(m, c, k, 1, w).build();
      INFO("C " << c << ", k " << k);
      REQUIRE(counted(model, "conv_1") == expected(hits, m * (per / 2)));
    }
  // MatMul [K, N]: rows (2j, 2j + 1), column by column; an odd last row alone
  for (int64_t k : {2, 3, 5, 34})
    for (int64_t n : {1, 7, 16, 33, 100}) {
      const std::vector<int64_t> w = randoms(k * n);
      int64_t hits = 0;
      for (int64_t col = 0; col < n; ++col)
        for (int64_t row = 0; row + 1 < k; row += 2)
          hits += saturable(w[static_cast<size_t>(row * n + col)], w[static_cast<size_t>((row + 1) * n + col)]);
      auto model = matmulModel(k, n, w).build();
      INFO("K " << k << ", N " << n);
      REQUIRE(counted(model, "matmul_1") == expected(hits, n * (k / 2)));
    }
}

TEST_CASE("check-saturation: every vector width counts the pairs the scalar loop counts") {
  // the widths this CPU runs (AVX2 where it has it) against the scalar loop, on random bytes at
  // every offset of every period from 1 to 70, with strides inside the period
  std::mt19937 gen(39);
  std::uniform_int_distribution<int> value(-128, 127);
  std::vector<int8_t> x(5000);
  for (auto& v : x) v = static_cast<int8_t>(value(gen));
  int checked = 0;
  for (size_t period = 1; period <= 70; ++period)
    for (size_t stride : {size_t{1}, period / 2, period - 1}) {
      if (stride == 0 || stride >= period) continue;
      std::vector<uint8_t> mask(period + qconv::kMaxPairVector);
      for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i % period) < period - stride;  // partner in the period
      for (size_t len : {period, 3 * period + 1, x.size() / period * period}) {
        const int64_t scalar = qconv::countSaturablePairs(x.data(), mask.data(), period, len, stride, 1);
        for (int width : {16, 32}) {
          if (width > qconv::pairVectorWidth()) continue;
          INFO("period " << period << ", stride " << stride << ", length " << len << ", width " << width);
          REQUIRE(qconv::countSaturablePairs(x.data(), mask.data(), period, len, stride, width) == scalar);
          ++checked;
        }
      }
    }
  REQUIRE(checked > 0);
}

TEST_CASE("check-saturation: the vector loops' counters hold over a megabyte, every pattern") {
  // adjacent pairs (a 1x1 conv), halves of a period (a conv's channel pairs, a matrix's rows),
  // and a mask: each loop's per-lane counts are summed before they can wrap
  std::mt19937 gen(40);
  std::uniform_int_distribution<int> value(-128, 127);
  std::vector<int8_t> x(size_t{1} << 20);
  for (auto& v : x) v = static_cast<int8_t>(value(gen));
  for (auto [period, stride] : {std::pair<size_t, size_t>{2, 1}, {64, 32}, {200, 100}, {2000, 1000}, {18, 9}}) {
    std::vector<uint8_t> mask(period + qconv::kMaxPairVector);
    for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i % period) < stride;
    const size_t len = x.size() / period * period;
    int64_t want = 0;  // the definition: (i, i + stride) for the first `stride` of each period
    for (size_t p = 0; p < len; p += period)
      for (size_t j = 0; j < stride; ++j) {
        const int sum = x[p + j] + x[p + j + stride];
        want += sum >= 129 || sum <= -129;
      }
    for (int width : {1, 16, 32}) {
      if (width > qconv::pairVectorWidth()) continue;
      INFO("period " << period << ", width " << width);
      REQUIRE(qconv::countSaturablePairs(x.data(), mask.data(), period, len, stride, width) == want);
    }
  }
}

TEST_CASE("check-saturation: a com.microsoft QGemm kept as it is with transB") {
  ModelBuilder b;
  b.input("a", TensorProto::UINT8, {1, 4});
  b.floats("s", {}, {0.1f});
  b.ints("az", TensorProto::UINT8, {}, {0});
  b.ints("bz", TensorProto::INT8, {}, {0});
  b.ints("w", TensorProto::INT8, {2, 4}, {100, 29, 1, 2, -60, -69, -100, -29});  // [N, K]: (100, 29), (1, 2), (-60, -69), (-100, -29)
  auto& q = b.node("QGemm", {"a", "s", "az", "w", "s", "bz"}, {"y"}, "qgemm_1");
  q.set_domain("com.microsoft");
  setInt(q, "transB", 1);
  b.output("y", TensorProto::FLOAT);
  auto* op = b.proto().add_opset_import();
  op->set_domain("com.microsoft");
  op->set_version(1);
  auto m = b.build();
  Reporter r;
  qconv::checkSaturation(m, r.ctx);
  REQUIRE(!r.ctx.warnings().empty());
  REQUIRE(r.ctx.warnings()[0].rfind("qgemm_1: 3 of 4 weight pairs", 0) == 0);
}
