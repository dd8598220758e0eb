"""--requeue: a job whose node fails runs again with the same id (output appended,
CORRAL_RESTART_COUNT counting the runs) instead of ending with `node-fail`; the earlier
run's tasks end everywhere, also on the failed node when it comes back."""
import json
import signal

import pytest

from conftest import event_names, wait_until
from test_node_failure import alive, reap_orphans

ALICE = 12345  # a user with no account here, as the permission tests use

def runs(path):
    """[(attempt, node, pid)] from lines "ATTEMPT NODE PID" the tasks wrote."""
    if not path.exists():
        return []
    return [(int(a), n, int(p)) for a, n, p in (line.split() for line in path.read_text().splitlines())]


def waiting_task(pids, go):
    return (f'echo "$CORRAL_RESTART_COUNT $CORRAL_NODENAME $$" >> {pids}; '
            f'echo "start $CORRAL_RESTART_COUNT $CORRAL_NODENAME"; '
            f'while [ ! -e {go} ]; do sleep 0.1; done; echo "done $CORRAL_RESTART_COUNT $CORRAL_NODENAME"')


@pytest.mark.cluster(size=4, agents=4)
def test_a_requeued_job_runs_again_elsewhere_with_the_same_id(cluster):
    out = cluster.shared_dir()
    pids, go = out / "pids", out / "go"
    job = cluster.submit("--requeue", "-N2", "-o", f"{out}/job-%j", "sh", "-c", waiting_task(pids, go))
    wait_until(lambda: len(runs(pids)) == 2, what="the first run's tasks", cluster=cluster)
    first = runs(pids)
    try:
        lost = first[1][1]  # agent i hosts node i
        cluster.kill_agent(int(lost.removeprefix("node")))
        wait_until(lambda: len(runs(pids)) == 4, timeout=30, what="the second run's tasks", cluster=cluster)
        second = [r for r in runs(pids) if r[0] == 1]
        assert len(second) == 2 and lost not in {n for _, n, _ in second}, runs(pids)
        info = cluster.job(job)
        assert info["state"] == "RUN" and info.get("requeues", 0) == 1, info
        assert info["exception_type"] == "", info  # the new run has none
        # The earlier run's task on the surviving node ended with it.
        survivor = next(pid for a, n, pid in first if n != lost)
        wait_until(lambda: not alive(survivor), timeout=10, what="the first run's task to end", cluster=cluster)
        # The killed agent's task outlives it (test_node_failure): gone before the second run ends.
        reap_orphans(pid for _, n, pid in first if n == lost)

        go.touch()
        info = cluster.wait_job(job, timeout=30)
        assert info["result"] == "COMPLETED" and info.get("requeues", 0) == 1, info
        names = event_names(cluster, job)
        assert names.count("requeue") == 1 and names.count("start") == 2, names
        assert names.count("clean") == 1, names
        exc = [json.loads(line) for line in cluster.corral("eventlog", str(job)).stdout.splitlines()
               if '"exception"' in line]
        assert exc and exc[0]["context"]["type"] == "node-fail", exc
        assert "Restarts=1" in cluster.corral("show", "job", str(job)).stdout
        # Both runs wrote to the same file: the first run's lines are kept.
        lines = (out / f"job-{job}").read_text().splitlines()
        assert sorted(l for l in lines if l.startswith("start 0")) == sorted(f"start 0 {n}" for _, n, _ in first)
        assert sorted(l for l in lines if l.startswith("done")) == sorted(f"done 1 {n}" for _, n, _ in second)
        assert not any(l.startswith("done 0") for l in lines), lines
    finally:
        reap_orphans(pid for _, _, pid in runs(pids))


@pytest.mark.cluster(size=2, agents=2)
def test_a_requeued_batch_job_waits_for_its_node_and_replaces_the_old_run_there(cluster):
    """Frozen past node-timeout, node1's agent still runs the first run when it returns: the
    controller kills that run, and the second run starts there only after it ended."""
    out = cluster.shared_dir()
    pids, go = out / "pids", out / "go"
    script = out / "job.sh"
    script.write_text("#!/bin/sh\n#CORRAL --requeue\n" + waiting_task(pids, go) + "\n")
    proc = cluster.corral("batch", "-w", "node1", "-o", f"{out}/batch-%j", str(script))
    job = int(proc.stdout.split()[-1])
    wait_until(lambda: len(runs(pids)) == 1, what="the first run", cluster=cluster)
    old_pid = runs(pids)[0][2]
    agent = cluster.agents[1]
    agent.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: "requeue" in event_names(cluster, job), timeout=20,
                   what="the job to be requeued", cluster=cluster)
        info = cluster.job(job)
        assert info["state"] == "SCHED" and info.get("requeues", 0) == 1, info
    finally:
        agent.send_signal(signal.SIGCONT)
    try:
        wait_until(lambda: len(runs(pids)) == 2, timeout=30, what="the second run on node1", cluster=cluster)
        assert runs(pids)[1][:2] == (1, "node1"), runs(pids)
        assert not alive(old_pid)  # it ended before the new run began
        go.touch()
        info = cluster.wait_job(job, timeout=30)
        assert info["result"] == "COMPLETED" and info["nodelist"] == "node1", info
        text = (out / f"batch-{job}").read_text()
        assert text == "start 0 node1\nstart 1 node1\ndone 1 node1\n", text
        # The agent holds nothing of either run any more.
        cluster.wait_node("node1", lambda n: n["state"] == "idle", what="node1 idle")
        again = cluster.submit("-w", "node1", "-o", f"{out}/again", "true")
        assert cluster.wait_job(again)["result"] == "COMPLETED"
    finally:
        reap_orphans(pid for _, _, pid in runs(pids))


