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


def test_start_up_functions_are_side_by_side():
    # src/cli/startup-order.txt: with lld the functions a start runs come first in the text,
    # within a few hundred KiB instead of spread over all of it.
    comment = subprocess.run(["readelf", "-p", ".comment", str(CORRAL)], capture_output=True, text=True).stdout
    if "LLD" not in comment:
        pytest.skip("linked without lld: the functions are not ordered")
    listed = [line.strip() for line in (Path(__file__).resolve().parents[2] / "src/cli/startup-order.txt")
              .read_text().splitlines() if line.strip() and not line.startswith("#")]
    nm = subprocess.run(["nm", "-S", "--defined-only", str(CORRAL)], capture_output=True, text=True,
                        check=True).stdout
    funcs = {p[3]: (int(p[0], 16), int(p[1], 16)) for p in (line.split() for line in nm.splitlines())
             if len(p) == 4 and p[2] in "tTwW"}
    placed = sorted(funcs[name] for name in listed if name in funcs)
    assert len(placed) > len(listed) // 2, (len(placed), len(listed))
    # Side by side: they span little more than their own size (alignment between them),
    # where unordered they would span most of the 2.9 MB of code.
    span = placed[-1][0] + placed[-1][1] - placed[0][0]
    size = sum(s for _, s in placed)
    assert span < 2 * size, (hex(span), hex(size))
