"""`python -m qconv ...`: the qconv command itself (the `qconv` script, python/qconv_command.py,
does the same without importing the package).

The wheel carries the command built from the same sources as the extension (qconv/bin/qconv);
this replaces the Python process with it, so flags, messages, exit codes and signals are the
command's own.
"""

import os
import sys


def main() -> None:
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "qconv")
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
