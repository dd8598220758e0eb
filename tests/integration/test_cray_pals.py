"""--mpi=cray-pals, what Cray MPICH's PMI reads at start-up: the apinfo file (format 5) on
every node, PALS_* variables, PMI_CONTROL_PORT from the step's MPI ports and a secret,
read by a C program that declares the format's structures, as another user, as steps and
as a job's own tasks; the spool directories are the user's and go with the step; a step
on several nodes without MPI ports is refused with the reason. (Cray MPICH itself is not
available outside HPE's systems.)"""
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import SOURCE_DIR, wait_until

READER = SOURCE_DIR / "tests" / "data" / "mpi" / "pals_reader.c"
PORTS = ("steps.mpi-ports=12000-12099", "steps.mpi-ports-per-job=10", "steps.mpi-ports-per-step=3")
LINE = re.compile(r"rank (\d+) of (\d+) node (\d+)/(\d+) host (\S+) local (\d+) ppn (\d+) cpus (\d+) "
                  r"ports=(\S*) secret=(\w+) apid=(\S+)")


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    d = tmp_path_factory.mktemp("pals")
    out = d / "pals_reader"
    subprocess.run(["cc", "-o", str(out), str(READER)], check=True)
    p = out
    while str(p) != "/":  # uid 4242 runs it
        os.chmod(p, os.stat(p).st_mode | 0o005)
        p = p.parent
    return str(out)


def parse(stdout):
    return sorted((LINE.fullmatch(line).groups() for line in stdout.splitlines()), key=lambda g: int(g[0]))


def spool_dirs(cluster, agents):
    return [str(p) for i in range(agents) for p in (Path(cluster.dir) / f"agent-{i}" / "pals").glob("*")]


def test_cray_pals_step_on_two_nodes_as_another_user(make_cluster, reader):
    c = make_cluster(size=2, agents=2, cores=4, sets=PORTS)
    proc = c.corral("batch", "--parsable", "-N2", "-n4", "--mpi=cray-pals", "-", user=4242,
                    input="#!/bin/sh\nexec sleep 300\n")
    jobid = int(proc.stdout.strip())
    c.wait_job(jobid, "RUN")
    proc = c.corral("run", f"--jobid={jobid}", "-N2", "-n4", reader, check=False, timeout=60, user=4242)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = parse(proc.stdout)
    assert [(r[0], r[1], r[2], r[3], r[5], r[6]) for r in rows] == [
        ("0", "4", "0", "2", "0", "2"), ("1", "4", "0", "2", "1", "2"),
        ("2", "4", "1", "2", "0", "2"), ("3", "4", "1", "2", "1", "2")]
    assert {r[4] for r in rows[:2]} == {"node0"} and {r[4] for r in rows[2:]} == {"node1"}
    ports = {r[8] for r in rows}
    assert len(ports) == 1 and re.fullmatch(r"120\d\d,120\d\d", ports.pop())  # one step, two ports
    assert all(r[9] == "yes" and r[10] == f"{jobid}.0" for r in rows) and all(r[7] == "1" for r in rows)  # -c1
    # The spool directories went with the step.
    wait_until(lambda: spool_dirs(c, 2) == [], what="the spool directories to go")


@pytest.mark.cluster(size=2, agents=1, cores=4)
def test_cray_pals_on_several_nodes_needs_mpi_ports(cluster, reader):
    proc = cluster.corral("run", "--mpi=cray-pals", "-N2", "-n2", reader, check=False, timeout=60)
    assert proc.returncode != 0
    assert "--mpi=cray-pals on several nodes needs MPI ports" in proc.stdout + proc.stderr, proc.stderr
    # One node needs none.
    proc = cluster.corral("run", "--mpi=cray-pals", "-N1", "-n2", reader, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert [r[8] for r in parse(proc.stdout)] == ["", ""]


def test_cray_pals_job_tasks_use_the_first_block_of_the_share(make_cluster, reader):
    c = make_cluster(size=2, agents=2, cores=4, sets=PORTS)
    proc = c.corral("run", "--mpi=cray_shasta", "-N2", "-n4", reader, check=False, timeout=60, user=4242)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = parse(proc.stdout)
    assert [r[2] for r in rows] == ["0", "0", "1", "1"]
    first = int(rows[0][8].split(",")[0])
    assert rows[0][8] == f"{first},{first + 1}" and (first - 12000) % 10 == 0  # the share's first ports
    assert all(r[10] == rows[0][10] and "." not in r[10] for r in rows)  # PALS_APID: the job
    wait_until(lambda: spool_dirs(c, 2) == [], what="the spool directories to go")