@pytest.mark.cluster(size=2, agents=2, sets=("job.requeue=true",))
def test_the_site_default_requeues_and_no_requeue_opts_out(cluster):
    out = cluster.shared_dir()
    pids = out / "pids"
    task = f'echo "$CORRAL_RESTART_COUNT $CORRAL_NODENAME $$" >> {pids}; exec sleep 300'
    kept = cluster.submit("-w", "node1", "-o", f"{out}/kept", "sh", "-c", task)
    failed = cluster.submit("--no-requeue", "-w", "node1", "-o", f"{out}/failed", "sh", "-c", task)
    wait_until(lambda: len(runs(pids)) == 2, what="both jobs to start", cluster=cluster)
    try:
        cluster.kill_agent(1)
        info = cluster.wait_job(failed, timeout=20)
        assert info["result"] == "FAILED" and info["exception_type"] == "node-fail", info
        assert info.get("requeues", 0) == 0, info
        info = cluster.wait_job(kept, ("SCHED",), timeout=20)  # node1 is down: it waits
        assert info.get("requeues", 0) == 1, info
        cluster.corral("cancel", str(kept))
        info = cluster.wait_job(kept, timeout=20)
        assert info["result"] == "CANCELED" and info.get("requeues", 0) == 1, info
    finally:
        reap_orphans(pid for _, _, pid in runs(pids))


@pytest.mark.cluster(size=2, agents=2)
def test_a_requeued_job_survives_a_controller_restart(cluster):
    """Requeued and waiting for its node, the job outlives corrald killed -9: the replayed
    eventlog gives the same pending job, whose second run starts when the node returns."""
    out = cluster.shared_dir()
    pids = out / "pids"
    task = f'echo "$CORRAL_RESTART_COUNT $CORRAL_NODENAME $$" >> {pids}; echo run $CORRAL_RESTART_COUNT'
    job = cluster.submit("--requeue", "-w", "node1", "-o", f"{out}/job", "sh", "-c", task + "; exec sleep 300")
    wait_until(lambda: len(runs(pids)) == 1, what="the first run", cluster=cluster)
    try:
        cluster.kill_agent(1)
        info = cluster.wait_job(job, ("SCHED",), timeout=20)
        assert info.get("requeues", 0) == 1, info
        cluster.kill_controller(signal.SIGKILL)
        cluster.restart_controller()
        info = cluster.job(job)
        assert info["state"] == "SCHED" and info.get("requeues", 0) == 1, info
        cluster.start_agent(1)  # kills the first run's task it finds left (test_node_failure)
        wait_until(lambda: len(runs(pids)) == 2, timeout=30, what="the second run", cluster=cluster)
        assert runs(pids)[1][:2] == (1, "node1"), runs(pids)
        cluster.corral("cancel", str(job))
        info = cluster.wait_job(job, timeout=20)
        assert info["result"] == "CANCELED" and info.get("requeues", 0) == 1, info
        names = event_names(cluster, job)
        assert names.count("requeue") == 1 and names.count("start") == 2, names
        assert (out / "job").read_text().startswith("run 0\nrun 1\n")
    finally:
        reap_orphans(pid for _, _, pid in runs(pids))


@pytest.mark.cluster(size=1, agents=1)
def test_requeue_is_refused_where_it_cannot_apply(cluster):
    run = cluster.corral("run", "--requeue", "true", check=False)
    assert run.returncode != 0 and "cannot run again" in run.stderr, run.stderr
    both = cluster.corral("submit", "--requeue", "--no-requeue", "true", check=False)
    assert both.returncode != 0 and "contradict" in both.stderr, both.stderr
    # The controller checks it too, whatever the client sends.
    spec = {"version": 1, "resources": [{"type": "slot", "count": 1, "label": "task",
                                         "with": [{"type": "core", "count": 1}]}],
            "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
            "attributes": {"system": {"requeue": "yes"}}}
    bad = cluster.corral("submit", "--jobspec", "-", input=json.dumps(spec), check=False, user=ALICE)
    assert bad.returncode != 0 and "requeue" in bad.stderr, bad.stderr
    # Sent as written (no output file: it would stream to its client), a hostile user's
    # request to requeue such a job is refused too, and no job is made.
    spec["attributes"]["system"]["requeue"] = True
    spec["attributes"]["system"]["cwd"] = "/"
    bad = cluster.corral("submit", "--jobspec", "-", input=json.dumps(spec), check=False, user=ALICE)
    assert bad.returncode != 0 and "cannot run again" in bad.stderr, bad.stderr
    assert cluster.jobs() == [], cluster.jobs()
