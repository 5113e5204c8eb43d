"""The judge of every number in the tests: the ONNX specification's arithmetic, on any host.

`run(model, feeds)` evaluates a model with onnx.reference.ReferenceEvaluator, with our own
implementations registered for the ops whose arithmetic the tests judge:

- QLinearConv (any spatial rank; onnx's own assumes 2-D), QLinearMatMul (per-row a,
  per-column b), ConvInteger, MatMulInteger: integer accumulation, exact (int64);
  requantization as the spec writes it, saturate(round_half_even(acc * (x_s * w_s / y_s)) + y_zp),
  the multiplier in the scales' own type as onnx.reference computes it;
- com.microsoft QuantizeLinear / DequantizeLinear (the standard formulas; int8 to int16)
  and QGemm (alpha, transA, transB, per-column b, int32 C at alpha * a_s * b_s, float or
  quantized output);
- com.microsoft QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax,
  QLinearGlobalAveragePool, QLinearAveragePool (channels_last too), QLinearReduceMean,
  QLinearWhere, QLinearConcat and QLinearConvTranspose, as onnxruntime's contrib schemas define
  them: quantize(op(dequantize(x))), the dequantization, the float op (onnx.reference's, on
  float64) and the division by the output scale all in float64, rounded once, half to even;
- Conv, MatMul and Gemm in float: accumulated in float64 and rounded once to float32, so
  that the reference does not depend on a BLAS's summation order or thread count.

QuantizeLinear / DequantizeLinear of the standard domain are onnx.reference's, every version.
tests/integration/test_reference.py checks all of these against the ONNX backend node test
cases that onnx's generators produce.

`run(..., emulate_u8s8=True)` instead computes every u8 x s8 QLinearConv, QLinearMatMul, QGemm,
ConvInteger and MatMulInteger the way onnxruntime's x86 kernels do on a CPU without VNNI
(AVX2 `vpmaddubsw`): the raw uint8 activations times the raw int8 weights, each pair of
adjacent products along the reduction dimension summed into a saturating int16, in the order
onnxruntime packs the weights (docs/onnxruntime-cpu.md). Depthwise convolutions (one input and
one output channel per group) run on a kernel without pairs. It also computes com.microsoft
QLinearSoftmax the way onnxruntime's kernel does on every host (a float32 table of
exponentials and floor(1 / y_scale): within one step of the specification's arithmetic, not on
ties only). The emulation is a model of onnxruntime, never a judge.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_dequantize_linear import _CommonDequantizeLinear
from onnx.reference.ops.op_quantize_linear import QuantizeLinear_21 as _StdQuantize

_INT16_MIN, _INT16_MAX = -32768, 32767


# ---- convolution geometry ----

def conv_geometry(x_shape, w_shape, auto_pad=None, dilations=None, group=None, kernel_shape=None, pads=None,
                  strides=None):
    """Kernel, pads (begin..., end...), strides and dilations of a Conv-like node, with auto_pad resolved."""
    nd = len(w_shape) - 2
    kernel = list(kernel_shape) if kernel_shape else list(w_shape[2:])
    strides = list(strides) if strides else [1] * nd
    dilations = list(dilations) if dilations else [1] * nd
    pads = list(pads) if pads else [0] * (2 * nd)
    mode = auto_pad.decode() if isinstance(auto_pad, bytes) else (auto_pad or "NOTSET")
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * nd)
        for i in range(nd):
            size = x_shape[2 + i]
            out = -(-size // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size)
            small, big = total // 2, total - total // 2
            pads[i], pads[i + nd] = (small, big) if mode == "SAME_UPPER" else (big, small)
    elif mode == "VALID":
        pads = [0] * (2 * nd)
    return kernel, pads, strides, dilations, int(group or 1)


def im2col(x: np.ndarray, kernel, pads, strides, dilations, pad_value) -> np.ndarray:
    """[N, C, *S] -> [N, C, P, *O]: for each kernel position p (row-major over the kernel),
    the input values it meets at every output position; padding reads `pad_value`."""
    nd = len(kernel)
    widths = [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)]
    xp = np.pad(x, widths, constant_values=np.asarray(pad_value).astype(x.dtype))
    out = [(xp.shape[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    cols = np.empty(x.shape[:2] + (math.prod(kernel),) + tuple(out), dtype=x.dtype)
    for p, offs in enumerate(itertools.product(*[range(k) for k in kernel])):
        sl = tuple(slice(offs[i] * dilations[i], offs[i] * dilations[i] + strides[i] * (out[i] - 1) + 1, strides[i])
                   for i in range(nd))
        cols[:, :, p] = xp[(slice(None), slice(None)) + sl]
    return cols


def conv_operands(x, w, geometry, pad_value):
    """The convolution as grouped matrix products, in onnxruntime's packing order:
    A [N, G, K, O] and W [G, Mg, K] with K = kernel position major, input channel minor
    (ReorderFilter's K1..Kn C order), and the output spatial shape."""
    kernel, pads, strides, dilations, group = geometry
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    cols = im2col(x, kernel, pads, strides, dilations, pad_value)  # [N, C, P, *O]
    out_shape = cols.shape[3:]
    p = cols.shape[2]
    a = cols.reshape(n, group, cg, p, -1).transpose(0, 1, 3, 2, 4).reshape(n, group, p * cg, -1)
    wk = w.reshape(group, m // group, cg, p).transpose(0, 1, 3, 2).reshape(group, m // group, p * cg)
    return a, wk, out_shape


def _per_channel(v, m) -> np.ndarray:
    """A scalar or [M] parameter as an [M] int64/float vector."""
    v = np.asarray(v)
    return np.broadcast_to(v.reshape(-1), (m,)) if v.size == 1 else v.reshape(-1)


def saturating_pair_sum(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """sum_j sat16(w[.., 2j] * a[2j, ..] + w[.., 2j+1] * a[2j+1, ..]) over the K axis:
    w [G, Mg, K] raw int8 weights, a [N, G, K, O] raw uint8 activations -> [N, G, Mg, O]."""
    k = w.shape[-1]
    if k % 2:
        w = np.concatenate([w, np.zeros(w.shape[:-1] + (1,), w.dtype)], axis=-1)
        a = np.concatenate([a, np.zeros(a.shape[:2] + (1,) + a.shape[3:], a.dtype)], axis=2)
    w = w.astype(np.int32)
    a = a.astype(np.int32)
    total = np.zeros((a.shape[0], w.shape[0], w.shape[1], a.shape[3]), np.int64)
    for j in range(0, w.shape[-1], 2):
        pair = (w[None, :, :, j, None] * a[:, :, None, j, :] + w[None, :, :, j + 1, None] * a[:, :, None, j + 1, :])
        total += np.clip(pair, _INT16_MIN, _INT16_MAX)
    return total


def integer_conv(x, x_zp, w, w_zp, geometry, emulate_u8s8=False) -> np.ndarray:
    """sum (x - x_zp)(w - w_zp) over each output's window, as int64 [N, M, *O]. Padding is
    x_zp (a zero after the subtraction). With emulate_u8s8, a uint8 x with an int8 w is summed
    as onnxruntime's saturating x86 kernel does, unless the conv is depthwise."""
    m, cg = w.shape[:2]
    group = geometry[4]
    x_zp = np.asarray(x_zp).reshape(-1)[0] if x_zp is not None else 0
    wz = _per_channel(w_zp if w_zp is not None else 0, m).astype(np.int64)
    a, wk, out_shape = conv_operands(x, w, geometry, x_zp)
    n = x.shape[0]
    mg = m // group
    depthwise = cg == 1 and mg == 1
    if emulate_u8s8 and x.dtype == np.uint8 and w.dtype == np.int8 and not depthwise:
        kdim = wk.shape[-1]
        raw = saturating_pair_sum(a, wk)  # [N, G, Mg, O]
        wzg = wz.reshape(group, mg)
        acc = (raw - wzg[None, :, :, None] * a.astype(np.int64).sum(axis=2)[:, :, None, :]
               - np.int64(x_zp) * wk.astype(np.int64).sum(axis=2)[None, :, :, None]
               + kdim * np.int64(x_zp) * wzg[None, :, :, None])
    else:
        ai = a.astype(np.int64) - np.int64(x_zp)
        wi = wk.astype(np.int64) - wz.reshape(group, mg, 1)
        acc = np.matmul(wi[None], ai)  # [N, G, Mg, O]
    return acc.reshape((n, m) + tuple(out_shape))


def float_conv(x, w, b, geometry) -> np.ndarray:
    m = w.shape[0]
    a, wk, out_shape = conv_operands(x.astype(np.float64), w.astype(np.float64), geometry, 0.0)
    y = np.matmul(wk[None], a).reshape((x.shape[0], m) + tuple(out_shape))
    if b is not None:
        y = y + b.astype(np.float64).reshape((1, m) + (1,) * len(out_shape))
    return y.astype(x.dtype)


def requantize(acc: np.ndarray, multiplier: np.ndarray, y_zp, out_dtype) -> np.ndarray:
    """saturate(round_half_even(acc * multiplier) + y_zp) as out_dtype."""
    info = np.iinfo(out_dtype)
    z = np.asarray(y_zp).reshape(-1)[0] if y_zp is not None else 0
    r = np.rint(acc * multiplier.astype(np.float64)) + np.float64(z)
    return np.clip(r, info.min, info.max).astype(out_dtype)


def _out_dtype(y_zp, fallback) -> np.dtype:
    return np.asarray(y_zp).dtype if y_zp is not None else fallback


# ---- the quantized operators ----

class QLinearConv(OpRun):
    emulate_u8s8 = False

    def _run(self, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=None,
             auto_pad=None, dilations=None, group=None, kernel_shape=None, pads=None, strides=None):
        geometry = conv_geometry(x.shape, w.shape, auto_pad, dilations, group, kernel_shape, pads, strides)
        acc = integer_conv(x, x_zero_point, w, w_zero_point, geometry, self.emulate_u8s8)
        if B is not None:
            acc = acc + B.astype(np.int64).reshape((1, -1) + (1,) * (acc.ndim - 2))
        m = w.shape[0]
        mult = (x_scale * w_scale / y_scale)  # in the scales' type, as onnx.reference
        mult = _per_channel(mult, m).reshape((1, m) + (1,) * (acc.ndim - 2))
        return (requantize(acc, mult, y_zero_point, _out_dtype(y_zero_point, x.dtype)),)


def _rows(v, a_ndim):
    """A per-tensor scalar, or per-row [M] parameter, broadcastable against [..., M, K]."""
    v = np.asarray(v)
    return v.reshape(-1)[0] if v.size == 1 else v.reshape(v.shape + (1,)) if v.ndim == 1 else v


def _cols(v):
    v = np.asarray(v)
    return v.reshape(-1)[0] if v.size == 1 else v


def integer_matmul(a, a_zp, b, b_zp, emulate_u8s8=False) -> np.ndarray:
    """(a - a_zp) @ (b - b_zp) as int64; per-row a_zp, per-column b_zp. With emulate_u8s8, a
    uint8 a with an int8 b is summed as onnxruntime's saturating x86 kernel does."""
    az = np.int64(0) if a_zp is None else _rows(a_zp, a.ndim).astype(np.int64)
    bz = np.int64(0) if b_zp is None else _cols(b_zp).astype(np.int64)
    if emulate_u8s8 and a.dtype == np.uint8 and b.dtype == np.int8:
        k = a.shape[-1]
        ai, bi = a.astype(np.int32), b.astype(np.int32)
        raw = np.zeros(np.broadcast_shapes(a.shape[:-1] + (1,), b.shape[:-2] + (1, b.shape[-1])), np.int64)
        for j in range(0, k, 2):
            pair = ai[..., :, j, None] * bi[..., j, None, :]
            if j + 1 < k:
                pair = pair + ai[..., :, j + 1, None] * bi[..., j + 1, None, :]
            raw += np.clip(pair, _INT16_MIN, _INT16_MAX)
        return (raw - bz * a.astype(np.int64).sum(axis=-1, keepdims=True)
                - az * b.astype(np.int64).sum(axis=-2, keepdims=True) + k * az * bz)
    return np.matmul(a.astype(np.int64) - az, b.astype(np.int64) - bz)


class QLinearMatMul(OpRun):
    emulate_u8s8 = False

    def _run(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
        acc = integer_matmul(a, a_zero_point, b, b_zero_point, self.emulate_u8s8)
        mult = _rows(a_scale, a.ndim) * _cols(b_scale) / y_scale
        out = _out_dtype(y_zero_point, a.dtype)
        if np.asarray(mult).dtype != np.float64:  # float16/bfloat16 scales: the product in float32
            mult = np.asarray(mult, dtype=np.float32)
        return (requantize(acc, np.asarray(mult), y_zero_point, out),)


class ConvInteger(OpRun):
    emulate_u8s8 = False

    def _run(self, x, w, x_zero_point=None, w_zero_point=None, auto_pad=None, dilations=None, group=None,
             kernel_shape=None, pads=None, strides=None):
        geometry = conv_geometry(x.shape, w.shape, auto_pad, dilations, group, kernel_shape, pads, strides)
        return (integer_conv(x, x_zero_point, w, w_zero_point, geometry, self.emulate_u8s8).astype(np.int32),)


class MatMulInteger(OpRun):
    emulate_u8s8 = False

    def _run(self, A, B, a_zero_point=None, b_zero_point=None):
        return (integer_matmul(A, a_zero_point, B, b_zero_point, self.emulate_u8s8).astype(np.int32),)


class Conv(OpRun):
    def _run(self, X, W, B=None, auto_pad=None, dilations=None, group=None, kernel_shape=None, pads=None,
             strides=None):
        geometry = conv_geometry(X.shape, W.shape, auto_pad, dilations, group, kernel_shape, pads, strides)
        return (float_conv(X, W, B, geometry),)


class MatMul(OpRun):
    def _run(self, a, b):
        if np.issubdtype(a.dtype, np.floating):
            return (np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype),)
        return (np.matmul(a, b),)


class Gemm(OpRun):
    def _run(self, A, B, C=None, alpha=None, beta=None, transA=None, transB=None):
        a = A.astype(np.float64).T if transA else A.astype(np.float64)
        b = B.astype(np.float64).T if transB else B.astype(np.float64)
        alpha = 1.0 if alpha is None else float(np.float32(alpha))
        beta = 1.0 if beta is None else float(np.float32(beta))
        y = alpha * (a @ b)
        if C is not None:
            y = y + beta * C.astype(np.float64)
        return (y.astype(A.dtype),)


# ---- com.microsoft ----

class DequantizeLinear(_CommonDequantizeLinear):
    """Every version, 10 to 25: onnx.reference has 19 and later only; the formula is the same."""

    def _run(self, x, x_scale, x_zero_point=None, axis=None, block_size=None, output_dtype=None):
        return super()._run(x, x_scale, x_zero_point, axis=1 if axis is None else axis,
                            block_size=block_size or 0, output_dtype=output_dtype or None)


def _contrib(std, name):
    """com.microsoft's QuantizeLinear / DequantizeLinear: the standard formula (int8 to int16)."""
    def _run(self, x, scale, zero_point=None, axis=None, **_):  # no block_size, output_dtype in this domain
        return std._run(self, x, scale, zero_point, axis=1 if axis is None else axis)
    return type(name, (std,), {"op_domain": "com.microsoft", "_run": _run})


QuantizeLinearMs = _contrib(_StdQuantize, "QuantizeLinear")
DequantizeLinearMs = _contrib(DequantizeLinear, "DequantizeLinear")


class QGemm(OpRun):
    """com.microsoft QGemm: Y = alpha * (A - a_zp)(B - b_zp) * a_s * b_s + C * (alpha * a_s * b_s),
    float when y_scale is absent, else quantized to (y_scale, y_zero_point)."""
    op_domain = "com.microsoft"
    emulate_u8s8 = False

    def _run(self, A, a_scale, a_zero_point, B, b_scale, b_zero_point, C=None, y_scale=None, y_zero_point=None,
             alpha=None, transA=None, transB=None):
        a = A.T if transA else A
        b = B.T if transB else B
        acc = integer_matmul(a, a_zero_point, b, b_zero_point, self.emulate_u8s8)
        if C is not None:
            acc = acc + C.astype(np.int64)
        alpha = np.float32(1.0 if alpha is None else alpha)
        scale = np.float32(alpha) * np.float32(_cols(a_scale)) * _cols(b_scale).astype(np.float32)
        if y_scale is None:
            return ((acc * np.asarray(scale, np.float64)).astype(np.float32),)
        mult = np.asarray(scale / np.float32(y_scale), np.float32)
        return (requantize(acc, mult, y_zero_point, _out_dtype(y_zero_point, np.uint8)),)


def _dequantized(x, scale, zero_point, axis=None) -> np.ndarray:
    """(x - zero_point) * scale in float64; per axis when the scale has more than one element."""
    scale = np.asarray(scale, np.float64)
    z = np.zeros_like(scale) if zero_point is None else np.asarray(zero_point, np.float64)
    if scale.size > 1:
        shape = [1] * x.ndim
        shape[axis] = scale.size
        scale, z = scale.reshape(shape), z.reshape(shape)
    else:
        scale, z = scale.reshape(-1)[0], z.reshape(-1)[0]
    return (x.astype(np.float64) - z) * scale


def _quantized(y, scale, zero_point, fallback) -> np.ndarray:
    """saturate(round_half_even(y / scale) + zero_point), y in float64."""
    out = _out_dtype(zero_point, fallback)
    info = np.iinfo(out)
    z = 0.0 if zero_point is None else float(np.asarray(zero_point).reshape(-1)[0])
    r = np.rint(y / np.float64(np.asarray(scale).reshape(-1)[0])) + z
    return np.clip(r, info.min, info.max).astype(out)


_FLOAT_OPS: dict = {}


def softmax(x: np.ndarray, axis, opset: int) -> np.ndarray:
    """Softmax as the model's opset defines it: from 13 along `axis` (default -1); before 13 on
    the tensor coerced to 2-D at `axis` (default 1). onnx.reference's own takes every opset's
    axis as 13's, default -1 included."""
    if x.size == 0:
        return x
    if opset >= 13:
        ax = -1 if axis is None else axis
        t = np.exp(x - x.max(axis=ax, keepdims=True))
        return (t / t.sum(axis=ax, keepdims=True)).astype(x.dtype)
    ax = (1 if axis is None else axis) % x.ndim
    rows = x.reshape(int(np.prod(x.shape[:ax], dtype=np.int64)), -1)
    return softmax(rows, -1, 13).reshape(x.shape)


class Softmax(OpRun):
    """The standard Softmax, every opset's semantics (softmax())."""
    def _run(self, X, axis=None):
        given = any(a.name == "axis" for a in self.onnx_node.attribute)  # else the model opset's default
        return (softmax(X, axis if given else None, self.run_params["opsets"].get("", 13)),)


def _float_op(op_type: str, inputs: list[np.ndarray], attrs: dict, opset: int) -> np.ndarray:
    """The standard float op `op_type` on float64 inputs, as onnx.reference computes it."""
    key = (op_type, tuple(sorted((k, str(v)) for k, v in attrs.items())), tuple(i.ndim for i in inputs), opset)
    if key not in _FLOAT_OPS:
        names = [f"i{k}" for k in range(len(inputs))]
        node = onnx.helper.make_node(op_type, names, ["y"], **attrs)
        types = [onnx.TensorProto.BOOL if i.dtype == np.bool_ else onnx.TensorProto.DOUBLE for i in inputs]
        graph = onnx.helper.make_graph([node], "op", [onnx.helper.make_tensor_value_info(n, t, None) for n, t in zip(names, types)],
                                       [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.DOUBLE, None)])
        _FLOAT_OPS[key] = ReferenceEvaluator(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)]),
                                             new_ops=[Softmax])
    sess = _FLOAT_OPS[key]
    return sess.run(None, {f"i{k}": v for k, v in enumerate(inputs)})[0]


