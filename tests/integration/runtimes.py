"""The runtimes qconv's --target writes for, run for real (never mocked), as the pinned PyPI
packages of tests/requirements.txt ship them. Each run(path, xs) returns the model's first output
for each input, or raises Refused with what the runtime said when it does not load, import,
compile or run the model. How each is driven is ../shared/notes/runtimes.md's recipe; the versions
are in VERSIONS, and docs/targets.md's matrix was measured with them (test_targets.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx


class Refused(Exception):
    """The runtime did not run the model: the message is what it said, cut to one line."""


def _line(e: BaseException | str) -> str:
    text = " ".join(str(e).split())
    return text[:300]


def _version(dist: str) -> str:
    from importlib.metadata import version
    return version(dist)


def run_onnxruntime(path: str, xs: list[np.ndarray], optimized: bool = False) -> list[np.ndarray]:
    """Graph optimizations off (every op computed is the model's own), or with `optimized` a
    default session, as users run it (a QDQ model's groups fused into QLinear kernels)."""
    import onnxruntime as ort
    try:
        so = ort.SessionOptions()
        so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimized
                                       else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        name = s.get_inputs()[0].name
        return [s.run(None, {name: x})[0] for x in xs]
    except Exception as e:  # noqa: BLE001: every failure is the runtime's answer
        raise Refused(_line(e)) from None


def run_openvino(path: str, xs: list[np.ndarray], f32: bool = False) -> list[np.ndarray]:
    """`f32`: INFERENCE_PRECISION_HINT f32, where the CPU plugin would compute float ops in bf16
    (its default on CPUs with avx512_bf16; docs/targets.md): for a test whose float ops must not
    depend on the host."""
    import openvino as ov
    try:
        core = ov.Core()
        # works around a code-generation failure of some MLPs ("Can't allocate registers for a
        # snippet"), which hits the QDQ input too (runtimes.md)
        config = {"SNIPPETS_MODE": "DISABLE", **({"INFERENCE_PRECISION_HINT": "f32"} if f32 else {})}
        compiled = core.compile_model(core.read_model(path), "CPU", config)
        return [np.asarray(compiled([x])[compiled.output(0)]) for x in xs]
    except Exception as e:  # noqa: BLE001
        raise Refused(_line(e)) from None


def run_tvm(path: str, xs: list[np.ndarray]) -> list[np.ndarray]:
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    try:
        mod = from_onnx(onnx.load(path))
        mod = relax.transform.DecomposeOpsForInference()(mod)
        mod = relax.transform.LegalizeOps()(mod)
        ex = relax.build(mod, target="llvm")
        vm = relax.VirtualMachine(ex, tvm.cpu())
        out = []
        for x in xs:
            r = vm["main"](tvm.runtime.tensor(x) if hasattr(tvm.runtime, "tensor") else tvm.nd.array(x))
            r = r[0] if isinstance(r, (list, tuple)) or type(r).__name__ == "Array" else r
            out.append(r.numpy())
        return out
    except Exception as e:  # noqa: BLE001
        raise Refused(_line(e)) from None


def _iree_tool(name: str) -> str:
    return os.path.join(os.path.dirname(sys.executable), name)


def run_iree(path: str, xs: list[np.ndarray]) -> list[np.ndarray]:
    import iree.runtime as rt
    with tempfile.TemporaryDirectory() as work:
        mlir, vmfb = os.path.join(work, "m.mlir"), os.path.join(work, "m.vmfb")
        for cmd in ([_iree_tool("iree-import-onnx"), path, "-o", mlir],
                    [_iree_tool("iree-compile"), mlir, "--iree-hal-target-backends=llvm-cpu",
                     "--iree-llvmcpu-target-cpu=generic", "-o", vmfb]):
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                said = [ln for ln in (p.stderr + p.stdout).splitlines() if "error" in ln.lower()] or [p.stderr]
                raise Refused(f"{os.path.basename(cmd[0])}: " + _line(said[0]))
        try:
            config = rt.Config("local-task")
            ctx = rt.SystemContext(config=config)
            vm = rt.VmModule.mmap(config.vm_instance, vmfb)
            ctx.add_vm_module(vm)
            entry = next(n for n in vm.function_names if not n.endswith("$async") and not n.startswith("__"))
            fn = ctx.modules[vm.name][entry]
            out = []
            for x in xs:
                r = fn(x)
                r = r[0] if isinstance(r, (list, tuple)) else r  # a model of several outputs: its first, as the others' runners
                out.append(np.asarray(r.to_host()))
            return out
        except Exception as e:  # noqa: BLE001
            raise Refused(_line(e)) from None


def run_aidge(path: str, xs: list[np.ndarray]) -> list[np.ndarray]:
    import aidge_backend_cpu  # noqa: F401: registers the cpu kernels
    import aidge_core
    import aidge_onnx
    aidge_core.Log.set_console_level(aidge_core.Level.Fatal)
    out = []
    try:
        for x in xs:  # the recipe of runtimes.md: a Producer feeds the first input
            g = aidge_onnx.load_onnx(path)
            generic = sorted({f"{n.name()} ({n.type()})" for n in g.get_nodes()
                              if isinstance(n.get_operator(), aidge_core.GenericOperatorOp)})
            if generic:
                raise Refused("imported as GenericOperator: " + ", ".join(generic))
            node, slot = g.get_ordered_inputs()[0]
            feed = aidge_core.Producer(aidge_core.Tensor(x), "feed")
            feed.add_child(node, 0, slot)
            g.add(feed)
            g.set_backend("cpu")
            g.forward_dtype()
            g.forward_dims()
            aidge_core.SequentialScheduler(g).forward(False)
            node, slot = g.get_ordered_outputs()[0]
            t = node.get_operator().get_output(slot)
            out.append(np.array(t).copy().reshape(t.dims))
        return out
    except Refused:
        raise
    except Exception as e:  # noqa: BLE001
        raise Refused(_line(e)) from None


# The provider options of docs/targets.md's QNN recipe: without a `soc_model` the x86 HTP simulator
# fails graph finalization of real models (QNN_COMMON_ERROR_MEM_ALLOC: 45 of 58 sessions of
# issue 47's models); any SoC model finalizes them. 60 (a Snapdragon of HTP v73) is the one here.
QNN_OPTIONS = {"offload_graph_io_quantization": "0", "soc_model": "60"}


def run_qnn(path: str, xs: list[np.ndarray], fallback: bool = False) -> list[np.ndarray]:
    """Qualcomm QNN's HTP backend (onnxruntime-qnn: its x86 HTP simulator), the recipe of
    runtimes.md with QNN_OPTIONS. Without `fallback` a node HTP does not take fails the session
    instead of running on the CPU: a run is a run on the NPU."""
    import onnxruntime as ort
    import onnxruntime_qnn
    ort.set_default_logger_severity(3)
    if not any(d.ep_name == "QNNExecutionProvider" for d in ort.get_ep_devices()):
        ort.register_execution_provider_library("QNNExecutionProvider", onnxruntime_qnn.get_library_path())
    devices = [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"]
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.add_provider_for_devices(devices, {"backend_path": onnxruntime_qnn.get_qnn_htp_path(), **QNN_OPTIONS})
        if not fallback:
            so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        s = ort.InferenceSession(path, so)
        name = s.get_inputs()[0].name
        return [s.run(None, {name: x})[0] for x in xs]
    except Exception as e:  # noqa: BLE001
        raise Refused(_line(e)) from None


def rknn_python() -> str | None:
    """The RKNN toolkit's venv python (scripts/setup_rknn.sh, run by test.sh), or None."""
    py = os.environ.get("QCONV_RKNN_PYTHON", "")
    return py if py and os.path.exists(py) else None


RKNN_TIMEOUT = 180  # seconds: some builds never end (runtimes.md); a small model builds in 2 to 10 s


def run_rknn(path: str, xs: list[np.ndarray], level: int = 2, layers: list | None = None) -> list[np.ndarray]:
    """Rockchip's RKNN toolkit: build for rk3588 at `level` from the quantized model as it is
    (do_quantization=False), then its PC simulator, in its own venv, in a child process with a
    timeout. Raises Refused with what it said, or that the build did not end. With `layers`, the
    build's layer table is appended to it: (operator, data type, NPU or CPU) per layer."""
    py = rknn_python()
    assert py, "no RKNN venv: scripts/setup_rknn.sh"
    with tempfile.TemporaryDirectory() as work:
        for i, x in enumerate(xs):
            np.save(os.path.join(work, f"in{i}.npy"), x)
        child = os.path.join(os.path.dirname(__file__), "rknn_child.py")
        try:
            # in the temporary folder: the toolkit writes its check*.onnx stages to its working directory
            p = subprocess.run([py, child, os.path.abspath(path), work, str(len(xs)), str(level), "verbose"],
                               capture_output=True, text=True, timeout=RKNN_TIMEOUT, cwd=work)
        except subprocess.TimeoutExpired:
            raise Refused(f"its build did not finish in {RKNN_TIMEOUT} s") from None
        if p.returncode != 0:
            said = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.startswith("E ") or "Error" in ln]
            raise Refused(_line(said[-1] if said else p.stderr[-300:]))
        if layers is not None:
            layers.extend(rknn_layer_table(p.stdout + p.stderr))
        return [np.load(os.path.join(work, f"out{i}.npy")) for i in range(len(xs))]


def rknn_layer_table(log: str) -> list[tuple[str, str, str]]:
    """The verbose build's layer table: (operator, data type, NPU or CPU) per layer."""
    import re
    row = re.compile(r"D RKNN: \[[^\]]*\] \d+\s+(\w+)\s+(\w+)\s+(NPU|CPU)\s")
    return [m.groups() for m in map(row.match, log.splitlines()) if m]


RUNNERS = {
    "onnxruntime": run_onnxruntime,
    "openvino": run_openvino,
    "iree": run_iree,
    "tvm": run_tvm,
    "aidge": run_aidge,
    "qnn": run_qnn,
    "rknn": run_rknn,
}

DISTRIBUTIONS = {
    "onnxruntime": ["onnxruntime"],
    "openvino": ["openvino"],
    "iree": ["iree-base-compiler", "iree-base-runtime"],
    "tvm": ["apache-tvm"],
    "aidge": ["aidge-core", "aidge-onnx", "aidge-backend-cpu"],
    "qnn": ["onnxruntime", "onnxruntime-qnn"],
}


def host_cpu_flags() -> set[str]:
    """This host's CPU flags (x86 Linux: /proc/cpuinfo), or none."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def host_has_vnni() -> bool:
    """Whether int8 kernels here have VNNI (without it, x86 u8 x s8 kernels can saturate). A
    non-x86 host has no such kernel: it counts as one with."""
    flags = host_cpu_flags()
    return not ("sse2" in flags) or bool({"avx512_vnni", "avx_vnni"} & flags)


def host_has_avx512() -> bool:
    return "avx512f" in host_cpu_flags()


def versions(runtime: str) -> str:
    if runtime == "rknn":
        return "rknn-toolkit2 2.5.0 (tests/rknn-requirements.txt)"
    return ", ".join(f"{d} {_version(d)}" for d in DISTRIBUTIONS[runtime])
