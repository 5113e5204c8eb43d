"""Run by runtimes.run_rknn with the RKNN toolkit's own python (its venv pins onnx 1.18, numpy
1.26, ...): build `model` for rk3588 at an optimization level from its own quantization, run the
PC simulator on in<i>.npy, write out<i>.npy. argv: model work count level [verbose]."""
import os
import sys

import numpy as np
from rknn.api import RKNN


def main() -> int:
    model, work, count, level = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    r = RKNN(verbose=len(sys.argv) > 5)
    r.config(target_platform="rk3588", optimization_level=level)
    if r.load_onnx(model=model) != 0:
        print("E load_onnx failed")
        return 1
    if r.build(do_quantization=False) != 0:
        print("E build failed")
        return 1
    if count == 0:
        return 0
    if r.init_runtime() != 0:
        print("E init_runtime failed")
        return 1
    for i in range(count):
        x = np.load(os.path.join(work, f"in{i}.npy"))
        out = r.inference(inputs=[x], data_format=["nchw"] if x.ndim == 4 else None)
        np.save(os.path.join(work, f"out{i}.npy"), out[0])
    r.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