def _contrib_qlinear(name, float_op, operands, y, opset=13, channels_last=False, weight_axis=None):
    """com.microsoft `name`, as onnxruntime's contrib schema defines it: quantize(float_op(
    dequantize(inputs))), the float op and both conversions in float64. `operands` lists, per
    float-op input, its (x, scale, zero point) slots, or an int slot taken as it is; `y` the
    output's (scale, zero point) slots."""
    def _run(self, *args, **attrs):
        attrs = {k: v for k, v in attrs.items() if v is not None}
        last = attrs.pop("channels_last", 0) if channels_last else 0
        softmax_opset = attrs.pop("opset", None)
        get = lambda k: args[k] if k < len(args) else None  # noqa: E731
        ins = []
        layout = operands if operands != "concat" else [(k, k + 1, k + 2) for k in range(2, len(args), 3)]
        for op in layout:
            if isinstance(op, int):
                ins.append(get(op))
                continue
            x = get(op[0])
            if x is None:
                continue
            ins.append(_dequantized(x, get(op[1]), get(op[2]), weight_axis if op[0] == 3 else None))
        if last:
            ins[0] = np.moveaxis(ins[0], -1, 1)
        r = _float_op(float_op, ins, attrs, softmax_opset if softmax_opset is not None else opset)
        if last:
            r = np.moveaxis(r, 1, -1)
        return (_quantized(r, get(y[0]), get(y[1]), np.uint8),)
    return type(name, (OpRun,), {"op_domain": "com.microsoft", "_run": _run})


