"""Installable as users of C++ command-line tools expect (issue 29, deliverable 6): `cmake
--install` puts the binary, its man page and bash/zsh completion under a prefix, the installed
binary runs and names its version, commit, ONNX and protobuf; `cpack -G DEB` builds a .deb whose
dependencies are the Debian packages of the libraries it links. Issue 39: a default build's command
is one static executable (no dynamic loading at each run), so its .deb depends on nothing."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import onnx
import pytest

from conftest import EXAMPLE, ROOT, qconv_bin

BUILD = os.path.dirname(os.path.dirname(qconv_bin()))  # the build tree of the binary under test


def run(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=600, **kw)


def static_build() -> bool:
    """Whether the build tree links the command statically (QCONV_STATIC_CLI: on by default, off
    for sanitized builds)."""
    with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
        return "QCONV_STATIC_CLI:BOOL=ON" in f.read()


@pytest.mark.skipif(not static_build(), reason="this build links the command dynamically (QCONV_STATIC_CLI=OFF)")
def test_the_command_is_one_static_executable():
    # a build system runs qconv once per model: no dynamic loader, no shared library mapped and
    # relocated at each run (issue 39), and so no library it could fail to find
    r = run("ldd", qconv_bin())
    assert "not a dynamic executable" in r.stdout + r.stderr, r.stdout
    elf = open(qconv_bin(), "rb").read(1 << 16)
    assert b"ld-linux" not in elf  # no program interpreter named


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    where = tmp_path_factory.mktemp("prefix")
    r = run("cmake", "--install", BUILD, "--prefix", str(where))
    assert r.returncode == 0, r.stdout + r.stderr
    return where


def test_install_puts_binary_man_page_and_completion_under_the_prefix(prefix):
    for rel in ("bin/qconv", "share/man/man1/qconv.1", "share/bash-completion/completions/qconv",
                "share/zsh/vendor-completions/_qconv"):
        assert (prefix / rel).is_file(), rel
    assert os.access(prefix / "bin" / "qconv", os.X_OK)


def test_the_installed_binary_converts_and_names_what_it_was_built_with(prefix, tmp_path):
    binary = str(prefix / "bin" / "qconv")
    v = run(binary, "--version")
    assert v.returncode == 0
    pin = open(os.path.join(ROOT, "third_party", "onnx.pin")).read()
    onnx_version = re.search(r"version=(\S+)", pin).group(1)
    first, second = v.stdout.splitlines()
    if os.path.isdir(os.path.join(ROOT, ".git")):  # built from a git checkout: the commit it was built from
        assert re.fullmatch(r"qconv \d+\.\d+\.\d+ \(commit [0-9a-f]{12}(-dirty)?\)", first), first
        head = run("git", "-C", ROOT, "rev-parse", "--short=12", "HEAD").stdout.strip()
        assert head in first
    else:  # from a source tarball: no commit to name
        assert re.fullmatch(r"qconv \d+\.\d+\.\d+ \(commit unknown\)", first), first
    assert re.fullmatch(rf"built with ONNX {re.escape(onnx_version)} \(IR version \d+, ai\.onnx opsets up to \d+\), "
                        r"protobuf \d+\.\d+\.\d+", second), second
    out = tmp_path / "out.onnx"
    r = run(binary, "convert", EXAMPLE, str(out), "--format", "qop")
    assert r.returncode == 0, r.stderr
    assert sum(n.op_type == "QLinearConv" for n in onnx.load(str(out)).graph.node) == 3


def test_the_man_page_holds_every_subcommand_and_flag(prefix):
    page = (prefix / "share" / "man" / "man1" / "qconv.1").read_text()
    assert page.startswith('.\\" DO NOT MODIFY') and ".TH QCONV" in page
    help_text = run(qconv_bin(), "help", "convert").stdout + run(qconv_bin(), "help", "verify").stdout
    flags = set(re.findall(r"(--[a-z][a-z-]+)", help_text))
    assert {"--require-change", "--werror", "--ignore", "--fail-on", "--format", "--target"} <= flags
    for flag in flags:
        assert flag.replace("-", "\\-") in page or flag in page, flag
    for sub in ("convert", "verify", "inspect", "targets", "passes"):
        assert f'qconv {sub}' in page


def test_bash_completion_completes_subcommands_flags_and_values(prefix):
    script = prefix / "share" / "bash-completion" / "completions" / "qconv"

    def complete(*words: str) -> list[str]:
        line = " ".join(repr(w) if w else "''" for w in words)
        r = run("bash", "-c", f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _qconv; "
                              'printf "%s\\n" "${COMPREPLY[@]}"')
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert complete("qconv", "con") == ["convert"]
    assert "--require-change" in complete("qconv", "convert", "--req")
    assert complete("qconv", "convert", "--target", "open") == ["openvino"]
    assert complete("qconv", "verify", "--ignore", "satu") == ["saturation"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed: its completion is parsed only where it is")
def test_zsh_completion_parses(prefix):
    assert run("zsh", "-n", str(prefix / "share" / "zsh" / "vendor-completions" / "_qconv")).returncode == 0


def test_cpack_builds_a_deb_that_depends_on_the_debian_packages_it_links(tmp_path):
    r = run("cpack", "-G", "DEB", "--config", os.path.join(BUILD, "CPackConfig.cmake"), "-B", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    debs = [f for f in os.listdir(tmp_path) if f.endswith(".deb")]
    assert len(debs) == 1, os.listdir(tmp_path)
    deb = str(tmp_path / debs[0])
    info = run("dpkg-deb", "-f", deb, "Package", "Depends").stdout
    assert "Package: qconv" in info
    depends = info.split("Depends:", 1)[1] if "Depends:" in info else ""
    if static_build():  # nothing loaded at run time, nothing to depend on
        assert depends.strip() == "", depends
    else:  # the libraries `ldd` shows the binary links, each by its Debian package
        linked = run("ldd", qconv_bin()).stdout
        for lib, package in (("libprotobuf", "libprotobuf"), ("libfmt.so", "libfmt"), ("libspdlog.so", "libspdlog"),
                             ("libstdc++.so", "libstdc++6")):
            if lib in linked:
                assert package in depends, (lib, depends)
    contents = run("dpkg-deb", "-c", deb).stdout
    for rel in ("./usr/bin/qconv", "./usr/share/man/man1/qconv.1", "./usr/share/bash-completion/completions/qconv"):
        assert rel in contents, rel
