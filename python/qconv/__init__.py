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
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union, cast

from . import _qconv

if TYPE_CHECKING:
    import onnx

__all__ = [
    "convert", "verify", "inspect", "targets", "show", "ConversionResult", "VerifyResult", "Finding", "Message", "Target",
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
ModelLike = Union[str, "os.PathLike[str]", "os.PathLike[bytes]", bytes, "onnx.ModelProto"]
#: A path, as Python's ``os`` functions take one: ``str`` (a name that is not UTF-8 as ``os.listdir``
#: gives it, with surrogate escapes), ``bytes``, or an ``os.PathLike`` returning either.
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

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
    """One diagnostic, as the engine records it; the command prints it on stderr as
    ``qconv: <level>: <text>``."""

    level: str  #: "error", "warning", "info", "note" (``-v``) or "debug" (``-vv``)
    text: str  #: the line as the command prints it after the level: file, node and message joined
    kind: str = ""
    """What it is: "error"; a pass's "refused", "unconvertible", "done", "advisory",
    "approximation", "warning", "detail"; the command's "summary", "unchanged", "contents",
    "time", "batch"."""
    file: str = ""  #: the model it is about, as given (empty: none)
    node: str = ""  #: the node or tensor it is about (empty: the model as a whole)
    message: str = ""  #: what is said (an error's: its whole message)


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
    _report_json: bytes = field(default=b"", repr=False, compare=False)
    _node_data: List[str] = field(default_factory=list, repr=False, compare=False)

    @property
    def node_data(self) -> str:
        """A lone conversion's: each node of the output's outcome as Model Explorer's node data
        (JSON text, what ``--node-data`` writes, made from the report on first use); empty for a
        batch. :func:`show` draws it on the graph."""
        if not self._node_data:
            self._node_data.append(_qconv.node_data(self._report_json).decode("utf-8", "replace"))
        return self._node_data[0]

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


def _text_of(b: bytes) -> str:
    return b.decode("utf-8", "backslashreplace")


def _messages(records: Sequence[Tuple[str, str, bytes, bytes, bytes, bytes]]) -> List[Message]:
    """The engine's records as messages, each also sent to the logger "qconv". A file name that is
    not UTF-8 shows its bytes as ``\\xNN``."""
    out: List[Message] = []
    for level, kind, file, node, text, line in records:
        message = Message(level, _text_of(line), kind, _text_of(file), _text_of(node), _text_of(text))
        out.append(message)
        _log.log(_LEVELS.get(level, logging.INFO), "%s", message.text)
    return out


def _error_text(messages: Sequence[Message]) -> str:
    errors = [m.text for m in messages if m.level == "error"]
    return errors[-1] if errors else "qconv failed without a message"


def _raise(code: int, messages: Sequence[Message], report: Optional[Dict[str, Any]] = None) -> None:
    """The exception of exit code `code`: its message the last error line, its node that of the
    first error record (a batch's first failed model)."""
    cls = _BY_CODE.get(code, InternalError)
    errors = [m for m in messages if m.kind == "error"]
    node = errors[0].node if errors else ""
    raise cls(_error_text(messages), node or None, code, report)


def _usage(message: str) -> UsageError:
    _log.error("%s", message)
    return UsageError(message, None, 2)


def _path(value: Any, what: str) -> bytes:
    """A path for the engine, as ``os.fsencode`` gives it: any name the file system allows. A NUL
    byte, which would cut the name short, is a :class:`UsageError` before any work."""
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise _usage(f"{what}={value!r}: give a path (str, bytes or os.PathLike), not {type(value).__name__}")
    try:
        path = os.fsencode(value)
    except (TypeError, UnicodeError) as e:
        raise _usage(f"{what}={value!r}: not a path: {e}") from None
    if b"\0" in path:
        raise _usage(f"{what}={os.fsdecode(path)!r}: a path holds no NUL byte (it would name another file); nothing "
                     "was read or written")
    if path == b"-":
        raise _usage(f"{what}='-': qconv reads and writes named files, not standard input or output (a model's "
                     "external data lives in files beside it, and an output is renamed into place); give a file name")
    if not path:
        raise _usage(f"{what}='': give a path")
    return path


def _source(model: Any, what: str) -> Tuple[bytes, Optional[bytes]]:
    """(the path, or the name of the bytes; the bytes or None)."""
    if isinstance(model, (str, os.PathLike)):
        return _path(model, what), None
    if isinstance(model, (bytes, bytearray, memoryview)):
        return _MEMORY.encode(), bytes(model)
    if hasattr(model, "SerializeToString"):  # an onnx.ModelProto
        try:
            size = model.ByteSize()
        except Exception as e:
            if type(e).__name__ != "EncodeError":  # not protobuf's 2 GB limit: the object itself is broken
                raise InvalidModelError(f"{_MEMORY}: the ModelProto cannot be measured: ByteSize() raised "
                                        f"{type(e).__name__}: {e}", None, 3) from e
            size = _TWO_GB + 1  # protobuf cannot even measure one past 2 GB
        data = None
        if isinstance(size, int) and size <= _TWO_GB:
            try:
                data = model.SerializeToString()
            except Exception as e:
                raise InvalidModelError(f"{_MEMORY}: the ModelProto cannot be serialized: SerializeToString() raised "
                                        f"{type(e).__name__}: {e}", None, 3) from e
        if not isinstance(size, int):
            raise InvalidModelError(f"{_MEMORY}: the ModelProto's ByteSize() returned {size!r}, not a size", None, 3)
        if data is None:
            raise UnsupportedModelError(
                f"{_MEMORY}: the ModelProto passes protobuf's 2 GB limit for one serialized model: save it with its "
                "external data (onnx.save(..., save_as_external_data=True)) and give qconv its path", None, 4)
        return _MEMORY.encode(), data
    raise _usage(f"{what}: give a path, bytes or an onnx.ModelProto, not {type(model).__name__}")


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _usage(f"{name}={value!r}: give True or False")
    return value


def _text(name: str, value: Any) -> str:
    """An optional string keyword ("" for None)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _usage(f"{name}={value!r}: give a string or None, not {type(value).__name__}")
    return value


def _whole(name: str, value: Any, low: int, high: int) -> int:
    """An int keyword in [low, high] (a bool is no number here)."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise _usage(f"{name}={value!r}: give an integer from {low} to {high}")
    return value


def _names(name: str, value: Any) -> List[str]:
    """A list of names: a sequence of strings, or one comma-separated string; never empty."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise _usage(f"{name}={value!r}: give a list of names (strings)")
    if not value:
        raise _usage(f"{name}=[]: give at least one name")
    return list(value)


def _interruptible() -> bool:
    """Whether Ctrl-C can cancel this call: Python runs signal handlers in the main thread only."""
    return threading.current_thread() is threading.main_thread()


def _choice(name: str, value: Optional[str], allowed: Sequence[str]) -> str:
    text = _text(name, value)
    if value is None:
        return ""
    if text not in allowed:
        raise _usage(f"{name}={value!r}: not one of {', '.join(allowed)}")
    return text


_TYPES = {"uint8": 2, "int8": 3}  # onnx.TensorProto.UINT8, INT8


# ---- the API ------------------------------------------------------------------------------------


def convert(
    model: Union[ModelLike, Sequence[PathLike]],
    output: Optional[PathLike] = None,
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
    report: Optional[PathLike] = None,
    node_data: Optional[PathLike] = None,
    out_dir: Optional[PathLike] = None,
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
    ``no_saturation_check``, ``require_change``, ``report`` (also write the report to this file:
    ``.json``, or ``.html`` for one page to open in a browser), ``node_data`` (each node's outcome
    as Model Explorer's node data, to this file; also in ``result.node_data``),
    ``dump`` (the IR after every pass, in ``result.dump``), ``time_passes``, ``quiet`` and
    ``verbose`` (0, 1 or 2: what goes into ``result.messages`` and the logger). A batch is
    ``model`` a list of paths with ``out_dir`` (and ``jobs``).

    Paths are taken as Python's ``os`` functions take them (``str``, ``bytes`` or ``os.PathLike``;
    a name that is not UTF-8 works); ``model`` as ``bytes`` is the serialized model, not a path.

    Raises a :class:`QconvError` subclass for each failure (its exit code, message and node); a
    wrong argument is a :class:`UsageError` naming the keyword, as the command's exit 2.
    Releases the GIL while it converts: conversions may run from several threads at once.
    Ctrl-C (in the main thread) cancels: ``KeyboardInterrupt`` is raised within a fraction of a
    second and nothing new is committed (an output keeps its old model and data; a batch's models
    not yet committed are not written). Should it arrive after the commit, the conversion had
    finished: its output is whole.
    """
    for name, value in (("contrib", contrib), ("approximate", approximate), ("raise_weight_scale", raise_weight_scale),
                        ("annotate", annotate), ("inline_data", inline_data), ("fsync", fsync),
                        ("no_saturation_check", no_saturation_check), ("require_change", require_change),
                        ("dump", dump), ("time_passes", time_passes), ("quiet", quiet)):
        _flag(name, value)
    _whole("verbose", verbose, 0, 2)
    if quiet and verbose:
        raise _usage("quiet and verbose contradict each other")
    _whole("jobs", jobs, 1, 256)
    if jobs != 1 and out_dir is None:
        raise _usage(f"jobs={jobs}: converts a batch's models at once: it goes with out_dir and a list of models")
    if opset is not None:
        _whole("opset", opset, 1, 28)
    pass_names = _names("passes", passes) if passes is not None else []
    fmt = _choice("format", format, ("qop", "qdq"))
    wt = _choice("weight_type", weight_type, tuple(_TYPES))
    at = _choice("activation_type", activation_type, tuple(_TYPES))
    if _text("target", target) == "" and target is not None:
        raise _usage(f"target='': no such target; qconv knows {', '.join(t.name for t in targets())}")
    report_path = _path(report, "report") if report is not None else b""
    node_data_path = _path(node_data, "node_data") if node_data is not None else b""
    inputs: List[bytes] = []
    in_path, in_bytes = b"", None
    out_dir_path = b""
    if out_dir is not None:
        out_dir_path = _path(out_dir, "out_dir")
        if output is not None:
            raise _usage("out_dir converts each model to OUT_DIR/<its file name>: give no output")
        if isinstance(model, (str, bytes, os.PathLike)):
            model = [model]
        if not isinstance(model, (list, tuple)):
            raise _usage("out_dir: give the models as a list of paths")
        inputs = [_path(m, "model") for m in model]
    else:
        if isinstance(model, (list, tuple)):
            raise _usage("a list of models is a batch: give out_dir")
        in_path, in_bytes = _source(model, "model")
    to_memory = output is None and out_dir is None
    out_path = _MEMORY.encode() if to_memory else (_path(output, "output") if output is not None else b"")
    code, stdout, records, report_json, converted = _qconv.convert(
        in_path, in_bytes, out_path, to_memory, inputs, out_dir_path, jobs, report_path, node_data_path, fmt,
        target or "",
        pass_names, dump, time_passes, raise_weight_scale, approximate, annotate, inline_data, fsync,
        _TYPES.get(wt, 0), _TYPES.get(at, 0), not no_saturation_check, contrib, opset or 0, require_change,
        0 if quiet else 1 + verbose, _interruptible())
    messages = _messages(records)
    parsed: Dict[str, Any] = json.loads(report_json.decode("utf-8", "replace")) if report_json else {}
    if code != 0:
        _raise(code, messages, parsed or None)
    summaries = [i["summary"] for i in parsed.get("items", []) if i.get("summary")]
    summary = summaries[0] if len(summaries) == 1 else "; ".join(  # a batch: each output's
        f"{i['output']}: {i['summary']}" for i in parsed.get("items", []) if i.get("summary"))
    written = None if to_memory else os.fsdecode(out_path if out_dir is None else out_dir_path)
    return ConversionResult(written, parsed, summary, messages, converted, stdout.decode("utf-8", "replace"),
                            _report_json=report_json)


def verify(
    model: ModelLike,
    *,
    target: Optional[str] = None,
    fail_on: str = "error",
    ignore: Iterable[str] = (),
    symmetric: bool = False,
    report: Optional[PathLike] = None,
    node_data: Optional[PathLike] = None,
) -> VerifyResult:
    """Check a quantized model's parameters and representations, as ``qconv verify --json`` does.

    Returns the findings (severity, kind, node, tensor, message) and whether one is of severity
    ``fail_on`` ("error", "warning" or "note") or worse. ``target`` names the runtime the model is
    for (what it cannot run becomes a finding); ``ignore`` sets kinds of finding aside;
    ``symmetric`` also names what a runtime taking int8 at zero point 0 only refuses; ``report``
    writes the findings and each node's to a file (``.json``, or ``.html``: one page), ``node_data``
    each node's findings as Model Explorer's node data. Raises
    :class:`InvalidModelError` when the model cannot be read, :class:`UsageError` for a wrong
    argument.
    """
    severities = {"note": 0, "warning": 1, "error": 2}
    fail = _choice("fail_on", fail_on, tuple(severities))
    if not isinstance(ignore, str):
        try:
            ignore = list(ignore)
        except TypeError:
            raise _usage(f"ignore={ignore!r}: give a list of kinds of finding") from None
    kinds = _names("ignore", ignore) if ignore else []
    _flag("symmetric", symmetric)
    path, data = _source(model, "model")
    report_path = _path(report, "report") if report is not None else b""
    node_data_path = _path(node_data, "node_data") if node_data is not None else b""
    code, stdout, records = _qconv.verify(path, data, _text("target", target), severities[fail], symmetric, kinds,
                                          report_path, node_data_path, _interruptible())
    messages = _messages(records)
    obj: Dict[str, Any] = json.loads(stdout.decode("utf-8", "replace")) if stdout else {}
    if code not in (0, 1):
        _raise(code, messages)
    findings = [Finding(f["severity"], f["kind"], f["node"], f.get("tensor") or "", f["message"])
                for f in obj.get("findings", [])]
    return VerifyResult(findings, code == 1, obj, messages)


def inspect(model: ModelLike, *, target: Optional[str] = None, format: Optional[str] = None) -> Dict[str, Any]:
    """What the model is and what :func:`convert` would do with it: the object ``qconv inspect
    --json`` prints (schema: docs/cli.md). ``target`` and ``format`` choose the conversion it
    dry-runs. Writes nothing. Raises :class:`InvalidModelError` when the model cannot be read."""
    fmt = _choice("format", format, ("qop", "qdq"))
    path, data = _source(model, "model")
    code, stdout, records = _qconv.inspect(path, data, _text("target", target), fmt, _interruptible())
    messages = _messages(records)
    described: Dict[str, Any] = json.loads(stdout.decode("utf-8", "replace")) if stdout else {}
    if code != 0:
        _raise(code, messages)
    return described


def targets() -> List[Target]:
    """The runtimes ``target=`` writes for, as ``qconv targets`` lists them."""
    return [Target(*t) for t in _qconv.targets()]


_EXPLORER = "pip install ai-edge-model-explorer model-explorer-onnx"


def show(result_or_path: Union[ConversionResult, PathLike], *, target: Optional[str] = None, host: str = "localhost",
         port: int = 8080, open_in_browser: bool = True) -> None:
    """Draw a model in Google's Model Explorer with what qconv says of each node on it.

    ``result_or_path`` is what :func:`convert` returned (the output model, each node coloured by
    its outcome: fused, moved, refused, ...) or a model's path (each node coloured by what
    :func:`verify` finds in it, for ``target`` when given). Starts Model Explorer's server on
    ``host``:``port`` and opens it in the browser (``open_in_browser=False``: only the server, at
    ``http://host:port``); returns when it is stopped (Ctrl-C). Model Explorer is not a
    dependency of qconv: without ``ai-edge-model-explorer`` and ``model-explorer-onnx``, raises
    ``ModuleNotFoundError`` saying how to install them.
    """
    import importlib

    try:  # by name: neither is a dependency, nor typed
        model_explorer: Any = importlib.import_module("model_explorer")
        importlib.import_module("model_explorer_onnx")  # the ONNX adapter it loads
    except ImportError as e:
        raise ModuleNotFoundError(f"qconv.show() draws the model in Model Explorer, which is not installed "
                                  f"({e.name} is missing): {_EXPLORER}") from None
    import tempfile

    _flag("open_in_browser", open_in_browser)
    _whole("port", port, 1, 65535)
    with tempfile.TemporaryDirectory(prefix="qconv-show-") as folder:
        overlay = os.path.join(folder, "node_data.json")
        if isinstance(result_or_path, ConversionResult):
            if not result_or_path.node_data:
                raise _usage("show(): the result is of a batch or a failed conversion; give one conversion's result "
                             "or a model's path")
            model = result_or_path.output
            if model is None:  # converted into memory: drawn from a copy
                model = os.path.join(folder, "converted.onnx")
                with open(model, "wb") as f:
                    f.write(result_or_path.model_bytes or b"")
            with open(overlay, "w", encoding="utf-8") as f:
                f.write(result_or_path.node_data)
        else:
            model = os.fsdecode(_path(result_or_path, "result_or_path"))
            verify(model, target=target, fail_on="note", node_data=overlay)
        config = model_explorer.config()
        config.add_model_from_path(path=model)
        config.add_node_data_from_path(path=overlay)
        model_explorer.visualize_from_config(config=config, host=host, port=port, extensions=["model_explorer_onnx"],
                                             no_open_in_browser=not open_in_browser)
