"""The report's two views, checked where people look at them (issue 50): the HTML page
(--report FILE.html) in a real browser, Debian's headless Chromium, and the node data
(--node-data FILE.json) in Google's Model Explorer with its ONNX adapter (pinned in
tests/requirements.txt), through its server's API. Both views come from the report object
--report FILE.json writes: each test compares what the browser or Model Explorer shows with
that JSON. scripts/setup.sh installs Chromium: a missing browser fails these tests, never skips.

QCONV_DOCS_SCREENSHOTS=1 also copies the screenshots into docs/images/ (docs/cli.md shows them)."""
from __future__ import annotations

import collections
import html.parser
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import devtools
from conftest import EXAMPLE, ROOT, run_qconv

DOCS_IMAGES = os.path.join(ROOT, "docs", "images")


# ---- the browser ----------------------------------------------------------------------------

def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "no chromium: scripts/setup.sh installs Debian's chromium package, which these tests need"
    return path


def browse(url: str, profile, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium at `url` with a profile of its own (tests may run at once)."""
    cmd = [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
           f"--user-data-dir={profile}", *args, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def rendered(page: str, profile, fragment: str = "") -> "Dom":
    """The page's DOM after its script ran (--dump-dom), with the view `fragment` asks for."""
    url = "file://" + urllib.parse.quote(os.path.abspath(page)) + (f"#{fragment}" if fragment else "")
    r = browse(url, profile, "--dump-dom")
    assert r.returncode == 0 and "<tbody>" in r.stdout, r.stderr[-2000:]
    return Dom(r.stdout)


def screenshot(url: str, profile, png: str, size: str = "1280,860", *args: str) -> None:
    r = browse(url, profile, f"--screenshot={png}", f"--window-size={size}", *args)
    assert r.returncode == 0 and os.path.getsize(png) > 5000, r.stderr[-2000:]
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def keep_for_docs(png: str, name: str) -> None:
    if os.environ.get("QCONV_DOCS_SCREENSHOTS") == "1":
        os.makedirs(DOCS_IMAGES, exist_ok=True)
        shutil.copyfile(png, os.path.join(DOCS_IMAGES, name))


class Dom(html.parser.HTMLParser):
    """What the tests read of the rendered page: the table's rows, the outcome buttons, the
    elements with an id, the findings' sections."""

    def __init__(self, text: str):
        super().__init__()
        self.rows: list[dict] = []  # each <tr> of the table's body: its outcome and its cells' text
        self.buttons: list[dict] = []  # the counts: data-outcome, data-count, class
        self.by_id: dict[str, dict] = {}
        self.details: list[dict] = []
        self.items: dict[str, list[str]] = collections.defaultdict(list)  # <li> text by the <details> id
        self._stack: list[dict] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        node = {"tag": tag, "attrs": a, "text": "", "cells": [], "children": []}
        if self._stack:
            self._stack[-1]["children"].append(node)
        if tag == "tr" and any(p["tag"] == "tbody" for p in self._stack):
            self.rows.append(node)
        if tag == "button" and "data-outcome" in a:
            self.buttons.append(node)
        if tag == "details":
            self.details.append(node)
        if "id" in a:
            self.by_id[a["id"]] = node
        self._stack.append(node)

    def handle_endtag(self, tag):
        while self._stack:
            node = self._stack.pop()
            if node["tag"] == "td" and self._stack and self._stack[-1]["tag"] == "tr":
                self._stack[-1]["cells"].append(node["text"].strip())
            if node["tag"] == "li":
                owner = next((p for p in reversed(self._stack) if p["tag"] == "details"), None)
                if owner is not None:
                    self.items[owner["attrs"].get("id", "")].append(node["text"].strip())
            if node["tag"] == tag:
                break

    def handle_data(self, data):
        for node in self._stack:
            node["text"] += data

    def text(self, id_: str) -> str:
        return self.by_id[id_]["text"].strip()


# ---- helpers --------------------------------------------------------------------------------

def embedded(page: str, what: str = "data"):
    """What the page holds: the report object ("data"), or the outcomes' words, labels and colours."""
    with open(page, encoding="utf-8") as f:
        text = f.read()
    m = re.search(rf'<script type="application/json" id="qconv-{what}">(.*?)</script>', text, re.S)
    assert m, f"the page holds no {what}"
    return json.loads(m.group(1))


def report_of(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def without_times(report: dict) -> dict:
    report = dict(report)
    report.pop("ms", None)
    report["items"] = [{k: v for k, v in item.items() if k != "stages"} for item in report["items"]]
    return report


def chain_model(path: str, groups: int) -> str:
    """A QDQ model of `groups` 1x1 convolutions in a chain: 4 nodes each (the activation's
    DequantizeLinear, the weight's, the Conv, its QuantizeLinear), 4 * groups + 2 in all."""
    rng = np.random.default_rng(7)
    c = 4
    inits = [nh.from_array(np.float32(0.05), "xs"), nh.from_array(np.uint8(128), "xz"),
             nh.from_array(np.float32(0.02), "ws"), nh.from_array(np.int8(0), "wz")]
    nodes = [h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["q0"], "q_in")]
    for i in range(groups):
        inits.append(nh.from_array(rng.integers(-20, 21, (c, c, 1, 1)).astype(np.int8), f"w{i}"))
        nodes += [h.make_node("DequantizeLinear", [f"q{i}", "xs", "xz"], [f"d{i}"], f"dq_x{i}"),
                  h.make_node("DequantizeLinear", [f"w{i}", "ws", "wz"], [f"wf{i}"], f"dq_w{i}"),
                  h.make_node("Conv", [f"d{i}", f"wf{i}"], [f"y{i}"], f"conv{i}"),
                  h.make_node("QuantizeLinear", [f"y{i}", "xs", "xz"], [f"q{i + 1}"], f"q_y{i}")]
    nodes.append(h.make_node("DequantizeLinear", [f"q{groups}", "xs", "xz"], ["y"], "dq_out"))
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", T.FLOAT, [1, c, 4, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, c, 4, 4])], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=7), path)
    return path


def convert_with_views(src: str, folder, *flags: str) -> tuple[subprocess.CompletedProcess, dict, str, str]:
    """Convert `src` in `folder` (relative paths, as a user types them) with --report FILE.json,
    then again with --report FILE.html and --node-data: (the second run, its JSON report, page, node data)."""
    os.makedirs(folder, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        a = subprocess.run([os.environ.get("QCONV_BIN", os.path.join(ROOT, "build", "tools", "qconv")), "convert", src,
                            "out.onnx", *flags, "--report", "report.json"], capture_output=True, text=True, timeout=300)
        b = subprocess.run([os.environ.get("QCONV_BIN", os.path.join(ROOT, "build", "tools", "qconv")), "convert", src,
                            "out.onnx", *flags, "--report", "report.html", "--node-data", "nodes.json"],
                           capture_output=True, text=True, timeout=300)
    finally:
        os.chdir(cwd)
    assert a.returncode == b.returncode, (a.stderr, b.stderr)
    return b, report_of(os.path.join(folder, "report.json")), os.path.join(folder, "report.html"), os.path.join(folder, "nodes.json")


# ---- the HTML report ------------------------------------------------------------------------

def test_the_examples_page_shows_in_a_browser_what_the_json_report_says(tmp_path):
    os.makedirs(tmp_path / "run")
    shutil.copyfile(EXAMPLE, tmp_path / "run" / "small_cnn_qdq.onnx")  # named as a user would, relative
    run, report, page, _ = convert_with_views("small_cnn_qdq.onnx", tmp_path / "run", "--format", "qop")
    assert run.returncode == 0, run.stderr
    # one source of truth: the page holds the JSON report's object, its times apart
    assert embedded(page) == without_times(report)
    item = report["items"][0]
    nodes = item["nodes"]
    counted = collections.Counter(n["outcome"] for n in nodes)
    assert counted["fused"] >= 12 and counted["moved"] == 3 and counted["refused"] == 1, counted

    dom = rendered(page, tmp_path / "profile")
    assert dom.text("summary") == item["summary"]
    shown = {b["attrs"]["data-outcome"]: int(b["attrs"]["data-count"]) for b in dom.buttons}
    assert shown == {"": len(nodes), **counted}
    assert dom.text("shown") == f"{len(nodes)} of {len(nodes)} nodes"
    assert [(r["attrs"]["data-outcome"], r["cells"][0]) for r in dom.rows] == [(n["outcome"], n["name"]) for n in nodes]
    conv = next(r for r in dom.rows if r["cells"][0] == "conv_12")
    assert conv["cells"][1] == "Conv" and conv["cells"][4] == "conv_12"

    # a count is a filter: the view is in the address's fragment, so a filtered page is a link
    refused = rendered(page, tmp_path / "profile", "outcome=refused")
    assert [r["cells"][0] for r in refused.rows] == [n["name"] for n in nodes if n["outcome"] == "refused"]
    assert "on" in next(b for b in refused.buttons if b["attrs"]["data-outcome"] == "refused")["attrs"].get("class", "")
    searched = rendered(page, tmp_path / "profile", "q=conv_12")
    want = [n["name"] for n in nodes
            if any("conv_12" in (" ".join(v) if isinstance(v, list) else str(v)) for v in n.values())]
    assert [r["cells"][0] for r in searched.rows] == want and len(want) >= 5
    ordered = rendered(page, tmp_path / "profile", "sort=outcome")
    order = [o["name"] for o in embedded(page, "outcomes")]
    ranks = [order.index(r["attrs"]["data-outcome"]) for r in ordered.rows]
    assert ranks == sorted(ranks) and len(ranks) == len(nodes)

    png = str(tmp_path / "report-page.png")
    screenshot("file://" + urllib.parse.quote(os.path.abspath(page)), tmp_path / "profile", png)
    keep_for_docs(png, "report-page.png")


def test_the_page_is_self_contained_byte_identical_and_names_only_the_paths_given(tmp_path):
    _, _, first, nodes_a = convert_with_views(EXAMPLE, tmp_path / "a", "--format", "qop")
    _, _, second, nodes_b = convert_with_views(EXAMPLE, tmp_path / "b", "--format", "qop")
    with open(first, "rb") as f, open(second, "rb") as g:
        page = f.read()
        assert page == g.read(), "the same input and flags gave two pages"
    with open(nodes_a, "rb") as f, open(nodes_b, "rb") as g:
        assert f.read() == g.read()
    text = page.decode("utf-8")
    assert str(tmp_path) not in text  # the run's folder: only the relative names given
    assert os.path.basename(str(tmp_path)) not in text
    # nothing fetched: no source, link, import or request to a network
    assert not re.search(r"\b(src|href)\s*=|@import|url\(|fetch\(|XMLHttpRequest|https?://", text), \
        "the page would fetch something"


def test_a_5000_node_models_page_draws_a_page_of_rows_at_a_time(tmp_path):
    src = chain_model(str(tmp_path / "chain.onnx"), 1250)
    run, report, page, _ = convert_with_views(src, tmp_path / "run", "--format", "qop")
    assert run.returncode == 0, run.stderr
    nodes = report["items"][0]["nodes"]
    assert len(nodes) == 5002
    assert collections.Counter(n["outcome"] for n in nodes)["fused"] == 5000
    started = time.monotonic()
    dom = rendered(page, tmp_path / "profile")
    seconds = time.monotonic() - started
    assert dom.text("shown") == "5002 of 5002 nodes" and dom.text("page") == "page 1 of 51"
    assert [r["cells"][0] for r in dom.rows] == [n["name"] for n in nodes[:100]]
    later = rendered(page, tmp_path / "profile", "outcome=fused&page=40")
    fused = [n["name"] for n in nodes if n["outcome"] == "fused"]
    assert [r["cells"][0] for r in later.rows] == fused[4000:4100] and later.text("page") == "page 41 of 50"
    searched = rendered(page, tmp_path / "profile", "q=conv1249")
    assert {r["cells"][0] for r in searched.rows} == {"dq_x1249", "dq_w1249", "conv1249", "q_y1249"}
    png = str(tmp_path / "large.png")
    screenshot("file://" + urllib.parse.quote(os.path.abspath(page)), tmp_path / "profile", png)
    print(f"\n5,002-node page: {os.path.getsize(page) / 1e6:.2f} MB, loaded and drawn by headless Chromium in {seconds:.2f} s")


def test_verify_targets_page_lists_the_findings_by_severity_and_what_the_runtime_will_not_take(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the paths as a user types them: the page names only those
    qop = "out.onnx"
    assert run_qconv("convert", EXAMPLE, qop, "--format", "qop").returncode == 0
    page, overlay, as_json = "verify.html", "verify-nodes.json", "verify.json"
    r = run_qconv("verify", qop, "--target", "openvino", "--report", page, "--node-data", overlay)
    assert r.returncode == 1, r.stderr
    assert run_qconv("verify", qop, "--target", "openvino", "--report", as_json).returncode == 1
    j = report_of(as_json)
    assert j == json.loads(run_qconv("verify", qop, "--target", "openvino", "--json").stdout) | \
        {"graph": j["graph"], "nodes": j["nodes"]}  # --json's object, and each node's
    target = [f for f in j["findings"] if f["kind"] == "target"]
    assert {f["node"] for f in target} == {"conv_4", "conv_12", "conv_17"}
    dom = rendered(page, tmp_path / "profile")
    by_severity = {d["attrs"]["data-severity"]: int(d["attrs"]["data-count"]) for d in dom.details if "data-severity" in d["attrs"]}
    assert by_severity == {s: sum(f["severity"] == s for f in j["findings"]) for s in ("error", "warning", "note")}
    assert by_severity["error"] == 3 and by_severity["warning"] == 3
    assert len(dom.items["not-taken"]) == 3
    assert all("OpenVINO 2026.4 refuses a QLinearConv with per-channel" in li for li in dom.items["not-taken"])
    rows = {r["cells"][0]: r for r in dom.rows}
    for name in ("conv_4", "conv_12", "conv_17"):  # the runtime's reason first
        assert rows[name]["attrs"]["data-outcome"] == "will-not-run"
        assert rows[name]["cells"][3].startswith("not run by --target openvino: OpenVINO 2026.4 refuses")
    assert rows["maxpool_8"]["attrs"]["data-outcome"] == "ok" and len(rows["maxpool_8"]["cells"]) == 4  # no "became"
    values = report_of(overlay)["small_cnn"]["results"]
    for n in j["nodes"]:
        assert values[n["name"]]["value"] == (f"{n['outcome']}: {n['reason']}" if n["reason"] else n["outcome"])
    png = str(tmp_path / "verify-page.png")
    screenshot("file://" + urllib.parse.quote(os.path.abspath(page)), tmp_path / "profile", png)
    keep_for_docs(png, "verify-page.png")


def test_a_refused_conversions_page_names_each_node_the_target_will_not_run(tmp_path):
    run, report, page, overlay = convert_with_views(EXAMPLE, tmp_path / "run", "--target", "tensorrt")
    assert run.returncode == 4
    item = report["items"][0]
    assert item["output_nodes"] == [] and all(n["became"] == [] for n in item["nodes"])  # nothing was written
    wont = [n for n in item["nodes"] if n["outcome"] == "will-not-run"]
    assert wont and all("TensorRT" in n["reason"] for n in wont)
    assert not os.path.exists(overlay)  # no output, no overlay of it
    dom = rendered(page, tmp_path / "profile", "outcome=will-not-run")
    assert [r["cells"][0] for r in dom.rows] == [n["name"] for n in wont]
    assert dom.text("error") == item["error"]


# ---- Model Explorer -------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Explorer:
    """Model Explorer's server (the pinned ai-edge-model-explorer, with model-explorer-onnx) for
    `model` with the node data `overlay`, and its API."""

    def __init__(self, model: str, overlay: str, log):
        exe = os.path.join(os.path.dirname(sys.executable), "model-explorer")
        assert os.path.exists(exe), "Model Explorer is not in the test venv: tests/requirements.txt pins it"
        self.port = free_port()
        self.model = model
        self.overlay = os.path.abspath(overlay)
        self.log = open(log, "w")
        self.proc = subprocess.Popen([exe, "--extensions=model_explorer_onnx", "--no_open_in_browser", "--host",
                                      "127.0.0.1", "--port", str(self.port), model, f"--node_data_paths={overlay}"],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(self.url("/"), timeout=5).read()
                break
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, "Model Explorer did not start"
                time.sleep(0.5)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def graph(self) -> dict:
        """The graph the ONNX adapter makes of the model: what the page draws."""
        body = json.dumps({"extensionId": "onnx_adapter", "cmdId": "convert", "modelPath": self.model, "settings": {},
                           "deleteAfterConversion": False}).encode()
        req = urllib.request.Request(self.url("/apipost/v1/send_command"), body, {"Content-Type": "application/json"})
        out = json.loads(urllib.request.urlopen(req, timeout=120).read())
        assert "error" not in out, out
        return out["graphs"][0] if "graphs" in out else out["graphCollections"][0]["graphs"][0]

    def node_data(self) -> dict:
        """The node data as the page loads it: the file given at start, read through the server."""
        q = urllib.parse.urlencode({"path": self.overlay})
        out = json.loads(urllib.request.urlopen(self.url(f"/api/v1/read_text_file?{q}"), timeout=60).read())
        assert "error" not in out, out
        return json.loads(out["content"])

    def close(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=30)
        self.log.close()


def op_nodes(graph: dict) -> dict[str, dict]:
    """The graph's operator nodes by id (not its values, initializers, inputs and outputs)."""
    return {n["id"]: n for n in graph["nodes"]
            if not n["id"].startswith("[value] ") and n.get("label") not in ("Input", "Output", "Initializer")}


def test_model_explorer_shows_on_each_node_of_the_output_the_outcome_the_json_report_has(tmp_path):
    run, report, _, overlay = convert_with_views(EXAMPLE, tmp_path / "run", "--format", "qop")
    assert run.returncode == 0
    item = report["items"][0]
    me = Explorer(str(tmp_path / "run" / "out.onnx"), overlay, tmp_path / "explorer.log")
    try:
        graph = me.graph()
        data = me.node_data()
    finally:
        me.close()
    assert graph["id"] == item["graph"] == "small_cnn"
    ids = op_nodes(graph)
    assert set(ids) == {n["id"] for n in item["output_nodes"]}  # every node, by the id Model Explorer gives it
    results = data[graph["id"]]["results"]
    for n in item["output_nodes"]:
        want = f"{n['outcome']}: {n['reason']}" if n["reason"] else n["outcome"]
        assert results[n["id"]]["value"] == want, n["id"]
        assert ids[n["id"]]["label"] == n["op"]
    assert results["conv_4"]["value"].startswith("fused: fuse-qlinear-conv: from Conv conv_4")
    assert results["globalaveragepool_19"]["value"].startswith("refused: stays in QDQ form")


def test_model_explorers_page_draws_the_overlay(tmp_path):
    """The page itself, in headless Chromium driven in real time (Model Explorer lays the graph
    out in a worker, then loads the node data): it lists qconv's node data and counts each
    outcome on the nodes; the screenshot is docs/cli.md's."""
    run, report, _, overlay = convert_with_views(EXAMPLE, tmp_path / "run", "--format", "qop")
    assert run.returncode == 0
    model = str(tmp_path / "run" / "out.onnx")
    me = Explorer(model, overlay, tmp_path / "explorer.log")
    browser = None
    try:
        view = {"models": [{"url": model}], "nodeData": [os.path.abspath(overlay)], "nodeDataTargets": [""],
                "uiState": {"paneStates": [{"deepestExpandedGroupNodeIds": ["small_cnn"], "selectedNodeId": "",
                                            "selectedGraphId": "small_cnn", "selectedCollectionLabel": "",
                                            "widthFraction": 1, "flattenLayers": True}]}}
        browser = devtools.Browser(chromium(), str(tmp_path / "profile"))
        browser.call("Page.enable")
        browser.call("Page.navigate", url=me.url("/?data=" + urllib.parse.quote(json.dumps(view))))
        loaded = "document.body.innerText.includes('NODE DATA PROVIDERS') && document.body.innerText.includes('#fused')"
        assert browser.wait_for(loaded, 90), browser.evaluate("document.body.innerText")[:2000]
        text = browser.evaluate("document.body.innerText")
        png = str(tmp_path / "model-explorer.png")
        time.sleep(1)  # the last frame of the layout
        browser.screenshot(png)
    finally:
        if browser:
            browser.close()
        me.close()
    assert "qconv" in text and "#moved" in text and "#left" in text
    assert os.path.getsize(png) > 20000
    keep_for_docs(png, "model-explorer.png")


def test_model_explorer_draws_verifys_findings_on_the_input_unnamed_and_repeated_names_too(tmp_path):
    """Model Explorer's ONNX adapter names an unnamed node "node" ("node_1", ... after it) and a
    repeated name "<name>_1": verify's node data keys them so."""
    m = onnx.load(EXAMPLE)
    for n in m.graph.node:
        if n.op_type in ("MaxPool", "GlobalAveragePool"):
            n.name = ""
        if n.name == "conv_17":
            n.name = "conv_12"  # a name the graph has twice
    src = str(tmp_path / "unnamed.onnx")
    onnx.save(m, src)
    overlay, as_json = str(tmp_path / "nodes.json"), str(tmp_path / "verify.json")
    assert run_qconv("verify", src, "--target", "tensorrt", "--node-data", overlay, "--report", as_json).returncode == 1
    j = report_of(as_json)
    me = Explorer(src, overlay, tmp_path / "explorer.log")
    try:
        graph = me.graph()
        data = me.node_data()
    finally:
        me.close()
    ids = op_nodes(graph)
    assert {"node", "node_1", "conv_12", "conv_12_1"} <= set(ids)
    assert ids["node"]["label"] == "MaxPool" and ids["node_1"]["label"] == "GlobalAveragePool"
    results = data[graph["id"]]["results"]
    assert set(results) == set(ids)
    # the rows are in the input's order, as the adapter's nodes: each row's value is on its node
    rows = [n for n in j["nodes"]]
    in_order = [n["id"] for n in graph["nodes"] if n["id"] in ids]
    assert len(rows) == len(in_order)
    for row, id_ in zip(rows, in_order):
        assert results[id_]["value"] == (f"{row['outcome']}: {row['reason']}" if row["reason"] else row["outcome"]), id_
    assert any(r["value"].startswith("will-not-run: ") for r in results.values())


def test_a_batchs_page_has_each_model_and_a_link_to_each(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("a.onnx", "b.onnx"):
        shutil.copyfile(EXAMPLE, name)
    os.mkdir("out")
    r = run_qconv("convert", "--out-dir", "out", "a.onnx", "b.onnx", "--format", "qop", "--report", "batch.html")
    assert r.returncode == 0, r.stderr
    data = embedded("batch.html")
    assert [i["input"] for i in data["items"]] == ["a.onnx", "b.onnx"]
    dom = rendered("batch.html", tmp_path / "profile")
    assert [o["text"].strip() for o in dom.by_id["item"]["children"]] == ["a.onnx (exit 0)", "b.onnx (exit 0)"]
    assert dom.text("title") == "qconv convert: 2 models"
    second = rendered("batch.html", tmp_path / "profile", "item=1&outcome=fused")
    want = [n["name"] for n in data["items"][1]["nodes"] if n["outcome"] == "fused"]
    assert want and [row["cells"][0] for row in second.rows] == want
    assert second.by_id["item"]["attrs"].get("data-value") == "1"


def test_a_hostile_name_is_text_on_the_page_never_markup(tmp_path):
    """A node named to end the page's script, and one whose name is not UTF-8: shown as text."""
    m = onnx.load(EXAMPLE)
    hostile = "</script><script>document.title='owned'</script><b>x"
    m.graph.node[3].name = hostile
    m.graph.node[4].name = "BADNAME1"  # made "bad" and five bytes that are not UTF-8, the same length
    src = str(tmp_path / "hostile.onnx")
    with open(src, "wb") as f:
        f.write(m.SerializeToString().replace(b"BADNAME1", b"bad\xff\xfe\xff\xfe\xff"))
    page = str(tmp_path / "hostile.html")
    r = run_qconv("convert", src, str(tmp_path / "o.onnx"), "--format", "qop", "--report", page)
    assert r.returncode == 0, r.stderr
    text = open(page, encoding="utf-8").read()
    held = text.split('id="qconv-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in held and json.loads(held)["items"][0]["nodes"][3]["name"] == hostile  # every '<' escaped
    dom = rendered(page, tmp_path / "profile")
    names = [row["cells"][0] for row in dom.rows]
    assert hostile in names and "bad" + "\ufffd" * 5 in names
    assert dom.text("title").startswith("qconv convert")  # no script of the model's ran


def test_the_views_never_replace_an_input_an_output_or_each_other(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(EXAMPLE, "in.onnx")
    before = open("in.onnx", "rb").read()
    cases = {
        ("convert", "in.onnx", "out.onnx", "--format", "qop", "--node-data", "in.onnx"): "--node-data in.onnx: names an input",
        ("convert", "in.onnx", "out.onnx", "--format", "qop", "--node-data", "out.onnx"): "--node-data out.onnx: names an input or an output",
        ("convert", "in.onnx", "out.onnx", "--format", "qop", "--report", "v.json", "--node-data", "v.json"): "--node-data v.json: names",
        ("verify", "in.onnx", "--report", "in.onnx"): "--report in.onnx: names an input",
        ("verify", "in.onnx", "--node-data", "./in.onnx"): "--node-data ./in.onnx: names an input",
        ("convert", "--out-dir", ".", "in.onnx", "--format", "qop", "--node-data", "n.json"): "--node-data draws one model",
    }
    for args, said in cases.items():
        r = run_qconv(*args)
        assert r.returncode == 2 and said in r.stderr, (args, r.stderr)
        assert open("in.onnx", "rb").read() == before
        assert sorted(os.listdir(".")) == ["in.onnx"], (args, os.listdir("."))


def test_inspect_says_of_each_node_what_convert_does(tmp_path):
    _, report, _, _ = convert_with_views(EXAMPLE, tmp_path / "run", "--format", "qop")
    dry = json.loads(run_qconv("inspect", EXAMPLE, "--json", "--format", "qop").stdout)["convert"]
    item = report["items"][0]
    assert dry["nodes"] == item["nodes"] and dry["output_nodes"] == item["output_nodes"] and dry["graph"] == "small_cnn"
