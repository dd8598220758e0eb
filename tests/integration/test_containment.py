"""Task containment: with cgroups, what a job's or a step's tasks leave running (a daemon
in a session of its own, out of every process group) is killed when that job or step
ends on the node; without them (--cgroups none) such a daemon outlives its job, which is
what the cgroups are for. Needs root and a cgroup v2 hierarchy (the cluster fixture makes
a parent cgroup per cluster)."""
import os
import signal
import subprocess
import time

import pytest

from conftest import binary, wait_until

# Prints the daemon's pid once it leads a session of its own (field 6 of its stat is the
# session id): from then on no process group of the task reaches it.
DAEMON = ("setsid sleep 300 </dev/null >/dev/null 2>&1 & pid=$!; "
          "while [ \"$(cut -d' ' -f6 /proc/$pid/stat)\" != $pid ]; do sleep 0.01; done; echo $pid")


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return ") Z" not in f.read()
    except OSError:
        return False


def cgroup_of(pid):
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    return ""


def needs_cgroups(cluster):
    if cluster.cgroup is None:
        pytest.skip("needs root and a writable cgroup v2 hierarchy")


@pytest.mark.cluster(size=2, agents=2, cores=2)
def test_a_jobs_daemon_dies_with_the_job(cluster):
    needs_cgroups(cluster)
    proc = cluster.corral("run", "-N1", "sh", "-c", DAEMON)
    daemon = int(proc.stdout.strip())
    wait_until(lambda: not alive(daemon), timeout=10,
               what=f"the job's daemon {daemon} to be killed", cluster=cluster)
    log = open(os.path.join(cluster.dir, "agent-0.log")).read()
    assert "task containment: cgroups under " + cluster.cgroup in log, log[-2000:]
    wait_until(lambda: not any(d.startswith("job_") for _, dirs, _ in os.walk(cluster.cgroup)
                               for d in dirs),
               timeout=10, what="the job's cgroups to be removed", cluster=cluster)


@pytest.mark.cluster(size=2, agents=2, cores=2)
def test_a_steps_daemon_dies_with_the_step_while_the_job_runs(cluster):
    needs_cgroups(cluster)
    proc = cluster.corral("batch", "--parsable", "-N2", "-", input="#!/bin/sh\nexec sleep 300\n")
    jobid = int(proc.stdout.strip())
    cluster.wait_job(jobid, "RUN")
    # A step on both nodes (two agents) that waits for a file, so its daemons can be seen
    # inside the step's cgroups while it runs.
    go = os.path.join(cluster.dir, "go")
    script = DAEMON + f"; while [ ! -e {go} ]; do sleep 0.05; done"
    step = subprocess.Popen([binary("corral"), "run", f"--jobid={jobid}", "-N2", "-n2",
                             "sh", "-c", script], env=cluster.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, text=True)
    daemons = [int(step.stdout.readline()) for _ in range(2)]
    for pid in daemons:
        assert alive(pid)
        assert f"/job_{jobid}/step_0-" in cgroup_of(pid), cgroup_of(pid)
    open(go, "w").close()
    step.communicate(timeout=30)
    assert step.returncode == 0
    for pid in daemons:
        wait_until(lambda: not alive(pid), timeout=10,
                   what=f"the step's daemon {pid} to be killed", cluster=cluster)
    assert cluster.job(jobid)["state"] == "RUN"  # the job itself goes on
    cluster.corral("cancel", jobid)
    cluster.wait_job(jobid)


@pytest.mark.cluster(size=1, agents=1, cores=2, agent_args=["--cgroups", "none"])
def test_without_cgroups_a_daemon_outlives_its_job(cluster):
    proc = cluster.corral("run", "sh", "-c", DAEMON)
    daemon = int(proc.stdout.strip())
    try:
        time.sleep(0.5)
        assert alive(daemon), open(os.path.join(cluster.dir, "agent-0.log")).read()
        log = open(os.path.join(cluster.dir, "agent-0.log")).read()
        assert "task containment: process groups only (turned off (--cgroups none))" in log
    finally:
        if alive(daemon):
            os.kill(daemon, signal.SIGKILL)


def test_a_bad_cgroups_directory_stops_the_agent_with_a_message(tmp_path):
    proc = subprocess.run([binary("corral-node"), "--controller", "unix:" + str(tmp_path / "none.sock"),
                           "--nodes", "n1", "--state-dir", str(tmp_path / "agent"),
                           "--cgroups", str(tmp_path)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert f"--cgroups: {tmp_path} is not in a cgroup v2 hierarchy" in proc.stderr, proc.stderr
