# The compiled extension (python/module.cpp): what qconv/__init__.py calls. Not an API of its own.
from typing import List, Optional, Tuple

version: str
commit: str
built_with: str
onnx_version: str

def convert(input: str, input_bytes: Optional[bytes], output: str, to_memory: bool, inputs: List[str], out_dir: str,
            jobs: int, report: str, format: str, target: str, passes: List[str], dump: bool, time_passes: bool,
            raise_weight_scale: bool, approximate: bool, annotate: bool, inline_data: bool, fsync: bool,
            weight_type: int, activation_type: int, check_saturation: bool, contrib: bool, opset: int,
            require_change: bool, verbosity: int) -> Tuple[int, str, str, str, Optional[bytes]]: ...
def verify(model: str, model_bytes: Optional[bytes], target: str, fail_on: int, symmetric: bool,
           ignore: List[str]) -> Tuple[int, str, str]: ...
def inspect(model: str, model_bytes: Optional[bytes], target: str, format: str) -> Tuple[int, str, str]: ...
def targets() -> List[Tuple[str, str, str, str]]: ...
