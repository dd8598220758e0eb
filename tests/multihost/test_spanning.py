"""Jobs, steps and allocations from the login host span the compute hosts; an MPICH
program runs across hosts. Every request crosses the network with a MUNGE credential
from the sending host's own munged."""
import os
import subprocess

import pytest

from netcluster import SOURCE_DIR, binary, net_cluster, requires_hosts  # noqa: F401

pytestmark = requires_hosts
ALICE = 23411


def test_every_host_is_a_real_node_and_a_job_spans_them(net_cluster):
    c = net_cluster
    nodes = {n["name"]: n for n in c.nodes()}
    assert sorted(nodes) == ["c1", "c2", "c3", "c4"]
    assert all(n["cores"] == os.cpu_count() for n in nodes.values()), nodes  # hwloc's count
    out = c.corral("run", "-N4", "hostname").stdout.split()
    assert sorted(out) == ["c1", "c2", "c3", "c4"], out


def test_a_batch_job_runs_steps_across_hosts_as_its_user(net_cluster):
    c = net_cluster
    script = f"#!/bin/sh\nhostname\n{binary('corral')} run -N4 -n8 sh -c 'echo $(hostname):$(id -u)'\n"
    lines = c.batch_output(script, "-N4", "-n8", user=ALICE)
    assert lines[0] == "c1", lines
    steps = sorted(lines[1:])
    assert steps == sorted(f"c{h}:{ALICE}" for h in (1, 1, 2, 2, 3, 3, 4, 4)), lines


def test_an_allocation_from_the_login_host(net_cluster):
    c = net_cluster
    proc = c.corral("alloc", "-N3", "sh", "-c",
                    f"{binary('corral')} run -N3 hostname; echo shell on $(hostname) of $CORRAL_NODELIST",
                    user=ALICE)
    lines = proc.stdout.split("\n")
    hosts = sorted(lines[:3])
    assert len(set(hosts)) == 3 and all(h.startswith("c") for h in hosts), proc.stdout
    # The shell runs on the allocation's first node, as flux alloc's does.
    assert f"shell on {hosts[0]} of" in proc.stdout, proc.stdout


@pytest.fixture(scope="module")
def mpi_program(tmp_path_factory):
    out = tmp_path_factory.mktemp("mpi") / "pmi_ring"
    for d in (out.parent, out.parent.parent, out.parent.parent.parent):  # other users run it
        os.chmod(d, 0o755)
    subprocess.run(["mpicc.mpich", "-o", str(out), str(SOURCE_DIR / "tests" / "data" / "mpi" / "pmi_ring.c")],
                   check=True)
    return str(out)


def test_mpich_ring_and_allreduce_across_hosts(net_cluster, mpi_program):
    c = net_cluster
    proc = c.corral("run", "-N4", "-n8", mpi_program, timeout=180, user=ALICE)
    assert sorted(proc.stdout.splitlines()) == sorted(
        [f"rank {r} of 8" for r in range(8)] + ["ring and allreduce ok"]), proc.stdout + proc.stderr
