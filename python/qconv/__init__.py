"""qconv: convert quantized ONNX models between QDQ and QOp forms, exactly.

The same engine as the ``qconv`` command (a compiled extension over its library), as functions:

    >>> import qconv
    >>> result = qconv.convert("model_qdq.onnx", "model_qop.onnx", format="qop")
    >>> result.summary
    '3 QLinearConv, 1 QLinearMatMul'
    >>> model = qconv.convert("model_qdq.onnx", target="openvino").model   # an onnx.ModelProto

Failures raise a subclass of :class:`QconvError`, one per exit code of the command. Nothing is
printed: the command's messages are in each result (``messages``) and go to the ``logging``
logger ``"qconv"`` at the command's levels. docs/python.md describes it all.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union, cast

from . import _qconv

if TYPE_CHECKING:
    import onnx

__all__ = [
    "convert", "verify", "inspect", "targets", "ConversionResult", "VerifyResult", "Finding", "Message", "Target",
    "QconvError", "UsageError", "InvalidModelError", "UnsupportedModelError", "OutputError", "QconvMemoryError",
    "UnchangedError", "InternalError", "__version__", "__commit__", "onnx_version", "built_with",
]

__version__: str = _qconv.version
"""qconv's version (the command's ``--version``)."""
__commit__: str = _qconv.commit
"""The commit it was built from."""
onnx_version: str = _qconv.onnx_version
"""The ONNX version the engine is built on (third_party/onnx.pin)."""
built_with: str = _qconv.built_with
"""What ``qconv --version`` says it was built with: ONNX, its IR version and opsets, protobuf."""

_log = logging.getLogger("qconv")
_log.addHandler(logging.NullHandler())  # a library prints nothing unless the application configures logging

#: A model: a path (``str`` or ``os.PathLike``), its serialized bytes, or an ``onnx.ModelProto``.
ModelLike = Union[str, "os.PathLike[str]", bytes, "onnx.ModelProto"]

_MEMORY = "<memory>"  # what messages call a model given as bytes or a ModelProto
_TWO_GB = 2**31 - 1


# ---- exceptions: one class per exit code of the command ---------------------------------------


class QconvError(Exception):
    """A failed qconv call. ``message`` is the command's one-line error (without ``qconv: error: ``),
    ``node`` the node it names (or None), ``exit_code`` the command's exit code for it."""

    exit_code: int = 0

    def __init__(self, message: str, node: Optional[str] = None, exit_code: Optional[int] = None,
                 report: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.node = node
        if exit_code is not None:
            self.exit_code = exit_code
        self.report = report
        """The report (as ``--report`` writes it) of a conversion that failed, or None."""


class UsageError(QconvError, ValueError):
    """Exit 2: a wrong argument, or arguments that contradict each other."""

    exit_code = 2


class InvalidModelError(QconvError):
    """Exit 3: the model cannot be read, or is not a valid ONNX model."""

    exit_code = 3


class UnsupportedModelError(QconvError):
    """Exit 4: a valid model with a construct qconv does not convert exactly (or the target refuses)."""

    exit_code = 4


class OutputError(QconvError, OSError):
    """Exit 5: the output cannot be written."""

    exit_code = 5


class QconvMemoryError(QconvError, MemoryError):
    """Exit 6: the conversion needs more memory than the process may have."""

    exit_code = 6


class UnchangedError(QconvError):
    """Exit 7: ``require_change=True`` and nothing in the model is quantized, or nothing was rewritten."""

    exit_code = 7


class InternalError(QconvError):
    """Exit 70: a bug in qconv (please report it, with the model if you can)."""

    exit_code = 70


_BY_CODE: Dict[int, type] = {c.exit_code: c for c in (UsageError, InvalidModelError, UnsupportedModelError,
                                                       OutputError, QconvMemoryError, UnchangedError, InternalError)}


# ---- results ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """A line the command prints on stderr: ``qconv: <level>: <text>``."""

    level: str  #: "error", "warning", "info", "note" (``-v``) or "debug" (``-vv``)
    text: str


@dataclass(frozen=True)
class ConversionResult:
    """What :func:`convert` did."""

    output: Optional[str]
    """The path written, or None when the model was converted into memory (``model``)."""
    report: Dict[str, Any]
    """The report, as ``--report FILE.json`` writes it (schema: docs/cli.md)."""
    summary: str
    """The summary of the command's info line: ``3 QLinearConv, ...; 1 left as they were`` (also
    with ``quiet=True``; a batch: ``OUT: <summary>`` for each output, joined by ``; ``)."""
    messages: List[Message]
    """Every line the command would have printed on stderr, at the verbosity asked for."""
    model_bytes: Optional[bytes] = None
    """The converted model, serialized (every tensor inline), when no output path was given."""
    dump: str = ""
    """With ``dump=True``: the IR after every pass (what ``--dump`` prints)."""
    _model: List[Any] = field(default_factory=list, repr=False, compare=False)

    @property
    def model(self) -> Optional["onnx.ModelProto"]:
        """The converted model as an ``onnx.ModelProto`` (parsed once, on first use), or None
        when it was written to ``output``."""
        if self.model_bytes is None:
            return None
        if not self._model:
            import onnx

            self._model.append(onnx.load_model_from_string(self.model_bytes))
        m: onnx.ModelProto = self._model[0]
        return m


@dataclass(frozen=True)
class Finding:
    """One finding of :func:`verify`."""

    severity: str  #: "error", "warning" or "note"
    kind: str  #: bias-scale, saturation, target, ... (docs/cli.md)
    node: str
    tensor: str
    message: str


@dataclass(frozen=True)
class VerifyResult:
    """What :func:`verify` found."""

    findings: List[Finding]
    failed: bool
    """Whether a finding is of severity ``fail_on`` or worse (the command's exit 1)."""
    report: Dict[str, Any]
    """The object ``qconv verify --json`` prints."""
    messages: List[Message]


@dataclass(frozen=True)
class Target:
    """A runtime ``target=`` writes for, as ``qconv targets`` lists it."""

    name: str
    format: str  #: what target= alone writes: "qop" or "qdq"
    summary: str
    runtime: str  #: the runtime and version its profile was measured on


# ---- helpers ------------------------------------------------------------------------------------

_LEVELS = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO, "note": logging.DEBUG,
           "debug": logging.DEBUG - 5}