_CONTRIB = [
    _contrib_qlinear("QLinearAdd", "Add", [(0, 1, 2), (3, 4, 5)], (6, 7)),
    _contrib_qlinear("QLinearMul", "Mul", [(0, 1, 2), (3, 4, 5)], (6, 7)),
    _contrib_qlinear("QLinearSigmoid", "Sigmoid", [(0, 1, 2)], (3, 4)),
    _contrib_qlinear("QLinearLeakyRelu", "LeakyRelu", [(0, 1, 2)], (3, 4)),
    _contrib_qlinear("QLinearGlobalAveragePool", "GlobalAveragePool", [(0, 1, 2)], (3, 4), channels_last=True),
    _contrib_qlinear("QLinearAveragePool", "AveragePool", [(0, 1, 2)], (3, 4), channels_last=True),
    _contrib_qlinear("QLinearReduceMean", "ReduceMean", [(0, 1, 2)], (3, 4)),
    _contrib_qlinear("QLinearWhere", "Where", [0, (1, 2, 3), (4, 5, 6)], (7, 8)),
    _contrib_qlinear("QLinearConcat", "Concat", "concat", (0, 1)),
]


def _ort_softmax_rows(x: np.ndarray, x_scale, y_scale, y_zp) -> np.ndarray:
    """onnxruntime's QLinearSoftmax kernel on rows (the reduced axis last), as its CPU source
    computes it (contrib_ops/cpu/quantization/qlinear_softmax.cc): a table of 256 float32
    exponentials, exp((i - 255 + shift) * x_scale) with shift = max(0, log(FLT_MAX / D) - 5) /
    x_scale; per row, the table read at x - max + 255 (int8: index uint8(127 - max + x), the
    table stored at uint8(i - 128)), summed in float32 in order; y = nearbyint(t * floor(1 /
    y_scale) / sum) + y_zp, all float32, above 255 set to 255 (int8: wrapped to the type)."""
    signed = x.dtype == np.int8
    d = x.shape[-1]
    shift = max(0.0, math.log(float(np.finfo(np.float32).max) / d) - 5) / float(np.float32(x_scale))
    table = np.zeros(256, np.float32)
    for i in range(256):
        table[(i - 128) & 0xFF if signed else i] = np.float32(math.exp((i - 255 + shift) * float(np.float32(x_scale))))
    ys = np.float32(math.floor(np.float32(1.0) / np.float32(y_scale)))
    rows = x.reshape(-1, d)
    out = np.zeros(rows.shape, np.int64)
    for r, row in enumerate(rows):
        m = int(row.max())
        idx = ((127 - m + row.astype(np.int64)) & 0xFF) if signed else (row.astype(np.int64) + 255 - m)
        t = table[idx]
        total = np.cumsum(t, dtype=np.float32)[-1]
        q = np.rint((t * ys) / total).astype(np.int64) + int(y_zp)
        out[r] = q
    if signed:
        out = np.where(out > 255, 255, out)
        return ((out + 128) % 256 - 128).astype(np.int8).reshape(x.shape)
    return np.where(out > 255, 255, out).astype(np.uint8).reshape(x.shape)


