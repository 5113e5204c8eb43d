"""Headless Chromium driven through its DevTools protocol, for a page that draws in its own time
(Model Explorer lays the graph out in a worker, then loads node data): navigate, wait for what
the page says in real time, take a screenshot. A minimal WebSocket client (RFC 6455: the
handshake, masked text frames out, frames in), since the test venv has none."""
from __future__ import annotations

import base64
import json
import os
import socket
import struct
import subprocess
import time
import urllib.parse
import urllib.request


class Socket:
    def __init__(self, url: str):
        u = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert b" 101 " in head.split(b"\r\n")[0], head

    def _exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "the browser closed the connection"
            out += chunk
        return out

    def send(self, text: str) -> None:
        data = text.encode()
        head = bytes([0x81])
        n = len(data)
        head += bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else \
            bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def receive(self) -> str:
        message = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            payload = self._exact(n)
            if b0 & 0x0F in (0x9, 0xA):  # ping, pong: not a message
                continue
            message += payload
            if b0 & 0x80:
                return message.decode()


class Browser:
    """Headless Chromium with a profile of its own, one page, its DevTools protocol."""

    def __init__(self, chromium: str, profile, size: tuple[int, int] = (1400, 900)):
        self.proc = subprocess.Popen([chromium, "--headless=new", "--no-sandbox", "--use-angle=swiftshader",
                                      "--enable-unsafe-swiftshader", "--no-first-run", "--remote-debugging-port=0",
                                      f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + 60
        while not (os.path.exists(port_file) and open(port_file).read().count("\n") >= 1):
            assert self.proc.poll() is None and time.monotonic() < deadline, "headless Chromium did not start"
            time.sleep(0.2)
        port = int(open(port_file).read().split()[0])
        pages = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=30).read())
        self.ws = Socket(next(p for p in pages if p["type"] == "page")["webSocketDebuggerUrl"])
        self.next_id = 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.receive())
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply["result"]

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def wait_for(self, expression: str, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.evaluate(expression):
                return True
            time.sleep(0.25)
        return False

    def screenshot(self, png: str) -> None:
        with open(png, "wb") as f:
            f.write(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (OSError, AssertionError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
