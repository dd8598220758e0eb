"""The Debian packages CPack makes from the build tree (docs/install.md): three of them,
each with its programs, systemd unit and docs, library dependencies worked out by
dpkg-shlibdeps, and programs that run from the unpacked files."""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

BUILD = Path(os.environ.get("CORRAL_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))


@pytest.fixture(scope="module")
def debs():
    if shutil.which("cpack") is None or shutil.which("dpkg-deb") is None:
        pytest.skip("needs cpack and dpkg-deb")
    out = Path(tempfile.mkdtemp(prefix="corral-debs-"))
    try:
        proc = subprocess.run(["cpack", "-G", "DEB", "-B", str(out)], cwd=BUILD, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        yield {p.name.split("_")[0]: p for p in out.glob("*.deb")}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def contents(deb):
    out = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].lstrip(".") for line in out.splitlines()}


def field(deb, name):
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_three_packages_with_their_files(debs):
    assert set(debs) == {"corral", "corrald", "corral-node"}, debs
    client = contents(debs["corral"])
    assert {"/usr/bin/corral", "/usr/libexec/corral/corral-grpc", "/usr/sbin/corral-authd",
            "/usr/lib/systemd/system/corral-authd.service"} <= client, client
    ctld = contents(debs["corrald"])
    assert {"/usr/sbin/corrald", "/usr/lib/systemd/system/corrald.service",
            "/usr/share/doc/corrald/install.md"} <= ctld, ctld
    node = contents(debs["corral-node"])
    assert {"/usr/sbin/corral-node", "/usr/sbin/corral-imp",
            "/usr/lib/systemd/system/corral-node.service"} <= node, node
    assert "libmunge2" in field(debs["corrald"], "Depends")
    assert "libgrpc++" in field(debs["corral-node"], "Depends")
    assert field(debs["corral-node"], "Recommends") == "munge"


def test_the_unpacked_programs_run(debs, tmp_path):
    for name in debs:
        subprocess.run(["dpkg-deb", "-x", str(debs[name]), str(tmp_path)], check=True)
    version = subprocess.run([str(tmp_path / "usr/bin/corral"), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and "corral" in version.stdout, version
    # A TCP controller: `corral` runs the installed corral-grpc, whose gRPC client gets as far
    # as the request's credential (no munged here) or the connection (nobody listens).
    queue = subprocess.run([str(tmp_path / "usr/bin/corral"), "--uri", "127.0.0.1:1", "queue"],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, CORRAL_MUNGE_SOCKET=str(tmp_path / "no-munged")))
    assert queue.returncode != 0 and "needs gRPC" not in queue.stderr, queue
    assert "MUNGE credential" in queue.stderr or "cannot reach the controller" in queue.stderr, queue
    agent = subprocess.run([str(tmp_path / "usr/sbin/corral-node"), "--help"], capture_output=True, text=True)
    assert agent.returncode == 0 and "--munge-socket" in agent.stdout and "--auth" in agent.stdout
    authd = subprocess.run([str(tmp_path / "usr/sbin/corral-authd"), "--help"], capture_output=True, text=True)
    assert authd.returncode == 0 and "--key-file" in authd.stdout, authd
    unit = (tmp_path / "usr/lib/systemd/system/corral-node.service").read_text()
    assert "Delegate=yes" in unit and "ExecStart=/usr/sbin/corral-node" in unit
