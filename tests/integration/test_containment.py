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
        assert f"/job_{jobid}/step_slot_" in cgroup_of(pid), cgroup_of(pid)
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


def allowed_cpus(text):
    """The CPUs a `Cpus_allowed_list` value ("0-2,5") names."""
    out = set()
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


@pytest.mark.cluster(size=1, agents=1, cores=2)
def test_tasks_on_a_real_node_run_only_on_their_cores(cluster):
    """An agent without --nodes is this machine, with hwloc's core -> CPU map: a job's and
    a step's tasks are bound to the CPUs of the cores they hold (virtual nodes never are)."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two CPUs to tell bound from unbound")
    real = subprocess.Popen([binary("corral-node"), "--controller", cluster.uri,
                             "--state-dir", os.path.join(cluster.dir, "real-agent"),
                             "--log-file", os.path.join(cluster.dir, "real-agent.log"),
                             "--key-file", cluster.key_file, "--cgroups", "none"],
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        cluster.wait_nodes_up(2)
        host = next(n["name"] for n in cluster.nodes() if n["name"] != "node0")
        show = "grep Cpus_allowed_list /proc/self/status | cut -f2"
        one = cluster.corral("run", "-w", host, "-n1", "-c1", "sh", "-c", show).stdout
        everything = allowed_cpus(f"0-{os.cpu_count() - 1}")
        assert 0 < len(allowed_cpus(one)) < len(everything), one
        whole = cluster.corral("run", "-w", host, "-n1", "-c", str(len(everything)),
                               "sh", "-c", show, check=False)
        if whole.returncode == 0:  # as many cores as CPUs (no SMT): all of them
            assert allowed_cpus(whole.stdout) == everything, whole.stdout
        # Two tasks on two cores: each on a core of its own.
        two = cluster.corral("run", "-w", host, "-n2", "-c1", "-l", "sh", "-c", show, check=False)
        if two.returncode == 0:
            sets = [allowed_cpus(line.split(":", 1)[1]) for line in two.stdout.splitlines()]
            assert len(sets) == 2 and not sets[0] & sets[1], two.stdout
        # A step holding one of the job's two cores gets that core's CPUs only.
        job = int(cluster.corral("batch", "--parsable", "-w", host, "-n1", "-c2", "-",
                                 input="#!/bin/sh\nexec sleep 300\n").stdout.strip())
        cluster.wait_job(job, "RUN")
        step = cluster.corral("run", f"--jobid={job}", "-n1", "-c1", "sh", "-c", show).stdout
        assert 0 < len(allowed_cpus(step)) < len(everything), step
        cluster.corral("cancel", job)
        # The virtual node's tasks are not bound.
        virt = cluster.corral("run", "-w", "node0", "-n1", "sh", "-c", show).stdout
        assert allowed_cpus(virt) == everything, virt
    finally:
        real.terminate()
        real.wait(timeout=30)


# Holds ever more memory: tail keeps an unfinished line, and /dev/zero has no newline.
MEMORY_HOG = "head -c 400000000 /dev/zero | tail -n 1 >/dev/null; echo hog $?"


def needs_limit(cluster, controller):
    needs_cgroups(cluster)
    log = open(os.path.join(cluster.dir, "agent-0.log")).read()
    missing = [l for l in log.splitlines() if "task containment: no " in l]
    if missing and controller in missing[0]:
        pytest.skip(missing[0])


@pytest.mark.cluster(size=1, agents=1, cores=2)
def test_a_job_over_its_memory_is_killed_and_ends_out_of_memory(cluster):
    needs_limit(cluster, "memory")
    out = os.path.join(cluster.dir, "oom.out")
    proc = cluster.corral("batch", "--parsable", "--mem", "64M", "-o", out, "-",
                          input=f"#!/bin/sh\n{MEMORY_HOG}\n")
    jobid = int(proc.stdout.strip())
    job = cluster.wait_job(jobid)
    assert job["result"] == "OUT_OF_MEMORY", job
    excs = [e["context"] for e in cluster.eventlog(jobid) if e["name"] == "exception"]
    assert len(excs) == 1 and excs[0]["type"] == "oom" and excs[0]["severity"] == 1, excs
    assert "node0" in excs[0]["note"] and "64 MiB" in excs[0]["note"], excs
    assert open(out).read().splitlines()[-1] == "hog 137"  # the script went on; tail was killed
    listed = cluster.corral("history", "--state", "out_of_memory", "--json").stdout
    assert str(jobid) in listed
    # The same work within its memory completes, and a job without --mem has no limit.
    ok = cluster.corral("run", "--mem", "64M", "sh", "-c",
                        "head -c 1000000 /dev/zero | tail -n 1 >/dev/null; echo ok")
    assert ok.stdout.strip() == "ok"
    free = cluster.corral("run", "sh", "-c", MEMORY_HOG)
    assert free.stdout.strip() == "hog 0"


# The limit from the agent's command line, or from corrald's [node] section (configless),
# where the command line wins.
@pytest.mark.parametrize("cluster", [
    {"size": 1, "agents": 1, "cores": 2, "agent_args": ["--job-pids-max", "16"]},
    {"size": 1, "agents": 1, "cores": 2, "sets": ("node.job-pids-max=16",)},
    {"size": 1, "agents": 1, "cores": 2, "agent_args": ["--job-pids-max", "16"], "sets": ("node.job-pids-max=4000",)},
], indirect=True, ids=["agent", "controller", "agent-wins"])
def test_a_jobs_processes_are_limited(cluster):
    needs_limit(cluster, "pids")
    log = open(os.path.join(cluster.dir, "agent-0.log")).read()
    if "--job-pids-max" in cluster.agent_args:
        assert "settings from the controller" not in log, log
    else:
        assert "settings from the controller: job-pids-max=16" in log, log
    # One line per process the kernel let the job start; the shell gives up at the limit.
    proc = cluster.corral("run", "sh", "-c",
                          "for i in $(seq 40); do sleep 30 >/dev/null 2>&1 & echo $i; done",
                          check=False)
    started = proc.stdout.split()
    assert 1 <= len(started) < 16, proc.stdout
    assert proc.returncode != 0