def _messages(stderr: str) -> List[Message]:
    """The command's stderr lines as messages, each also sent to the logger "qconv"."""
    out: List[Message] = []
    for line in stderr.splitlines():
        if not line.startswith("qconv: "):
            continue
        level, _, text = line[len("qconv: "):].partition(": ")
        message = Message(level, text)
        out.append(message)
        _log.log(_LEVELS.get(level, logging.INFO), "%s", text)
    return out


def _error_text(messages: Sequence[Message]) -> str:
    errors = [m.text for m in messages if m.level == "error"]
    return errors[-1] if errors else "qconv failed without a message"


def _raise(code: int, messages: Sequence[Message], node: Optional[str] = None,
           report: Optional[Dict[str, Any]] = None) -> None:
    cls = _BY_CODE.get(code, InternalError)
    raise cls(_error_text(messages), node, code, report)


def _usage(message: str) -> UsageError:
    _log.error("%s", message)
    return UsageError(message, None, 2)


def _source(model: ModelLike, what: str) -> Tuple[str, Optional[bytes]]:
    """(the path, or the name of the bytes; the bytes or None)."""
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not isinstance(path, str):
            raise _usage(f"{what}: a path must be text, not {type(path).__name__}")
        return path, None
    if isinstance(model, (bytes, bytearray, memoryview)):
        return _MEMORY, bytes(model)
    if hasattr(model, "SerializeToString"):  # an onnx.ModelProto
        try:
            size = model.ByteSize()
            data = model.SerializeToString() if size <= _TWO_GB else None
        except Exception:  # protobuf cannot even measure one past 2 GB (EncodeError)
            data = None
        if data is None:
            raise UnsupportedModelError(
                f"{_MEMORY}: the ModelProto passes protobuf's 2 GB limit for one serialized model: save it with its "
                "external data (onnx.save(..., save_as_external_data=True)) and give qconv its path", None, 4)
        return _MEMORY, data
    raise _usage(f"{what}: give a path, bytes or an onnx.ModelProto, not {type(model).__name__}")


