"""qconv.show() and the report's views from the API (issue 50): ``report=`` as a page,
``node_data=`` and ``result.node_data``, verify's report and node data, and show(), which opens
Google's Model Explorer with the model and its node data. Model Explorer is not a dependency of
the wheel: tests/python/requirements.txt installs it (and its ONNX adapter) where it installs
(CPython 3.11 and later); on 3.10 only the message saying how to install it is checked."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

import qconv
from wheel_env import EXAMPLE

HAS_EXPLORER = sys.version_info >= (3, 11)  # where tests/python/requirements.txt installs it


def test_report_html_node_data_and_result_node_data_come_from_one_report(tmp_path):
    page, overlay = tmp_path / "report.html", tmp_path / "nodes.json"
    r = qconv.convert(EXAMPLE, tmp_path / "out.onnx", format="qop", report=page, node_data=overlay)
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    held = json.loads(re.search(r'id="qconv-data">(.*?)</script>', text, re.S).group(1))
    assert held["items"][0]["nodes"] == r.report["items"][0]["nodes"]  # the page holds the report's rows
    assert overlay.read_text(encoding="utf-8") == r.node_data  # the file and the result: the same text
    results = json.loads(r.node_data)["small_cnn"]["results"]
    assert list(results) == [n["id"] for n in r.report["items"][0]["output_nodes"]]
    assert results["conv_4"]["value"].startswith("fused: ")
    in_memory = qconv.convert(EXAMPLE, format="qop")
    assert in_memory.node_data == r.node_data  # into memory: the same nodes, the same overlay


def test_verify_writes_its_report_and_node_data(tmp_path):
    qop = tmp_path / "qop.onnx"
    qconv.convert(EXAMPLE, qop, format="qop")
    v = qconv.verify(qop, target="openvino", report=tmp_path / "v.json", node_data=tmp_path / "n.json")
    written = json.loads((tmp_path / "v.json").read_text(encoding="utf-8"))
    assert v.failed and written["findings"] == v.report["findings"]
    wont = {n["name"] for n in written["nodes"] if n["outcome"] == "will-not-run"}
    assert wont == {"conv_4", "conv_12", "conv_17"}
    overlay = json.loads((tmp_path / "n.json").read_text(encoding="utf-8"))["small_cnn"]["results"]
    assert {k for k, x in overlay.items() if x["value"].startswith("will-not-run: ")} == wont
    with pytest.raises(qconv.UsageError, match="would replace it"):  # never the model itself
        qconv.verify(qop, report=qop)


def test_show_without_model_explorer_says_how_to_install_it(tmp_path):
    """Run where Model Explorer cannot be imported (blocked, as if not installed)."""
    code = ("import sys; sys.modules['model_explorer'] = None\n"
            "import qconv\n"
            f"r = qconv.convert({EXAMPLE!r}, format='qop')\n"
            "try:\n    qconv.show(r)\nexcept ModuleNotFoundError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "pip install ai-edge-model-explorer model-explorer-onnx" in out.stdout
    assert "Model Explorer" in out.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def showing(code: str, port: int, tmp_path):
    """Run `code` (which calls qconv.show) in a child until Model Explorer serves; the URL it printed."""
    log = open(tmp_path / "show.log", "w")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while True:
        text = (tmp_path / "show.log").read_text()
        m = re.search(rf"http://127\.0\.0\.1:{port}/\?data=(\S+)", text)
        if m:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/check_health", timeout=5).read()
                return proc, log, json.loads(urllib.parse.unquote(m.group(1)))
            except OSError:
                pass
        assert proc.poll() is None and time.monotonic() < deadline, text[-3000:]
        time.sleep(0.5)


def explorer_view(port: int, config: dict) -> tuple[dict, dict]:
    """The graph the page draws (the ONNX adapter's) and the node data it loads, by its API."""
    base = f"http://127.0.0.1:{port}"
    body = json.dumps({"extensionId": "onnx_adapter", "cmdId": "convert", "modelPath": config["models"][0]["url"],
                       "settings": {}, "deleteAfterConversion": False}).encode()
    req = urllib.request.Request(base + "/apipost/v1/send_command", body, {"Content-Type": "application/json"})
    graph = json.loads(urllib.request.urlopen(req, timeout=120).read())["graphs"][0]
    q = urllib.parse.urlencode({"path": config["nodeData"][0]})
    data = json.loads(json.loads(urllib.request.urlopen(f"{base}/api/v1/read_text_file?{q}", timeout=60).read())["content"])
    return graph, data


@pytest.mark.skipif(not HAS_EXPLORER, reason="CPython 3.10: tests/python/requirements.txt installs no Model Explorer")
@pytest.mark.parametrize("given", ["result", "in memory", "path"])
def test_show_opens_model_explorer_with_the_model_and_what_qconv_says_of_each_node(tmp_path, given):
    import model_explorer  # noqa: F401  (installed here: tests/python/requirements.txt)

    port = free_port()
    out = tmp_path / "out.onnx"
    report = tmp_path / "report.json"
    if given == "path":  # a model's path: verify's findings on it
        qconv.convert(EXAMPLE, out, format="qop")
        qconv.verify(out, target="openvino", report=report)
        call = f"qconv.show({str(out)!r}, target='openvino', host='127.0.0.1', port={port}, open_in_browser=False)"
    else:
        dest = "" if given == "in memory" else f"{str(out)!r}, "
        call = (f"r = qconv.convert({EXAMPLE!r}, {dest}format='qop', report={str(report)!r})\n"
                f"qconv.show(r, host='127.0.0.1', port={port}, open_in_browser=False)")
    # Ctrl-C raises KeyboardInterrupt, as in a terminal's Python (a shell's background job, as CI
    # runs this, starts its children with SIGINT ignored, and Python keeps it so)
    ctrl_c = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    proc, log, config = showing(ctrl_c + "import qconv\n" + call, port, tmp_path)
    try:
        graph, data = explorer_view(port, config)
    finally:  # Ctrl-C, as a user stops it
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    j = json.loads(report.read_text(encoding="utf-8"))
    rows = j["items"][0]["output_nodes"] if given != "path" else \
        [{"id": n["name"], "outcome": n["outcome"], "reason": n["reason"]} for n in j["nodes"]]
    results = data[graph["id"]]["results"]
    assert graph["id"] == "small_cnn" and set(results) == {n["id"] for n in rows}
    drawn = {n["id"] for n in graph["nodes"]}
    for n in rows:
        assert n["id"] in drawn
        assert results[n["id"]]["value"] == (f"{n['outcome']}: {n['reason']}" if n["reason"] else n["outcome"])
    assert not os.path.exists(config["nodeData"][0])  # show's temporary files go with it
