"""Make test_data/nncf/two_conv_fq.onnx: a real NNCF export with OpenVINO FakeQuantize.

Not run by the tests or CI (torch is large); run by hand in a scratch environment:
    python3 -m venv /tmp/nncf-venv && /tmp/nncf-venv/bin/pip install torch nncf onnx
    /tmp/nncf-venv/bin/python scripts/make_nncf_export.py test_data/nncf/two_conv_fq.onnx
It also writes two_conv_fq_torch.npz beside it: inputs, and what the quantized torch model
(NNCF's own FakeQuantize kernels) computes for them, for the test to judge its twin by.
Made with torch 2.15.0, nncf 3.4.0: nncf.quantize (post-training, default preset) of a two-conv
CNN, exported by torch.onnx's TorchScript exporter, NNCF's default FAKE_QUANTIZE export mode.
"""
import sys

import nncf
import numpy as np
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        return self.c2(torch.relu(self.c1(x)))


def main(out: str) -> None:
    torch.manual_seed(0)
    model = Net().eval()
    data = [torch.randn(1, 3, 8, 8) for _ in range(8)]
    quantized = nncf.quantize(model, nncf.Dataset(data), subset_size=8)
    torch.onnx.export(quantized, data[0], out, opset_version=13, dynamo=False, input_names=["x"],
                      output_names=["y"])
    # what NNCF's kernels give at the two activation quantizers and at the output
    seen = {}
    for name, module in quantized.named_modules():
        if name.endswith("x__0.0") or name.endswith("relu/0__0.0"):
            key = "q_input" if name.endswith("x__0.0") else "q_relu"
            module.register_forward_hook(lambda _m, _i, o, key=key: seen.__setitem__(key, o.numpy()))
        if name.endswith("conv2d/0__1.0"):  # the weight quantizers, applied to their weights
            conv = quantized.c1 if "c1/" in name else quantized.c2
            with torch.no_grad():
                seen["q_w1" if "c1/" in name else "q_w2"] = module(conv.weight).numpy()
    xs = torch.randn(16, 3, 8, 8)
    with torch.no_grad():
        ys = quantized(xs)
    np.savez(out.replace(".onnx", "_torch.npz"), x=xs.numpy(), y=ys.numpy(), **seen)


if __name__ == "__main__":
    main(sys.argv[1])