def _choice(name: str, value: Optional[str], allowed: Sequence[str]) -> str:
    if value is None:
        return ""
    if value not in allowed:
        raise _usage(f"{name}={value!r}: not one of {', '.join(allowed)}")
    return value


_TYPES = {"uint8": 2, "int8": 3}  # onnx.TensorProto.UINT8, INT8


# ---- the API ------------------------------------------------------------------------------------


def convert(
    model: Union[ModelLike, Sequence[Union[str, "os.PathLike[str]"]]],
    output: Optional[Union[str, "os.PathLike[str]"]] = None,
    *,
    format: Optional[str] = None,
    target: Optional[str] = None,
    contrib: bool = False,
    weight_type: Optional[str] = None,
    activation_type: Optional[str] = None,
    approximate: bool = False,
    raise_weight_scale: bool = False,
    opset: Optional[int] = None,
    passes: Optional[Sequence[str]] = None,
    annotate: bool = False,
    inline_data: bool = False,
    fsync: bool = False,
    no_saturation_check: bool = False,
    require_change: bool = False,
    report: Optional[Union[str, "os.PathLike[str]"]] = None,
    out_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    jobs: int = 1,
    dump: bool = False,
    time_passes: bool = False,
    quiet: bool = False,
    verbose: int = 0,
) -> ConversionResult:
    """Convert a quantized ONNX model, as ``qconv convert`` does.

    ``model`` is a path, the model's bytes, or an ``onnx.ModelProto`` (with its tensors loaded: a
    model that keeps external data is given by path). With ``output`` a path, the result is
    written there exactly as the command writes it (external data beside it when the input has
    some, the model and its data file replaced as a pair, never an input); without, the converted
    model comes back in the result (``result.model``, ``result.model_bytes``), every tensor inline
    (up to protobuf's 2 GB: a larger model needs an output path).

    Each flag of ``qconv convert`` is a keyword (dashes as underscores): ``format`` ("qop" or
    "qdq"), ``target`` (a runtime: :func:`targets`), ``contrib``, ``weight_type`` and
    ``activation_type`` ("uint8" or "int8"), ``approximate``, ``raise_weight_scale``, ``opset``,
    ``passes`` (a list of pass names), ``annotate``, ``inline_data``, ``fsync``,
    ``no_saturation_check``, ``require_change``, ``report`` (also write the report to this file),
    ``dump`` (the IR after every pass, in ``result.dump``), ``time_passes``, ``quiet`` and
    ``verbose`` (0, 1 or 2: what goes into ``result.messages`` and the logger). A batch is
    ``model`` a list of paths with ``out_dir`` (and ``jobs``).

    Raises a :class:`QconvError` subclass for each failure (its exit code, message and node).
    Releases the GIL while it converts: conversions may run from several threads at once.
    """
    if quiet and verbose:
        raise _usage("quiet and verbose contradict each other")
    if not isinstance(jobs, int) or not 1 <= jobs <= 256:
        raise _usage(f"jobs={jobs!r}: give 1 to 256")
    if opset is not None and (not isinstance(opset, int) or not 1 <= opset <= 28):
        raise _usage(f"opset={opset!r}: give 1 to 28")
    if passes is not None and isinstance(passes, str):
        passes = passes.split(",")
    fmt = _choice("format", format, ("qop", "qdq"))
    wt = _choice("weight_type", weight_type, tuple(_TYPES))
    at = _choice("activation_type", activation_type, tuple(_TYPES))
    if target == "":
        raise _usage(f"target='': no such target; qconv knows {', '.join(t.name for t in targets())}")
    inputs: List[str] = []
    in_path, in_bytes = "", None
    if out_dir is not None:
        if output is not None:
            raise _usage("out_dir converts each model to OUT_DIR/<its file name>: give no output")
        if isinstance(model, (str, os.PathLike)):
            model = [model]
        if not isinstance(model, (list, tuple)):
            raise _usage("out_dir: give the models as a list of paths")
        inputs = [os.fspath(m) for m in model]
    else:
        if isinstance(model, (list, tuple)):
            raise _usage("a list of models is a batch: give out_dir")
        in_path, in_bytes = _source(cast(ModelLike, model), "model")
    out_path = os.fspath(output) if output is not None else ""
    to_memory = output is None and out_dir is None
    if to_memory:
        out_path = _MEMORY
    code, stdout, stderr, report_json, converted = _qconv.convert(
        in_path, in_bytes, out_path, to_memory, inputs, os.fspath(out_dir) if out_dir is not None else "", jobs,
        os.fspath(report) if report is not None else "", fmt, target or "", list(passes or []), dump, time_passes,
        raise_weight_scale, approximate, annotate, inline_data, fsync, _TYPES.get(wt, 0), _TYPES.get(at, 0),
        not no_saturation_check, contrib, opset or 0, require_change, 0 if quiet else 1 + verbose)
    messages = _messages(stderr)
    parsed: Dict[str, Any] = json.loads(report_json) if report_json else {}
    if code != 0:
        items = parsed.get("items") or [{}]
        failed = next((i for i in items if i.get("exit_code")), items[0])
        _raise(code, messages, failed.get("error_node"), parsed or None)
    summaries = [i["summary"] for i in parsed.get("items", []) if i.get("summary")]
    summary = summaries[0] if len(summaries) == 1 else "; ".join(  # a batch: each output's
        f"{i['output']}: {i['summary']}" for i in parsed.get("items", []) if i.get("summary"))
    return ConversionResult(None if to_memory else (out_path if out_dir is None else os.fspath(out_dir)), parsed,
                            summary, messages, converted, stdout)


