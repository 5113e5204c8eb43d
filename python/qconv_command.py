#!python
# The `qconv` command of the wheel (installed as its script, the first line made this
# environment's Python by the installer): replaced at once by the command the wheel carries,
# qconv/bin/qconv, without importing the package (its extension, onnx) first.
import os
import sys
from importlib.util import find_spec

spec = find_spec("qconv")
if spec is None or spec.origin is None:
    sys.exit("qconv: error: the qconv package is not installed in this Python's environment")
exe = os.path.join(os.path.dirname(spec.origin), "bin", "qconv")
os.execv(exe, [exe, *sys.argv[1:]])
