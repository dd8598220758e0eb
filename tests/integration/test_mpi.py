"""MPI under `corral run` without mpirun, with programs built by the MPIs' own compiler
wrappers: Debian's Open MPI through the agents' PMIx servers (--mpi=pmix), as a step and
as a job, on 4 virtual nodes each served by its own agent; Debian's HPC Challenge suite
(hpcc); MPI_Abort; a rank that dies without finalizing; what an Open MPI program does
without PMIx; the --mpi values refused at every door."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import SOURCE_DIR
from frame_client import FRAME_HELPERS

RING = SOURCE_DIR / "tests" / "data" / "mpi" / "pmi_ring.c"
FENCE = SOURCE_DIR / "tests" / "data" / "mpi" / "pmix_fence.c"


# Open MPI ranks spin while they wait for a message: sixteen of them on this machine's two
# CPUs leave the daemons seconds behind at times, which the fixture's 3 s node-timeout
# (made for the failure-detection tests) would take for failed nodes. These tests are
# about MPI: the production default.
SPINNING = ("controller.node-timeout=30s",)


def readable_by_all(path):
    while str(path) != "/":
        os.chmod(path, os.stat(path).st_mode | 0o005)
        path = path.parent


@pytest.fixture(scope="module")
def ompi_ring(tmp_path_factory):
    out = tmp_path_factory.mktemp("ompi") / "ompi_ring"
    subprocess.run(["mpicc.openmpi", "-o", str(out), str(RING)], check=True)
    readable_by_all(out)  # other users run it too
    return str(out)


@pytest.fixture(scope="module")
def pmix_fence(tmp_path_factory):
    out = tmp_path_factory.mktemp("pmix") / "pmix_fence"
    subprocess.run(f"cc -o '{out}' '{FENCE}' $(pkg-config --cflags --libs pmix)", shell=True, check=True)
    readable_by_all(out)
    return str(out)


def hold(cluster, *args, user=None):
    proc = cluster.corral("batch", "--parsable", *args, "-", input="#!/bin/sh\nexec sleep 300\n", user=user)
    jobid = int(proc.stdout.strip())
    cluster.wait_job(jobid, "RUN")
    return jobid


def ring_ok(proc, ranks):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(proc.stdout.splitlines()) == sorted(
        [f"rank {r} of {ranks}" for r in range(ranks)] + ["ring and allreduce ok"]), proc.stdout + proc.stderr


@pytest.mark.cluster(size=4, agents=4, cores=4, sets=SPINNING)
def test_open_mpi_step_of_16_ranks_on_4_nodes(cluster, ompi_ring):
    jobid = hold(cluster, "-N4", "-n16")
    proc = cluster.corral("run", f"--jobid={jobid}", "--mpi=pmix", "-N4", "-n16", ompi_ring,
                          check=False, timeout=180)
    ring_ok(proc, 16)
    # The same allocation, a second step: each step is a namespace of its own.
    proc = cluster.corral("run", f"--jobid={jobid}", "--mpi=pmix", "-N2", "-n4", ompi_ring,
                          check=False, timeout=180)
    ring_ok(proc, 4)


@pytest.mark.cluster(size=4, agents=2, cores=4, sets=SPINNING)
def test_open_mpi_job_of_16_ranks_as_another_user(cluster, ompi_ring):
    # Outside an allocation `corral run` submits a job whose own tasks are the ranks; two
    # agents host two nodes each, so each agent's namespace serves two nodes' ranks.
    proc = cluster.corral("run", "--mpi=pmix", "-N4", "-n16", ompi_ring, check=False, timeout=180, user=4242)
    ring_ok(proc, 16)


@pytest.mark.cluster(size=2, agents=2, cores=2, sets=SPINNING)
def test_hpc_challenge_runs_as_a_pmix_step(cluster, tmp_path):
    # Debian's hpcc (HPC Challenge, built against its Open MPI): HPL, DGEMM, STREAM,
    # PTRANS, RandomAccess, FFT and the b_eff latency/bandwidth tests on 2x2 ranks, with
    # the package's own example input made small (N=200).
    example = Path("/usr/share/doc/hpcc/examples/_hpccinf.txt").read_text()
    lines = example.splitlines()
    lines[5] = "200          Ns"
    lines[7] = "40           NBs"
    (tmp_path / "hpccinf.txt").write_text("\n".join(lines) + "\n")
    jobid = hold(cluster, "-N2", "-n4")
    proc = cluster.corral("run", f"--jobid={jobid}", "--mpi=pmix", "-N2", "-n4", "-D", str(tmp_path), "hpcc",
                          check=False, timeout=400)
    out = (tmp_path / "hpccoutf.txt").read_text()
    assert proc.returncode == 0, proc.stderr + out[-2000:]
    assert "CommWorldProcs=4" in out and "End of HPC Challenge tests." in out, out[-2000:]
    assert "tests completed and passed residual checks" in out, out
    failed = re.findall(r"(\d+) tests completed and failed residual checks", out)
    assert failed and all(n == "0" for n in failed) and "FAILED" not in out, out


@pytest.mark.cluster(size=2, agents=2, cores=2)
def test_open_mpi_abort_ends_the_step(cluster, ompi_ring):
    jobid = hold(cluster, "-N2", "-n4")
    proc = cluster.corral("run", f"--jobid={jobid}", "--mpi=pmix", "-N2", "-n4", ompi_ring, "abort",
                          check=False, timeout=120)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "rank 3" in proc.stderr and "exit code 42" in proc.stderr, proc.stderr
    assert cluster.job(jobid)["state"] == "RUN"  # the job goes on


@pytest.mark.cluster(size=2, agents=2, cores=2)
def test_a_rank_that_exits_without_finalize_ends_the_step(cluster, pmix_fence):
    jobid = hold(cluster, "-N2", "-n2")
    proc = cluster.corral("run", f"--jobid={jobid}", "--mpi=pmix", "-N2", "-n2", pmix_fence, "die",
                          check=False, timeout=60)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "rank 1: exited without PMIx_Finalize (exit code 5)" in proc.stderr, proc.stderr
    # The PMIx layout rank 1 saw before it died: its own node's rank as local peer, the
    # job size (rank 0 may be killed before it prints).
    assert "rank 1 of 2 in corral." in proc.stdout and "local peers 1\n" in proc.stdout, proc.stdout


@pytest.mark.cluster(size=2, agents=1, cores=2)
def test_open_mpi_is_found_out_without_mpi_and_pmi1_gives_singletons(cluster, ompi_ring):
    jobid = hold(cluster, "-N2", "-n2")
    # --mpi=auto (the default): the command sees that the program needs Open MPI's libmpi.
    proc = cluster.corral("run", f"--jobid={jobid}", "-N2", "-n2", ompi_ring, check=False, timeout=120)
    ring_ok(proc, 2)
    # What the user guide tells users to look for when the PMI is wrong: "rank 0 of 1".
    proc = cluster.corral("run", f"--jobid={jobid}", "--mpi=pmi1", "-N2", "-n2", ompi_ring, check=False, timeout=120)
    assert proc.stdout.splitlines().count("rank 0 of 1") == 2, proc.stdout + proc.stderr


@pytest.mark.cluster(size=2, agents=2, cores=2)
def test_pmix_tasks_hold_no_agent_descriptor(cluster):
    jobid = hold(cluster, "-N2", "-n2")
    # ls lists its own descriptors: stdio and the directory it reads (3), nothing of the agent's.
    proc = cluster.corral("run", f"--jobid={jobid}", "--mpi=pmix", "-N2", "-n2", "-l", "sh", "-c",
                          "exec ls /proc/self/fd", check=True, timeout=60)
    fds = {}
    for line in proc.stdout.splitlines():
        rank, fd = line.split(":", 1)
        fds.setdefault(rank, []).append(fd.strip())
    assert {r: sorted(v) for r, v in fds.items()} == {"0": ["0", "1", "2", "3"], "1": ["0", "1", "2", "3"]}, proc.stdout
    env = cluster.corral("run", f"--jobid={jobid}", "--mpi=pmix", "-N2", "-n2", "sh", "-c",
                         "echo $PMIX_NAMESPACE $PMIX_RANK ${PMI_FD:-no-pmi-fd}", check=True, timeout=60)
    lines = sorted(env.stdout.splitlines())
    assert len(lines) == 2 and lines[0].endswith(" 0 no-pmi-fd") and lines[1].endswith(" 1 no-pmi-fd"), lines
    nspace = lines[0].split()[0]
    assert nspace.startswith(f"corral.{jobid}.") and len(nspace.split(".")[-1]) == 16, nspace  # not guessable
    assert lines[1].split()[0] == nspace


@pytest.mark.cluster(size=1, agents=1, cores=2)
def test_mpi_values_are_checked_at_every_door(cluster, tmp_path):
    bad = cluster.corral("run", "--mpi=openmpi", "true", check=False, user=4242)
    assert bad.returncode != 0 and "'openmpi' is not an MPI type" in bad.stderr, bad.stderr
    # A jobspec written by hand, with a value the command line would have refused.
    spec = {"version": 1,
            "resources": [{"type": "slot", "count": 1, "label": "task",
                           "with": [{"type": "core", "count": 1}]}],
            "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": 0, "shell": {"options": {"mpi": ["pmix"]}}}}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    readable_by_all(path)
    refused = cluster.corral("submit", "--jobspec", str(path), check=False, user=4242)
    assert refused.returncode != 0 and "options.mpi: must be a string" in refused.stderr, refused.stderr
    spec["attributes"]["system"]["shell"]["options"]["mpi"] = "pmi9"
    path.write_text(json.dumps(spec))
    refused = cluster.corral("submit", "--jobspec", str(path), check=False, user=4242)
    assert refused.returncode != 0 and "'pmi9' is not an MPI type" in refused.stderr, refused.stderr
    # A step asked for by hand (no client check) by its owner: the step manager refuses it.
    jobid = hold(cluster, "-n1", user=4242)
    stepmgr = cluster.job(jobid)["stepmgr"]
    assert stepmgr.startswith("unix:"), stepmgr
    script = FRAME_HELPERS + r'''
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
spec = varint(1 << 3) + varint(int(sys.argv[2])) + field(2, b"/bin/true") + field(21, b"pmi9")
s.send(b"CORRAL-STEP/1\n" + frame(1, field(1, spec)))
status, body = read_answer(s)
print(status, body.decode(errors="replace"))
'''
    raw = subprocess.run(["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups",
                          "/usr/bin/python3", "-c", script, stepmgr[len("unix:"):], str(jobid)],
                         capture_output=True, text=True, timeout=60)
    # Refused as the step's failure (state FAILED and why), before anything runs.
    assert "FAILED" in raw.stdout and "'pmi9' is not an MPI type" in raw.stdout, raw.stdout + raw.stderr
