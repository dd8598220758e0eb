"""corral's PMI client libraries (libpmi.so, libpmi2.so) under real steps: programs built
against their headers exchange keys across nodes; Debian's own PMI-1 example client
(libpmix-dev's pmi1client.c) runs on them unchanged; Debian's Open MPI bootstraps through
libpmi.so with the component it loads a PMI library with; PMI2_Abort ends the step."""
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD_DIR, SOURCE_DIR

DATA = SOURCE_DIR / "tests" / "data" / "mpi"
INCLUDE = SOURCE_DIR / "src" / "node" / "pmi_client" / "include"
LIB_DIR = BUILD_DIR / "lib"
PMIX_EXAMPLE = Path("/usr/share/doc/libpmix-dev/examples/pmi1client.c")
SLURM_PMI2 = Path("/usr/lib/x86_64-linux-gnu/libpmi2.so.0")  # Debian's libpmi2-0 (Slurm's)


def build(out_dir, source, lib, compiler="cc", name=None):
    out = out_dir / (name or Path(source).stem)
    # A path: another implementation's library, built against corral's header (the same API).
    link = [lib, "-DOTHER_PMI2_LIBRARY"] if "/" in lib else [f"-L{LIB_DIR}", f"-l{lib}", f"-Wl,-rpath,{LIB_DIR}"]
    subprocess.run([compiler, "-o", str(out), str(source), f"-I{INCLUDE}", *link], check=True)
    return str(out)


def hold(cluster, *args):
    proc = cluster.corral("batch", "--parsable", *args, "-", input="#!/bin/sh\nexec sleep 300\n")
    jobid = int(proc.stdout.strip())
    cluster.wait_job(jobid, "RUN")
    return jobid


def run_4_ranks(cluster, jobid, mpi, prog, *args):
    """`prog` as a step of 4 ranks on 2 nodes; it must succeed."""
    proc = cluster.corral("run", f"--jobid={jobid}", f"--mpi={mpi}", "-N2", "-n4", prog, *args, check=False,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.mark.cluster(size=2, agents=2, cores=4)
def test_pmi1_library_exchanges_keys_across_nodes(cluster, tmp_path):
    prog = build(tmp_path, DATA / "pmi1_kvs.c", "pmi")
    proc = run_4_ranks(cluster, hold(cluster, "-N2", "-n4"), "pmi1", prog)
    # Two ranks a node: each node's clique is its own two ranks.
    assert sorted(proc.stdout.splitlines()) == [
        "rank 0 of 4 clique 2: 0,1 got value-1", "rank 1 of 4 clique 2: 0,1 got value-2",
        "rank 2 of 4 clique 2: 2,3 got value-3", "rank 3 of 4 clique 2: 2,3 got value-0"], proc.stdout + proc.stderr
    # The key nobody put is an error the library explains.
    assert "no key 'nobody-put-this'" in proc.stderr


def test_pmi1_library_outside_corral_is_a_singleton(tmp_path):
    prog = build(tmp_path, DATA / "pmi1_kvs.c", "pmi")
    proc = subprocess.run([prog], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "rank 0 of 1 clique 1: 0 got value-0\n"


@pytest.mark.cluster(size=2, agents=1, cores=4)
def test_debian_pmi1_example_client_runs_on_libpmi(cluster, tmp_path):
    if not PMIX_EXAMPLE.exists():
        pytest.fail(f"{PMIX_EXAMPLE} is missing: install libpmix-dev (scripts/install-deps.sh)", pytrace=False)
    source = tmp_path / "pmi1client.c"
    source.write_bytes(PMIX_EXAMPLE.read_bytes())
    prog = build(tmp_path, source, "pmi")
    proc = run_4_ranks(cluster, hold(cluster, "-N2", "-n4"), "pmi1", prog)
    for rank in range(4):
        assert f"Client {rank}: Finalizing" in proc.stderr, proc.stderr


@pytest.mark.cluster(size=2, agents=2, cores=4)
def test_open_mpi_bootstraps_through_libpmi(cluster, tmp_path):
    # Open MPI 4 loads a PMI-1 library (the one FLUX_PMI_LIBRARY_PATH names) in its
    # component for launchers that offer one; FLUX_JOB_ID is what selects that component.
    prog = build(tmp_path, DATA / "pmi_ring.c", "pmi", compiler="mpicc.openmpi")
    env = ["env", "FLUX_JOB_ID=1", f"FLUX_PMI_LIBRARY_PATH={LIB_DIR / 'libpmi.so'}", "OMPI_MCA_pmix=flux",
           "OMPI_MCA_btl=self,tcp"]
    proc = run_4_ranks(cluster, hold(cluster, "-N2", "-n4"), "pmi1", *env, prog)
    assert sorted(proc.stdout.splitlines()) == sorted(
        [f"rank {r} of 4" for r in range(4)] + ["ring and allreduce ok"]), proc.stdout + proc.stderr


@pytest.mark.cluster(size=2, agents=2, cores=4)
def test_pmi2_library_exchanges_keys_and_node_attributes(cluster, tmp_path):
    prog = build(tmp_path, DATA / "pmi2_kvs.c", "pmi2")
    jobid = hold(cluster, "-N2", "-n4")
    proc = run_4_ranks(cluster, jobid, "pmi2", prog)
    mapping = "(vector,(0,2,2))"
    assert sorted(proc.stdout.splitlines()) == [
        f"rank 0 of 4 job set got value-1 node from-0 mapping {mapping}",
        f"rank 1 of 4 job set got value-2 node from-0 mapping {mapping}",
        f"rank 2 of 4 job set got value-3 node from-2 mapping {mapping}",
        f"rank 3 of 4 job set got value-0 node from-2 mapping {mapping}"], proc.stdout + proc.stderr
    # Slurm's own PMI-2 client library (Debian's libpmi2-0), a client nobody here wrote,
    # with the same program: the agent's PMI-2 server is what it talks to.
    if not SLURM_PMI2.exists():
        pytest.fail(f"{SLURM_PMI2} is missing: install libpmi2-0 (scripts/install-deps.sh)", pytrace=False)
    slurm = build(tmp_path, DATA / "pmi2_kvs.c", str(SLURM_PMI2), name="pmi2_kvs_slurm")
    proc = run_4_ranks(cluster, jobid, "pmi2", slurm)
    assert len(proc.stdout.splitlines()) == 4 and all(
        f"got value-{(r + 1) % 4} node from-{r - r % 2} mapping" in proc.stdout for r in range(4)), proc.stdout
    # PMI2_Abort ends the step, with the rank and its message (';' cannot cross the wire).
    proc = cluster.corral("run", f"--jobid={jobid}", "--mpi=pmi2", "-N2", "-n4", prog, "abort", check=False,
                          timeout=60)
    assert proc.returncode != 0
    assert "rank 3: rank gives up  on purpose (exit code 1)" in proc.stderr, proc.stderr