class QLinearSoftmax(OpRun):
    """com.microsoft QLinearSoftmax: quantize(Softmax(dequantize(x))) in float64 as the other
    contrib ops (the judge); with emulate_u8s8, onnxruntime's kernel (_ort_softmax_rows), whose
    table and floor(1 / y_scale) make it an approximation on every host."""
    op_domain = "com.microsoft"
    emulate_u8s8 = False
    _exact = staticmethod(_contrib_qlinear("QLinearSoftmax", "Softmax", [(0, 1, 2)], (3, 4))._run)

    def _run(self, x, x_scale, x_zero_point=None, y_scale=None, y_zero_point=None, axis=None, opset=None):
        if not self.emulate_u8s8:
            return self._exact(self, x, x_scale, x_zero_point, y_scale, y_zero_point, axis=axis, opset=opset)
        rank = x.ndim
        ax = (axis if axis is not None else (1 if opset < 13 else -1)) % rank
        y_zp = 0 if y_zero_point is None else int(np.asarray(y_zero_point))
        if opset < 13:  # the tensor coerced to 2-D at axis
            return (_ort_softmax_rows(x.reshape(int(np.prod(x.shape[:ax])), -1), x_scale, y_scale, y_zp).reshape(x.shape),)
        moved = np.moveaxis(x, ax, -1)
        return (np.moveaxis(_ort_softmax_rows(np.ascontiguousarray(moved), x_scale, y_scale, y_zp), -1, ax),)


