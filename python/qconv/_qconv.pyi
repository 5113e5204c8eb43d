# The compiled extension (python/module.cpp): what qconv/__init__.py calls. Not an API of its own.
from typing import List, Optional, Tuple

version: str
commit: str
built_with: str
onnx_version: str

# Paths are bytes (os.fsencode); what the command prints on stdout comes back as bytes, and its
# diagnostics as records: (level, kind, file, node, text, line), the last four as bytes.
Record = Tuple[str, str, bytes, bytes, bytes, bytes]
def convert(input: bytes, input_bytes: Optional[bytes], output: bytes, to_memory: bool, inputs: List[bytes],
            out_dir: bytes, jobs: int, report: bytes, node_data: bytes, format: str, target: str, passes: List[str], dump: bool,
            time_passes: bool, raise_weight_scale: bool, approximate: bool, annotate: bool, inline_data: bool,
            fsync: bool, weight_type: int, activation_type: int, check_saturation: bool, contrib: bool, opset: int,
            require_change: bool, verbosity: int, interruptible: bool) -> Tuple[int, bytes, List[Record], bytes, Optional[bytes]]: ...
def verify(model: bytes, model_bytes: Optional[bytes], target: str, fail_on: int, symmetric: bool,
           ignore: List[str], report: bytes, node_data: bytes, interruptible: bool) -> Tuple[int, bytes, List[Record]]: ...
def inspect(model: bytes, model_bytes: Optional[bytes], target: str, format: str,
            interruptible: bool) -> Tuple[int, bytes, List[Record]]: ...
def targets() -> List[Tuple[str, str, str, str]]: ...
def node_data(report_json: bytes) -> bytes: ...
