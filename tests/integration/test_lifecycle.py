"""A job's life on a real local cluster: what its tasks see (environment, cwd, output
files), how `corral run` and `corral wait` report its end, cancellation and time limits
(the whole process tree dies), the RFC 21 eventlog, scheduling (core sharing, --exclusive,
-w/-x, pending reasons, holds) and the listings (`queue`, `show job`)."""
import json
import os
import select
import signal
import subprocess
import time

import pytest

from conftest import Cluster, binary, event_names, job_until, read_env, submit_job, wait_until

EVENT_SEQUENCE = ["submit", "validate", "depend", "priority", "alloc", "start", "finish",
                  "release", "free", "clean"]


def process_alive(pid):
    """Whether pid names a live process (a zombie counts as dead)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def wait_file(path, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    pytest.fail(f"{path} did not appear within {timeout}s", pytrace=False)


def event_times(cluster, jobid):
    out = {}
    for line in cluster.corral("eventlog", jobid).stdout.splitlines():
        ev = json.loads(line)
        out.setdefault(ev["name"], ev)
    return out


# ------------------------------------------------------------------ what tasks see


@pytest.mark.cluster(size=2, cores=4)
def test_multinode_tasks_see_their_environment(cluster, tmp_path):
    env = dict(cluster.env, CORRAL_TEST_SUBMIT_VAR="from submit")
    jobid = submit_job(cluster, "-N2", "-n4", "-J", "envjob", "-o", tmp_path / "env-%t.out",
                           "-e", tmp_path / "err-%n-%t.out", "sh", "-c",
                           "env; echo problem-$CORRAL_TASK_RANK >&2", env=env)
    job = cluster.wait_job(jobid)
    assert job["result"] == "COMPLETED" and job["waitstatus"] == 0, job
    assert job["nodelist"] == "node[0-1]"
    for rank in range(4):
        task = read_env(tmp_path / f"env-{rank}.out")
        node = rank // 2
        assert task["CORRAL_JOBID"] == str(jobid)
        assert task["CORRAL_JOB_NAME"] == "envjob"
        assert task["CORRAL_NODENAME"] == f"node{node}"
        assert task["CORRAL_NODELIST"] == "node[0-1]"
        assert task["CORRAL_NNODES"] == "2"
        assert task["CORRAL_NTASKS"] == "4"
        assert task["CORRAL_TASK_RANK"] == str(rank)
        assert task["CORRAL_LOCAL_RANK"] == str(rank % 2)
        assert task["CORRAL_CPUS_ON_NODE"] == "2"  # two 1-core tasks per node
        assert task["CORRAL_TEST_SUBMIT_VAR"] == "from submit"
        # -e with %n (node index) and %t (rank) gets each task's stderr alone.
        err = (tmp_path / f"err-{node}-{rank}.out").read_text()
        assert err == f"problem-{rank}\n"
        assert "problem" not in (tmp_path / f"env-{rank}.out").read_text()
    # Cores per task count in CORRAL_CPUS_ON_NODE.
    proc = cluster.corral("run", "-N1", "-n2", "-c2", "sh", "-c",
                          "echo $CORRAL_CPUS_ON_NODE $CORRAL_LOCAL_RANK")
    assert sorted(proc.stdout.splitlines()) == ["4 0", "4 1"]


@pytest.mark.cluster(size=2, cores=2)
def test_export_controls_the_environment(cluster, tmp_path):
    env = dict(cluster.env, CORRAL_T_A="a-value", CORRAL_T_B="b-value")

    def task_env(*export):
        out = tmp_path / f"export-{len(list(tmp_path.iterdir()))}.out"
        jobid = submit_job(cluster, *export, "-o", out, "env", env=env)
        assert cluster.wait_job(jobid)["result"] == "COMPLETED"
        return read_env(out)

    everything = task_env()
    assert everything["CORRAL_T_A"] == "a-value" and everything["CORRAL_T_B"] == "b-value"

    none = task_env("--export=NONE")
    assert "CORRAL_T_A" not in none and "CORRAL_T_B" not in none
    assert "CORRAL_BUILD_DIR" not in none  # nothing of the submitter's environment
    assert none["CORRAL_JOBID"] and none["CORRAL_TASK_RANK"] == "0"
    assert none["PATH"]  # a shell still finds commands

    listed = task_env("--export=CORRAL_T_A,CORRAL_T_C=set-here")
    assert listed["CORRAL_T_A"] == "a-value" and listed["CORRAL_T_C"] == "set-here"
    assert "CORRAL_T_B" not in listed and "CORRAL_BUILD_DIR" not in listed

    added = task_env("--export=ALL,CORRAL_T_C=set-here")
    assert added["CORRAL_T_B"] == "b-value" and added["CORRAL_T_C"] == "set-here"


@pytest.mark.cluster(size=1, cores=2)
def test_working_directory_and_default_output(cluster, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    submitdir = tmp_path / "submit"
    submitdir.mkdir()
    # -D: the task runs there and a relative -o lands there.
    jobid = submit_job(cluster, "-D", workdir, "-o", "out-%j.txt", "pwd", cwd=submitdir)
    assert cluster.wait_job(jobid)["result"] == "COMPLETED"
    assert (workdir / f"out-{jobid}.txt").read_text() == f"{workdir}\n"
    assert cluster.job(jobid)["cwd"] == str(workdir)

    # Without -D: the submit directory, and output in corral-<id>.out there.
    jobid = submit_job(cluster, "sh", "-c", "pwd; echo oops >&2", cwd=submitdir)
    assert cluster.wait_job(jobid)["result"] == "COMPLETED"
    assert (submitdir / f"corral-{jobid}.out").read_text() == f"{submitdir}\noops\n"

    # -i: stdin from a file (relative to the working directory).
    (workdir / "in.txt").write_text("input data\n")
    proc = cluster.corral("run", "-D", workdir, "-i", "in.txt", "cat")
    assert proc.stdout == "input data\n"

    # A directory that doesn't exist fails the job, it doesn't run it elsewhere.
    jobid = submit_job(cluster, "-D", tmp_path / "missing", "-o", tmp_path / "m.out", "true")
    job = cluster.wait_job(jobid)
    assert job["result"] == "FAILED" and job["exit_code"] == 126, job


# ------------------------------------------------------------------ corral run / wait


@pytest.mark.cluster(size=2, cores=2)
def test_run_streams_output_and_exits_with_the_job_status(cluster):
    proc = cluster.corral("run", "-N2", "-n2", "-l", "sh", "-c",
                          "echo out-$CORRAL_TASK_RANK; echo err-$CORRAL_NODENAME >&2; "
                          "exit $((CORRAL_TASK_RANK + 3))", check=False)
    assert proc.returncode == 4, (proc.stdout, proc.stderr)  # the largest exit code wins
    assert sorted(proc.stdout.splitlines()) == ["0: out-0", "1: out-1"]
    err = proc.stderr.splitlines()
    assert "0: err-node0" in err and "1: err-node1" in err, proc.stderr

    # Short jobs often end before `corral run` attaches: their output must still come.
    for i in range(5):
        proc = cluster.corral("run", "-N2", "-n2", "sh", "-c", f"printf 'no newline {i}'",
                              check=False)
        assert proc.returncode == 0 and proc.stdout == f"no newline {i}" * 2, (i, proc)

    for sig in (signal.SIGUSR1, signal.SIGKILL):
        proc = cluster.corral("run", "sh", "-c", f"kill -{int(sig)} $$", check=False)
        assert proc.returncode == 128 + sig, (sig, proc.returncode, proc.stderr)

    proc = cluster.corral("run", "/no/such/program", check=False)
    assert proc.returncode == 127, proc.stderr
    assert "/no/such/program" in proc.stderr

    # Attached while the job waits for resources: the output arrives once it runs.
    blocker = submit_job(cluster, "-N2", "-n4", "-o", "/dev/null", "sleep", "30")
    cluster.wait_job(blocker, "RUN")
    runner = subprocess.Popen([binary("corral"), "run", "-N2", "sh", "-c",
                               "echo late-$CORRAL_TASK_RANK; exit 2"],
                              env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        def pending():
            proc = cluster.corral("show", "job", "--json", blocker + 1, check=False)
            return proc.returncode == 0 and json.loads(proc.stdout)["reason"] == "Resources"
        wait_until(pending, timeout=10, interval=0.05, what="corral run's job to pend",
                   cluster=cluster)
        assert runner.poll() is None
        cluster.corral("cancel", blocker)
        out, err = runner.communicate(timeout=20)
    finally:
        runner.kill()
        runner.wait()
    assert runner.returncode == 2, err
    assert sorted(out.splitlines()) == ["late-0", "late-1"]


@pytest.mark.cluster(size=1, cores=2)
def test_run_forwards_interrupts(cluster, tmp_path):
    def attached(*command):
        return subprocess.Popen([binary("corral"), "run", *command], env=cluster.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish(proc):
        try:
            return proc.communicate(timeout=15)
        finally:
            proc.kill()
            proc.wait()

    # Ctrl-C goes to the tasks as SIGINT; the job ends as they decide.
    ready = tmp_path / "ready"
    proc = attached("sh", "-c", f"trap 'echo got-int; exit 5' INT; touch {ready}; "
                    "while true; do sleep 0.05; done")
    wait_until(ready.exists, timeout=10, interval=0.05, what="the task to start",
               cluster=cluster)
    proc.send_signal(signal.SIGINT)
    out, err = finish(proc)
    assert proc.returncode == 5 and out == "got-int\n", (out, err)
    # SIGTERM to corral run cancels the job.
    proc = attached("sleep", "30")
    wait_until(lambda: cluster.jobs() and cluster.jobs()[-1]["state"] == "RUN", timeout=10,
               interval=0.05, what="the second job to run", cluster=cluster)
    proc.send_signal(signal.SIGTERM)
    out, err = finish(proc)
    assert proc.returncode == 128 + signal.SIGTERM and "cancel" in err, err
    assert cluster.jobs()[-1]["result"] == "CANCELED"


@pytest.mark.cluster(size=2, cores=4)
def test_wait_exit_codes(cluster):
    ok = submit_job(cluster, "-o", "/dev/null", "true")
    seven = submit_job(cluster, "-o", "/dev/null", "sh", "-c", "exit 7")
    killed = submit_job(cluster, "-o", "/dev/null", "sh", "-c", "kill -USR2 $$")
    held = submit_job(cluster, "--urgency", "0", "-o", "/dev/null", "true")
    assert cluster.corral("wait", ok, check=False).returncode == 0
    assert cluster.corral("wait", seven, check=False).returncode == 7
    assert cluster.corral("wait", killed, check=False).returncode == 128 + signal.SIGUSR2
    cluster.corral("cancel", held)
    proc = cluster.corral("wait", held, check=False)
    assert proc.returncode == 1 and "cancel" in proc.stderr, proc.stderr
    assert cluster.corral("wait", ok, ok, check=False).returncode == 0
    proc = cluster.corral("wait", ok, seven, check=False)
    assert proc.returncode == 1 and f"job {seven}: FAILED" in proc.stderr, proc.stderr


@pytest.mark.cluster(size=1, cores=2)
def test_wait_watches_only_the_jobs_still_running(cluster, tmp_path):
    seven = submit_job(cluster, "-o", "/dev/null", "sh", "-c", "exit 7")
    ok = submit_job(cluster, "-o", "/dev/null", "true")
    cluster.wait_job(seven)
    cluster.wait_job(ok)
    # All ended: answered from one listing, without the gRPC runtime a watch needs (its
    # threads are the only ones a command starts).
    trace = tmp_path / "wait.strace"
    proc = subprocess.run(["strace", "-f", "-e", "trace=clone,clone3", "-o", str(trace),
                           binary("corral"), "wait", str(ok), str(seven)],
                          env=cluster.env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and f"job {seven}: FAILED" in proc.stderr, proc.stderr
    assert "clone" not in trace.read_text(), trace.read_text()
    # One still running beside ended ones: waited for, and every job's outcome counts.
    slow = submit_job(cluster, "-o", "/dev/null", "sleep", "1")
    start = time.monotonic()
    proc = cluster.corral("wait", ok, slow, seven, check=False)
    assert time.monotonic() - start >= 0.5
    assert proc.returncode == 1 and f"job {seven}: FAILED" in proc.stderr, proc.stderr
    assert cluster.job(slow)["state"] == "INACTIVE"
    assert cluster.corral("wait", ok, slow, check=False).returncode == 0


@pytest.mark.cluster(size=1, cores=2)
def test_wait_blocks_until_the_job_ends(cluster):
    jobid = submit_job(cluster, "-o", "/dev/null", "sleep", "1")
    start = time.monotonic()
    proc = cluster.corral("wait", jobid, check=False)
    assert proc.returncode == 0
    assert cluster.job(jobid)["state"] == "INACTIVE"
    assert time.monotonic() - start >= 0.5


# ------------------------------------------------------------------ cancel


@pytest.mark.cluster(size=1, cores=2)
def test_cancel_pending_job(cluster):
    jobid = submit_job(cluster, "--urgency", "0", "-o", "/dev/null", "true")
    job_until(cluster, jobid, lambda j: j["reason"] == "JobHeldUser", what="held")
    cluster.corral("cancel", jobid)
    job = cluster.wait_job(jobid)
    assert job["result"] == "CANCELED" and job["exception_type"] == "cancel", job
    assert job["waitstatus"] == -1 and job["nodelist"] == ""
    names = event_names(cluster, jobid)
    assert "alloc" not in names and "start" not in names, names
    assert names[-1] == "clean" and "exception" in names
    # A finished job can't be canceled again.
    proc = cluster.corral("cancel", jobid, check=False)
    assert proc.returncode == 1 and "already finished" in proc.stderr, proc.stderr


@pytest.mark.cluster(size=2, cores=2)
def test_cancel_kills_the_whole_process_tree(cluster, tmp_path):
    # On both nodes (two agents) a task leaves a background child that ignores SIGTERM:
    # only the SIGKILL of the task's process group ends it.
    script = (f"sh -c 'trap \"\" TERM; exec sleep 300' & "
              f"echo $! > {tmp_path}/bg-$CORRAL_TASK_RANK.pid; "
              f"echo $$ > {tmp_path}/sh-$CORRAL_TASK_RANK.pid; sleep 300")
    jobid = submit_job(cluster, "-N2", "-o", tmp_path / "out", "sh", "-c", script)
    pids = [int(wait_file(tmp_path / f"{kind}-{rank}.pid"))
            for kind in ("bg", "sh") for rank in (0, 1)]
    assert all(process_alive(p) for p in pids)
    assert cluster.job(jobid)["state"] == "RUN"
    cluster.corral("cancel", jobid)
    job = cluster.wait_job(jobid, timeout=10)
    assert job["result"] == "CANCELED" and job["exception_type"] == "cancel", job
    assert job["waitstatus"] == signal.SIGTERM, job  # the tasks themselves got SIGTERM
    proc = cluster.corral("wait", jobid, check=False)
    assert proc.returncode == 128 + signal.SIGTERM and "cancel" in proc.stderr
    deadline = time.monotonic() + 3
    while any(process_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [p for p in pids if process_alive(p)]
    assert survivors == [], f"processes {survivors} of job {jobid} survived cancel"
    names = event_names(cluster, jobid)
    assert names.index("exception") < names.index("finish") < names.index("clean")
    assert [n["cores_used"] for n in cluster.nodes()] == [0, 0]


@pytest.mark.cluster(size=1, cores=4)
def test_cancel_signal_and_selection(cluster, tmp_path):
    # -s sends a signal to the tasks and leaves the job alone otherwise.
    jobid = submit_job(cluster, "-o", "/dev/null", "sh", "-c",
                       f"trap 'echo usr1 > {tmp_path}/sig; exit 3' USR1; "
                       "while true; do sleep 0.05; done")
    cluster.wait_job(jobid, "RUN")
    time.sleep(0.2)  # let the shell install its trap
    cluster.corral("cancel", "-s", "USR1", jobid)
    assert cluster.corral("wait", jobid, check=False).returncode == 3
    job = cluster.job(jobid)
    assert job["result"] == "FAILED" and job["exception_type"] == "", job
    assert (tmp_path / "sig").read_text() == "usr1\n"

    held = [submit_job(cluster, "--urgency", "0", "-o", "/dev/null", "true") for _ in range(2)]
    running = submit_job(cluster, "-o", "/dev/null", "sleep", "30")
    cluster.wait_job(running, "RUN")
    proc = cluster.corral("cancel", "-s", "USR1", held[0], check=False)
    assert proc.returncode == 1 and "not running" in proc.stderr, proc.stderr
    cluster.corral("cancel", "-t", "pending")
    for j in held:
        assert cluster.wait_job(j)["result"] == "CANCELED"
    assert cluster.job(running)["state"] == "RUN"
    cluster.corral("cancel", "-u", "root")
    assert cluster.wait_job(running)["result"] == "CANCELED"


# ------------------------------------------------------------------ time limits


@pytest.mark.cluster(size=1, cores=2)
def test_time_limit_terms_then_kills(cluster, tmp_path):
    plain = submit_job(cluster, "-t", "2s", "-o", "/dev/null", "sleep", "30")
    # Traps SIGTERM and keeps going: it dies only by the SIGKILL after kill-grace (1s).
    stubborn = submit_job(cluster, 
        "-t", "2s", "-o", tmp_path / "stubborn.out", "sh", "-c",
        f"trap 'echo got-term >> {tmp_path}/terms' TERM; "
        "while true; do sleep 0.1; done")
    attached = subprocess.Popen([binary("corral"), "run", "-t", "2s", "sleep", "30"],
                                env=cluster.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        _, err = attached.communicate(timeout=15)
    finally:
        attached.kill()
        attached.wait()
    assert attached.returncode == 128 + signal.SIGTERM, err
    assert "timeout" in err and "time limit" in err, err
    jobs = {j: cluster.wait_job(j, timeout=15) for j in (plain, stubborn)}
    for jobid, job in jobs.items():
        assert job["result"] == "TIMEOUT", job
        assert job["exception_type"] == "timeout", job
        assert "time limit" in job["exception_note"], job
        assert job["duration"] == 2
        ev = event_times(cluster, jobid)
        limit_hit = ev["exception"]["timestamp"] - ev["start"]["timestamp"]
        assert 1.9 <= limit_hit <= 3.0, (jobid, limit_hit)
        names = event_names(cluster, jobid)
        assert names.index("start") < names.index("exception") < names.index("finish")
    assert jobs[plain]["waitstatus"] == signal.SIGTERM
    assert jobs[stubborn]["waitstatus"] == signal.SIGKILL
    assert "got-term" in (tmp_path / "terms").read_text()
    ev = event_times(cluster, plain)
    assert ev["finish"]["timestamp"] - ev["exception"]["timestamp"] < 0.9
    ev = event_times(cluster, stubborn)
    grace = ev["finish"]["timestamp"] - ev["exception"]["timestamp"]
    assert 0.9 <= grace <= 3.0, grace
    proc = cluster.corral("wait", stubborn, check=False)
    assert proc.returncode == 128 + signal.SIGKILL and "timeout" in proc.stderr


# ------------------------------------------------------------------ eventlog


@pytest.mark.cluster(size=1, cores=2)
def test_eventlog_follows_rfc21_order(cluster):
    jobid = submit_job(cluster, "-o", "/dev/null", "true")
    cluster.wait_job(jobid)
    lines = cluster.corral("eventlog", jobid).stdout.splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["name"] for e in events] == EVENT_SEQUENCE
    stamps = [e["timestamp"] for e in events]
    assert stamps == sorted(stamps)
    for e in events:
        assert set(e) <= {"timestamp", "name", "context"}, e
    submit = events[0]["context"]
    assert submit["userid"] == os.getuid() and submit["urgency"] == 16
    alloc = events[EVENT_SEQUENCE.index("alloc")]["context"]
    assert alloc["R"]["execution"]["nodelist"] == ["node0"]
    finish = events[EVENT_SEQUENCE.index("finish")]["context"]
    assert finish["status"] == 0
    human = cluster.corral("eventlog", "-H", jobid).stdout.splitlines()
    assert [line.split()[2] for line in human] == EVENT_SEQUENCE


@pytest.mark.cluster(size=1, cores=2)
def test_eventlog_follow_streams_until_inactive(cluster):
    jobid = submit_job(cluster, "-o", "/dev/null", "sleep", "1.5")
    follower = subprocess.Popen([binary("corral"), "eventlog", "--follow", str(jobid)],
                                env=cluster.env, stdout=subprocess.PIPE, text=True)
    try:
        # The events so far arrive while the job still runs, and the follower keeps going.
        early = b""
        deadline = time.monotonic() + 5
        while b'"start"' not in early and time.monotonic() < deadline:
            if select.select([follower.stdout], [], [], 0.1)[0]:
                early += os.read(follower.stdout.fileno(), 65536)
        assert b'"start"' in early and b'"finish"' not in early, early
        assert follower.poll() is None, "eventlog --follow ended while the job ran"
        assert cluster.job(jobid)["state"] == "RUN"
        rest, _ = follower.communicate(timeout=10)  # ends by itself once the job is inactive
        out = early.decode() + rest
    finally:
        follower.kill()
        follower.wait()
    assert follower.returncode == 0
    names = [json.loads(line)["name"] for line in out.splitlines()]
    assert names == EVENT_SEQUENCE
    assert names == event_names(cluster, jobid)
    # Following a finished job prints its log and ends at once.
    proc = cluster.corral("eventlog", "-f", jobid, timeout=10)
    assert [json.loads(l)["name"] for l in proc.stdout.splitlines()] == EVENT_SEQUENCE


# ------------------------------------------------------------------ scheduling


@pytest.mark.cluster(size=1, cores=4)
def test_core_sharing_and_exclusive(cluster, tmp_path):
    a = submit_job(cluster, "-n2", "-o", tmp_path / "a.out", "sh", "-c",
                       "echo $CORRAL_JOB_CPUS; sleep 30")
    b = submit_job(cluster, "-n2", "-o", tmp_path / "b.out", "sh", "-c",
                       "echo $CORRAL_JOB_CPUS; sleep 30")
    for j in (a, b):
        cluster.wait_job(j, "RUN")
    cores_a = set(wait_file(tmp_path / "a.out").split())
    cores_b = set(wait_file(tmp_path / "b.out").split())
    assert len(cores_a) == 1 and cores_a != cores_b, (cores_a, cores_b)
    ra = cluster.job(a)["R"]["execution"]["R_lite"][0]["children"]["core"]
    rb = cluster.job(b)["R"]["execution"]["R_lite"][0]["children"]["core"]
    assert {ra, rb} == {"0-1", "2-3"}
    node = cluster.nodes()[0]
    assert node["cores_used"] == 4 and sorted(node["jobs"]) == [a, b]

    excl = submit_job(cluster, "-N1", "--exclusive", "-o", "/dev/null", "sleep", "30")
    info = job_until(cluster, excl, lambda j: j["reason"] == "Resources", what="Resources")
    assert info["state"] == "SCHED"
    cluster.corral("cancel", a)
    time.sleep(0.5)
    # Two cores are free, but an exclusive job needs the whole node.
    assert cluster.job(excl)["state"] == "SCHED"
    cluster.corral("cancel", b)
    info = cluster.wait_job(excl, "RUN")
    assert info["ncores"] == 4
    small = submit_job(cluster, "-n1", "-o", "/dev/null", "true")
    info = job_until(cluster, small, lambda j: j["reason"] == "Resources", what="Resources")
    assert cluster.nodes()[0]["cores_used"] == 4
    cluster.corral("cancel", excl)
    assert cluster.wait_job(small)["result"] == "COMPLETED"


@pytest.mark.cluster(size=2, cores=4)
def test_pending_reasons_priority_and_resources(cluster):
    blocker = submit_job(cluster, "-w", "node0", "-n4", "-t", "1m", "-o", "/dev/null", "sleep", "60")
    cluster.wait_job(blocker, "RUN")
    big = submit_job(cluster, "-N2", "-n8", "-o", "/dev/null", "true")
    small = submit_job(cluster, "-n1", "-o", "/dev/null", "true")
    job_until(cluster, big, lambda j: j["reason"] == "Resources", what="reason Resources")
    # node1 is free but promised to the bigger, older job; `small` has no time limit to
    # backfill with.
    job_until(cluster, small, lambda j: j["reason"] == "Priority", what="reason Priority")
    queue = json.loads(cluster.corral("queue", "--json").stdout)
    reasons = {j["id"]: (j["state"], j["reason"]) for j in queue}
    assert reasons == {blocker: ("RUN", ""), big: ("SCHED", "Resources"),
                       small: ("SCHED", "Priority")}
    table = cluster.corral("queue").stdout
    assert "(Resources)" in table and "(Priority)" in table
    cluster.corral("cancel", blocker)
    assert cluster.wait_job(big)["result"] == "COMPLETED"
    assert cluster.wait_job(small)["result"] == "COMPLETED"


@pytest.mark.cluster(size=4, cores=2)
def test_node_selection(cluster):
    def nodelist(*args):
        jobid = submit_job(cluster, *args, "-o", "/dev/null", "true")
        job = cluster.wait_job(jobid)
        assert job["result"] == "COMPLETED", job
        return job["nodelist"]

    assert nodelist("-w", "node2") == "node2"
    assert nodelist("-w", "node[1,3]") == "node[1,3]"
    assert nodelist("-N2", "-w", "node3") in ("node[0,3]", "node[1,3]", "node[2-3]")
    assert nodelist("-x", "node[0-2]") == "node3"
    assert nodelist("-N2", "-x", "node[0,2]") == "node[1,3]"
    for _ in range(3):
        assert nodelist("-N3", "-x", "node1") == "node[0,2-3]"
    proc = cluster.corral("submit", "-w", "node9", "true", check=False)
    assert proc.returncode != 0 and "node9" in proc.stderr
    proc = cluster.corral("submit", "-w", "node1", "-x", "node1", "true", check=False)
    assert proc.returncode != 0 and "node1" in proc.stderr
    proc = cluster.corral("submit", "-N2", "-x", "node[0-2]", "true", check=False)
    assert proc.returncode != 0


@pytest.mark.cluster(size=1, cores=2)
def test_urgency_zero_holds(cluster):
    held = submit_job(cluster, "--urgency", "0", "-o", "/dev/null", "true")
    free = submit_job(cluster, "-o", "/dev/null", "true")
    assert cluster.wait_job(free)["result"] == "COMPLETED"
    time.sleep(0.3)
    job = cluster.job(held)
    assert job["state"] == "SCHED" and job["reason"] == "JobHeldUser", job
    assert job["urgency"] == 0
    assert "alloc" not in event_names(cluster, held)
    assert "(JobHeldUser)" in cluster.corral("queue").stdout
    cluster.corral("cancel", held)


# ------------------------------------------------------------------ listings


@pytest.mark.cluster(size=1, cores=2)
def test_queue_filters_and_show_job(cluster, tmp_path):
    running = submit_job(cluster, "-J", "runner", "-o", "/dev/null", "sleep", "30")
    held = submit_job(cluster, "-J", "holder", "--urgency", "0", "-o", "/dev/null", "true")
    cluster.wait_job(running, "RUN")
    done = submit_job(cluster, "-o", "/dev/null", "true")
    cluster.wait_job(done)
    other = submit_job(cluster, "--urgency", "0", "-o", "/dev/null", "true", user=65534,
                           cwd="/")

    def ids(*args):
        return [j["id"] for j in json.loads(cluster.corral("queue", "--json", *args).stdout)]

    assert ids() == [running, held, other]
    assert ids("-a") == [running, held, done, other]
    assert ids("-t", "running") == [running]
    assert ids("-t", "pending") == [held, other]
    assert ids("-t", "completed") == [done]
    assert ids("-t", "running,pending") == [running, held, other]
    assert ids("-u", "root") == [running, held]
    assert ids("-u", "nobody") == [other]
    assert ids("-u", "root", "-t", "pending") == [held]
    assert ids("-j", done) == [done]

    job = json.loads(cluster.corral("queue", "--json", "-j", running).stdout)[0]
    assert job["name"] == "runner" and job["username"] == "root"
    assert job["state"] == "RUN" and job["nodelist"] == "node0" and job["ntasks"] == 1

    text = cluster.corral("show", "job", running).stdout
    assert f"JobId={running} JobName=runner" in text
    assert "JobState=RUN" in text and "NodeList=node0" in text
    text = cluster.corral("show", "job", held).stdout
    assert "Reason=JobHeldUser" in text and "Urgency=0" in text
    shown = cluster.job(done)
    assert shown["state"] == "INACTIVE" and shown["result"] == "COMPLETED"
    assert shown["jobspec"]["tasks"][0]["command"] == ["true"]
    assert shown["R"]["execution"]["nodelist"] == ["node0"]
    cluster.corral("cancel", running, held, other)


def test_queue_partition_filter(tmp_path):
    config = tmp_path / "corral.toml"
    config.write_text('[[partition]]\nname = "batch"\nnodes = "node[0-1]"\ndefault = true\n\n'
                      '[[partition]]\nname = "debug"\nnodes = "node[2-3]"\n')
    cluster = Cluster(size=4, cores=2, config=config)
    try:
        cluster.start()
        a = submit_job(cluster, "-o", "/dev/null", "sleep", "30")
        b = submit_job(cluster, "-p", "debug", "-o", "/dev/null", "sleep", "30")
        info = cluster.wait_job(b, "RUN")
        assert info["partition"] == "debug" and info["nodelist"] in ("node2", "node3")
        assert cluster.wait_job(a, "RUN")["nodelist"] in ("node0", "node1")

        def ids(*args):
            return [j["id"] for j in
                    json.loads(cluster.corral("queue", "--json", *args).stdout)]

        assert ids("-p", "debug") == [b]
        assert ids("-p", "batch") == [a]
        assert ids() == [a, b]
        cluster.corral("cancel", a, b)
    finally:
        cluster.stop()