def _qlinearconv_ms(self, x, *args, channels_last=None, **attrs):
    """com.microsoft QLinearConv: the standard one, with channels_last (x and y NHWC, w as ever)."""
    if channels_last:
        x = np.moveaxis(x, -1, 1)
    y = QLinearConv._run(self, x, *args, **attrs)[0]
    return (np.moveaxis(y, 1, -1) if channels_last else y,)


QLinearConvMs = type("QLinearConv", (OpRun,), {"op_domain": "com.microsoft", "emulate_u8s8": False, "_run": _qlinearconv_ms})


class QLinearConvTranspose(OpRun):
    """com.microsoft QLinearConvTranspose: QLinearConv's layout around ConvTranspose (w [C, M/group,
    k...], per output channel along axis 1 with one group), the int32 B at x_s * w_s; computed as
    the contrib ops above, in float64."""
    op_domain = "com.microsoft"

    def _run(self, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=None, **attrs):
        attrs = {k: v for k, v in attrs.items() if v is not None}
        ins = [_dequantized(x, x_scale, x_zero_point), _dequantized(w, w_scale, w_zero_point, 1)]
        if B is not None:
            ins.append(B.astype(np.float64) * (np.float32(x_scale) * np.asarray(w_scale, np.float32)).astype(np.float64))
        r = _float_op("ConvTranspose", ins, attrs, 13)
        return (_quantized(r, y_scale, y_zero_point, x.dtype),)


