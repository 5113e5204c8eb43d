// Vitis AI's rounding methods (the `method` input of vai::QuantizeLinear), as pytorch_nndct
// defines them in its numpy reference, and their exact emulation with standard float32 ops.
//
//   code   name                       ties go                         emulation (f = v - Floor(v))
//   2      half_up                    toward +inf                     Where(f == 0.5, Ceil(v), Round(v))
//   3      std::round                 away from zero                  Where(v < 0, Ceil(v - 0.5), Floor(v + 0.5))
//   4      floor                      -                               Floor(v)
//   5      DPU                        negative: toward +inf;          Where(v < 0 and f == 0.5, Ceil(v), Round(v))
//                                     positive: to even
//   6      half_down                  toward zero                     Where(f == 0.5, Where(v < 0, Ceil(v), Floor(v)), Round(v))
//   7      ceil                       -                               Ceil(v)
//   other  half_even (-1, 8, ...)     to even                         Round(v)
// Each emulation is the reference's own expression, so it gives the same float32 result.
#pragma once

#include <cstdint>

#include "qconv/passes/read/float_emitter.h"

namespace qconv {

inline bool vitisRoundsHalfEven(int64_t method) { return method < 2 || method > 7; }

inline const char* vitisMethodName(int64_t method) {
  switch (method) {
    case 2: return "half_up: ties toward +inf";
    case 3: return "std::round: ties away from zero";
    case 4: return "floor";
    case 5: return "DPU: negative ties toward +inf, positive ties to even";
    case 6: return "half_down: ties toward zero";
    case 7: return "ceil";
    default: return "half_even";
  }
}

/// Round v (float32) the way `method` does; returns the last value emitted.
inline ir::Value* emitVitisRounding(FloatEmitter& e, ir::Value* v, int64_t method) {
  auto tie = [&] { return e.test("Equal", {e.op("Sub", {v, e.op("Floor", {v})}), e.constant("half", 0.5f)}); };
  auto negative = [&] { return e.test("Less", {v, e.constant("zero", 0.0f)}); };
  switch (method) {
    case 2: return e.op("Where", {tie(), e.op("Ceil", {v}), e.op("Round", {v})});
    case 3:
      return e.op("Where", {negative(), e.op("Ceil", {e.op("Sub", {v, e.constant("half", 0.5f)})}),
                            e.op("Floor", {e.op("Add", {v, e.constant("half", 0.5f)})})});
    case 4: return e.op("Floor", {v});
    case 5: return e.op("Where", {e.test("And", {negative(), tie()}), e.op("Ceil", {v}), e.op("Round", {v})});
    case 6:
      return e.op("Where", {tie(), e.op("Where", {negative(), e.op("Ceil", {v}), e.op("Floor", {v})}), e.op("Round", {v})});
    case 7: return e.op("Ceil", {v});
    default: return e.op("Round", {v});
  }
}

}  // namespace qconv