def verify(
    model: ModelLike,
    *,
    target: Optional[str] = None,
    fail_on: str = "error",
    ignore: Iterable[str] = (),
    symmetric: bool = False,
) -> VerifyResult:
    """Check a quantized model's parameters and representations, as ``qconv verify --json`` does.

    Returns the findings (severity, kind, node, tensor, message) and whether one is of severity
    ``fail_on`` ("error", "warning" or "note") or worse. ``target`` names the runtime the model is
    for (what it cannot run becomes a finding); ``ignore`` sets kinds of finding aside;
    ``symmetric`` also names what a runtime taking int8 at zero point 0 only refuses. Raises
    :class:`InvalidModelError` when the model cannot be read, :class:`UsageError` for a wrong
    argument.
    """
    severities = {"note": 0, "warning": 1, "error": 2}
    if fail_on not in severities:
        raise _usage(f"fail_on={fail_on!r}: not one of error, warning, note")
    if isinstance(ignore, str):
        ignore = [ignore]
    path, data = _source(model, "model")
    code, stdout, stderr = _qconv.verify(path, data, target or "", severities[fail_on], symmetric, list(ignore))
    messages = _messages(stderr)
    obj: Dict[str, Any] = json.loads(stdout) if stdout else {}
    if code not in (0, 1):
        _raise(code, messages, obj.get("error_node"))
    findings = [Finding(f["severity"], f["kind"], f["node"], f.get("tensor") or "", f["message"])
                for f in obj.get("findings", [])]
    return VerifyResult(findings, code == 1, obj, messages)


def inspect(model: ModelLike, *, target: Optional[str] = None, format: Optional[str] = None) -> Dict[str, Any]:
    """What the model is and what :func:`convert` would do with it: the object ``qconv inspect
    --json`` prints (schema: docs/cli.md). ``target`` and ``format`` choose the conversion it
    dry-runs. Writes nothing. Raises :class:`InvalidModelError` when the model cannot be read."""
    fmt = _choice("format", format, ("qop", "qdq"))
    path, data = _source(model, "model")
    code, stdout, stderr = _qconv.inspect(path, data, target or "", fmt)
    messages = _messages(stderr)
    described: Dict[str, Any] = json.loads(stdout) if stdout else {}
    if code != 0:
        _raise(code, messages, described.get("error_node"))
    return described


def targets() -> List[Target]:
    """The runtimes ``target=`` writes for, as ``qconv targets`` lists them."""
    return [Target(*t) for t in _qconv.targets()]