class GlobalMaxPool(OpRun):
    """The largest value over every spatial axis (2 and after), kept as 1s. onnx.reference 1.20's
    takes axes 1 and 2 of a 3-D input (magika's [1, 512, 508] -> (1, 1), not (1, 512, 1))."""
    op_domain = ""

    def _run(self, x):
        return (x.max(axis=tuple(range(2, x.ndim)), keepdims=True),)


_EXACT = [Softmax, GlobalMaxPool, DequantizeLinear, QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger, Conv, MatMul, Gemm, QuantizeLinearMs,
          DequantizeLinearMs, QGemm, QLinearConvMs, QLinearConvTranspose, QLinearSoftmax, *_CONTRIB]


def _emulating(cls):
    return type(cls.__name__, (cls,), {"emulate_u8s8": True, "op_domain": cls.op_domain})


def evaluator(model, emulate_u8s8: bool = False) -> ReferenceEvaluator:
    ops = [_emulating(c) if getattr(c, "emulate_u8s8", None) is False else c for c in _EXACT] if emulate_u8s8 else _EXACT
    if isinstance(model, str):
        model = onnx.load(model)
    return ReferenceEvaluator(model, new_ops=ops)


def run(model, feeds, emulate_u8s8: bool = False, intermediate: bool = False):
    """Outputs of `model` (a path or a ModelProto) for `feeds` (a dict, or one array for the
    first input), as a list in graph-output order; with intermediate, a dict of every value."""
    sess = evaluator(model, emulate_u8s8)
    if not isinstance(feeds, dict):
        feeds = {sess.input_names[0]: feeds}
    if intermediate:
        return sess.run(None, feeds, intermediate=True)
    return sess.run(None, feeds)


