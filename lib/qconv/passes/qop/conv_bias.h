// The int32 bias a fused QLinearConv takes: planned by the selector, written by the action.
//
// QLinearConv's bias is int32 [M] at scale x_scale * w_scale[c], zero point 0:
//   B'[c] = round_half_even(B[c] / (x_scale * w_scale[c]))
// where B is the Conv's float bias (a constant, or DQ(int32, s_b, 0)). A DQ bias already at
// x_scale * w_scale[c] (the same float32 bits) is used as it is: no rounding. A bias at another
// scale is requantized, which moves it by at most half a step of x_scale * w_scale[c].
// The plan fails (the conv stays in QDQ form, refused naming node and channel) when:
//   1. a bias value is not finite;
//   2. some B'[c] does not fit int32, unless raise_weight_scale: then w_scale[c] is raised to the
//      smallest float that makes it fit, and channel c's weights are requantized to it (what
//      onnxruntime's quantizer does), each raise an approximation; that needs the weight's zero
//      point to be constant 0.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qconv/passes/common/conv_group.h"
#include "qconv/passes/pass.h"

namespace qconv {

struct BiasPlan {
  ir::Value* kept = nullptr;     // the int32 tensor already at x_scale * w_scale: used as is
  std::string name;              // of the new int32 tensor: the float bias's, + "_int32"
  std::vector<int64_t> values;   // otherwise: B', one per output channel
  float x_scale = 0;
  std::vector<float> w_scale;     // expanded to M; raised where `raised` says
  std::vector<float> real;        // B as float32
  std::vector<int64_t> raised;    // channels whose weight scale is raised (raise_weight_scale)
  std::vector<float> old_w_scale; // their scales before
  std::vector<int64_t> weight;    // when some are raised: the whole weight, requantized
};

/// The bias plan of a selected group with a bias, or nullopt with the failed condition in *why.
std::optional<BiasPlan> planBias(const ConvGroup& g, bool raise_weight_scale, std::string* why);

/// The action's half: the int32 bias value to give the fused node (and, for raised channels,
/// the requantized weight, scale and zero point, set on `fused` at inputs 3-5, each raise
/// reported as an approximation).
ir::Value* writeBias(ir::Graph& graph, ir::Node& fused, const BiasPlan& plan, PassContext& ctx);

}  // namespace qconv
