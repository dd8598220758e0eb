"""The namespace cluster with TLS on every TCP connection (a site CA, a certificate per
host): jobs, steps launched across agents and an MPICH program whose wire-up crosses the
agents all work, and a client that does not trust the CA reaches nothing."""
import os
import shutil
import subprocess

import pytest

from netcluster import SOURCE_DIR, NetCluster, binary, requires_hosts

pytestmark = [requires_hosts, pytest.mark.skipif(not shutil.which("openssl"), reason="needs openssl")]
ALICE = 23411


@pytest.fixture
def tls_cluster():
    c = NetCluster(tls=True)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_everything_across_hosts_over_tls(tls_cluster, tmp_path_factory):
    c = tls_cluster
    assert "(TCP, TLS, MUNGE credentials)" in c.log("corrald.log")
    assert sorted(c.corral("run", "-N4", "hostname").stdout.split()) == ["c1", "c2", "c3", "c4"]
    prog = os.path.join(c.shared_dir("mpi"), "pmi_ring")
    subprocess.run(["mpicc.mpich", "-o", prog, str(SOURCE_DIR / "tests" / "data" / "mpi" / "pmi_ring.c")], check=True)
    job = c.batch(f"#!/bin/sh\n{binary('corral')} run -N4 -n8 {prog}\n", "-N4", "-n8", "-o",
                  os.path.join(c.shared_dir(), "mpi.out"), user=ALICE)
    info = c.wait_job(job, timeout=120)
    out = open(os.path.join(c.shared_dir(), "mpi.out")).read()
    assert info["result"] == "COMPLETED", (info, out)
    assert "ring and allreduce ok" in out, out
    plain = c.corral("queue", check=False, env=c.client_env(CORRAL_TLS_CA=""))
    assert plain.returncode != 0