# ---- the model's math in exact arithmetic ----

class DequantizeLinearExact(OpRun):
    """(x - zero_point) * scale with the difference in int64 and the product in float64, any
    integer type (an int32 bias above 2^24 included: onnx.reference's own subtracts in float32)."""
    op_domain = ""

    def _run(self, x, x_scale, x_zero_point=None, axis=None, block_size=None, output_dtype=None):
        if block_size:
            raise NotImplementedError("blocked DequantizeLinear in the exact judge")
        d = x.astype(np.int64) - (0 if x_zero_point is None else _per_axis(x_zero_point, x, axis).astype(np.int64))
        return (d.astype(np.float64) * _per_axis(np.asarray(x_scale, np.float64), x, axis),)


def _per_axis(v, x, axis) -> np.ndarray:
    v = np.asarray(v)
    if v.size == 1:
        return v.reshape(())
    shape = [1] * x.ndim
    shape[(1 if axis is None else axis) % x.ndim] = v.size
    return v.reshape(shape)


def _in_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` computing in float64 where it computes in float32: float32 initializers,
    Constant values, Cast targets and declared types become float64. The quantized values, their
    zero points and every rounding to a quantized type stay as they are."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    F, D = onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE

    def widen(t: onnx.TensorProto) -> None:
        if t.data_type == F:
            t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t).astype(np.float64), t.name))

    for t in m.graph.initializer:
        widen(t)
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                widen(a.t)
            if n.op_type == "Cast" and a.name == "to" and a.i == F:
                a.i = D
    for v in [*m.graph.input, *m.graph.output, *m.graph.value_info]:
        if v.type.tensor_type.elem_type == F:
            v.type.tensor_type.elem_type = D
    return m


def exact_outputs(model, xs) -> list[np.ndarray]:
    """The first output of a QDQ `model` for each input in xs, computed in exact arithmetic as
    far as float64 carries it: every dequantized value, every float op and every division by an
    output scale in float64, each QuantizeLinear rounding once, half to even. The judge of which
    of two float32 evaluations (a QDQ input, its QOp conversion) is nearer the model's math:
    float32 rounds the products of scales and the float sums before each requantization; float64
    is 2^29 times finer, well under any output step of 8- or 16-bit data."""
    if isinstance(model, str):
        model = onnx.load(model)
    ops = [c for c in _EXACT if c not in (DequantizeLinear, DequantizeLinearMs)] + [
        type("DequantizeLinear", (DequantizeLinearExact,), {"op_domain": ""}),
        type("DequantizeLinear", (DequantizeLinearExact,), {"op_domain": "com.microsoft"})]
    sess = ReferenceEvaluator(_in_float64(model), new_ops=ops)
    return [sess.run(None, {sess.input_names[0]: x.astype(np.float64)})[0] for x in xs]


def outputs(model, xs, emulate_u8s8: bool = False) -> list[np.ndarray]:
    """The first output of `model` for each input in xs (the same shape as conftest.outputs)."""
    sess = evaluator(model, emulate_u8s8)
    return [sess.run(None, {sess.input_names[0]: x})[0] for x in xs]
