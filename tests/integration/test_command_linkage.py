"""What the `corral` command loads when it starts (docs/performance.md, issue 17): libc and the
dynamic loader only. Every other shared library is one more file to map and relocate at
each of a user's commands; gRPC lives in corral-grpc (docs/architecture.md)."""
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

BUILD = Path(os.environ.get("CORRAL_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
CORRAL = BUILD / "bin" / "corral"


def needed(path):
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    return {line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line}


def test_corral_loads_only_libc():
    libs = needed(CORRAL)
    if any(lib.startswith("libgrpc") or lib.startswith("libprotobuf") for lib in libs):
        pytest.skip("built without the static gRPC archives (cmake/StaticRpc.cmake)")
    assert libs <= {"libc.so.6", "ld-linux-x86-64.so.2"}, libs


def test_floating_point_options_without_libm():
    # fegetround/fesetround come from libm.a (src/cli/CMakeLists.txt) and rounding from
    # util/rounding.h: a fractional time limit, memory size and begin time still parse.
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, CORRAL_URI=f"unix:{d}/nobody.sock")
        out = subprocess.run([str(CORRAL), "submit", "--dry-run", "-t", "1.5", "--mem", "1.5G",
                              "-o", "/dev/null", "true"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert '"duration": 1.5' in out.stdout, out.stdout
    assert '"memory-per-node": 1536' in out.stdout, out.stdout  # MiB
