"""corrald killed with kill -9 and restarted on the same state directory: no job is lost,
running tasks are adopted (not restarted) and finish normally, pending jobs get scheduled,
job ids are never reused, drained nodes stay drained, and the node agents reconnect."""
import os
import signal
import time

import pytest

from conftest import wait_until


def lines(path):
    return path.read_text().splitlines() if path.exists() else []


def gated_task(out):
    """A task that records its pid once and runs until the test creates `go`."""
    return ["sh", "-c", f'echo $$ >> {out}/pids-$CORRAL_JOBID; '
                        f'while [ ! -e {out}/go ]; do sleep 0.1; done; echo finished']


def by_id(jobs):
    return {j["id"]: j for j in jobs}


@pytest.mark.cluster(size=2, agents=2, cores=2)
def test_controller_kill_loses_nothing(cluster):
    out = cluster.shared_dir()
    # Four one-core jobs fill the two 2-core nodes; three more wait for resources.
    running = [cluster.submit("-o", f"{out}/out-%j", *gated_task(out)) for _ in range(4)]
    for j in running:
        cluster.wait_job(j, "RUN")
    pending = [cluster.submit("-o", f"{out}/out-%j", *gated_task(out)) for _ in range(3)]
    wait_until(lambda: all(len(lines(out / f"pids-{j}")) == 1 for j in running),
               what="the running jobs' tasks to start", cluster=cluster)
    before = by_id(cluster.jobs())
    assert sorted(before) == sorted(running + pending)
    assert all(before[j]["state"] == "SCHED" for j in pending), before
    agent_pids = [a.pid for a in cluster.agents]

    cluster.kill_controller(signal.SIGKILL)
    time.sleep(1)  # let the agents notice and start reconnecting
    cluster.restart_controller()
    cluster.wait_nodes_up(2)

    after = by_id(cluster.jobs())
    assert sorted(after) == sorted(before), (sorted(before), sorted(after))
    for j in running:
        assert after[j]["state"] == "RUN", after[j]
        assert after[j]["nodelist"] == before[j]["nodelist"], (before[j], after[j])
    for j in pending:
        assert after[j]["state"] == "SCHED", after[j]
    # Same agent processes, reconnected.
    assert [a.pid for a in cluster.agents] == agent_pids
    assert all(a.poll() is None for a in cluster.agents)
    assert all(n["agent"] for n in cluster.nodes())

    # An adopted job can still be cancelled: its task is signalled and ends.
    victim = running[0]
    victim_pid = int(lines(out / f"pids-{victim}")[0])
    cluster.corral("cancel", victim)
    assert cluster.wait_job(victim)["result"] == "CANCELED"
    wait_until(lambda: not os.path.exists(f"/proc/{victim_pid}"), timeout=10,
               what="the cancelled job's task to end", cluster=cluster)
    # Its cores go to the first pending job.
    cluster.wait_job(pending[0], "RUN")

    (out / "go").touch()
    for j in running[1:] + pending:
        info = cluster.wait_job(j, timeout=30)
        assert info["result"] == "COMPLETED", (info.get("exception_type"), info.get("exception_note"), info.get("eventlog"))
        assert (out / f"out-{j}").read_text() == "finished\n", j
    # Each task ran exactly once: nothing was restarted.
    for j in running + pending:
        assert len(lines(out / f"pids-{j}")) == 1, (j, lines(out / f"pids-{j}"))

    # Ids are never reused.
    new = cluster.submit("-o", f"{out}/new-%j", "true")
    assert new > max(running + pending), (new, running, pending)
    assert cluster.wait_job(new)["result"] == "COMPLETED"


@pytest.mark.cluster(size=2, agents=2)
def test_ids_survive_a_restart_with_nothing_running(cluster):
    out = cluster.shared_dir()
    ids = [cluster.submit("-o", f"{out}/o-%j", "true") for _ in range(3)]
    for j in ids:
        cluster.wait_job(j)
    cluster.kill_controller(signal.SIGKILL)
    cluster.restart_controller()
    jobs = by_id(cluster.jobs())
    for j in ids:
        assert jobs[j]["state"] == "INACTIVE" and jobs[j]["result"] == "COMPLETED", jobs
    # A second restart right away must not forget the id counter either.
    cluster.kill_controller(signal.SIGKILL)
    cluster.restart_controller()
    cluster.wait_nodes_up(2)
    new = cluster.submit("-o", f"{out}/o-%j", "true")
    assert new > max(ids)


@pytest.mark.cluster(size=3, agents=3)
def test_drained_node_survives_restart(cluster):
    out = cluster.shared_dir()
    cluster.corral("drain", "node1", "--reason", "bad fan")
    before = cluster.node("node1")
    assert before["state"] == "drained" and before["reason"] == "bad fan", before

    cluster.kill_controller(signal.SIGKILL)
    cluster.restart_controller()
    cluster.wait_nodes_up(3)
    node = cluster.wait_node("node1", lambda n: not n["state"].startswith("down"))
    assert node["state"] == "drained", node
    assert node["reason"] == "bad fan", node
    assert node["reason_time"] == pytest.approx(before["reason_time"], abs=0.01), node

    # Still out of scheduling: a 3-node job waits until the node is resumed.
    job = cluster.submit("-N3", "-o", f"{out}/o-%j", "true")
    time.sleep(1.5)
    assert cluster.job(job)["state"] == "SCHED"
    cluster.corral("resume", "node1")
    assert cluster.wait_job(job)["result"] == "COMPLETED"
    # The resume survives a restart too.
    cluster.kill_controller(signal.SIGKILL)
    cluster.restart_controller()
    cluster.wait_nodes_up(3)
    node = cluster.node("node1")
    assert node["state"] == "idle" and node["reason"] == "", node


@pytest.mark.cluster(size=2, agents=2)
def test_agent_reconnects_and_reports_exits_missed_while_controller_was_down(cluster):
    out = cluster.shared_dir()
    # Job a ends while corrald is down (exit 7); job b keeps running across the restart.
    a = cluster.submit("-w", "node0", "-o", f"{out}/a-%j", "sh", "-c",
                       f'echo $$ >> {out}/pids-$CORRAL_JOBID; '
                       f'while [ ! -e {out}/end-a ]; do sleep 0.1; done; exit 7')
    b = cluster.submit("-w", "node1", "-o", f"{out}/b-%j", *gated_task(out))
    cluster.wait_job(a, "RUN")
    cluster.wait_job(b, "RUN")
    wait_until(lambda: lines(out / f"pids-{a}") and lines(out / f"pids-{b}"),
               what="the tasks to start", cluster=cluster)

    cluster.kill_controller(signal.SIGKILL)
    (out / "end-a").touch()
    pid_a = int(lines(out / f"pids-{a}")[0])
    wait_until(lambda: not os.path.exists(f"/proc/{pid_a}"), timeout=10,
               what="job a's task to exit while corrald is down")
    time.sleep(0.5)
    cluster.restart_controller()
    cluster.wait_nodes_up(2)

    info = cluster.wait_job(a, timeout=20)
    assert info["result"] == "FAILED" and info["exit_code"] == 7, info
    assert info["exception_type"] == "", info  # an exit, not a lost node
    assert cluster.job(b)["state"] == "RUN"
    (out / "go").touch()
    info = cluster.wait_job(b)
    assert info["result"] == "COMPLETED", info
    assert len(lines(out / f"pids-{b}")) == 1
    assert (out / f"b-{b}").read_text() == "finished\n"
    for i in range(2):
        log = (os.path.join(cluster.dir, f"agent-{i}.log"))
        assert "registered with the controller" in open(log).read()


@pytest.mark.cluster(size=2, agents=2)
def test_agent_that_does_not_return_after_restart_fails_its_job(cluster):
    out = cluster.shared_dir()
    job = cluster.submit("-w", "node1", "-o", f"{out}/o-%j", "sh", "-c",
                         f"echo $$ > {out}/pid; exec sleep 300")
    cluster.wait_job(job, "RUN")
    wait_until(lambda: lines(out / "pid"), what="the task to start", cluster=cluster)
    try:
        cluster.kill_controller(signal.SIGKILL)
        cluster.kill_agent(1)
        cluster.restart_controller()
        # After controller.node-timeout without its agent the job is declared lost.
        info = cluster.wait_job(job, timeout=20)
        assert info["exception_type"] == "node-fail", info
        assert "node1" in info["exception_note"], info
        assert cluster.node("node1")["state"].startswith("down")
        assert cluster.node("node0")["state"] == "idle"
    finally:
        try:  # the killed agent's task is nobody's now
            os.killpg(int(lines(out / "pid")[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.cluster(size=2, agents=2)
def test_accepted_submissions_survive_an_immediate_kill(cluster):
    # Submit returns once the jobs are durable: a kill -9 right after loses none of them.
    proc = cluster.corral("submit", "--cc", "1-40", "--test-run-duration", "0.2s", "-o",
                          "/dev/null", "true")
    ids = [int(x) for x in proc.stdout.split()]
    assert len(ids) == 40
    cluster.kill_controller(signal.SIGKILL)
    cluster.restart_controller()
    cluster.wait_nodes_up(2)
    known = by_id(cluster.jobs())
    assert sorted(known) == sorted(ids)
    for j in ids:
        info = cluster.wait_job(j, timeout=60)
        assert info["result"] == "COMPLETED", (info.get("exception_type"), info.get("exception_note"), info.get("eventlog"))
    assert cluster.submit("-o", "/dev/null", "true") > max(ids)


@pytest.mark.cluster(size=2, agents=2)
def test_draining_node_with_a_running_job_survives_restart(cluster):
    out = cluster.shared_dir()
    job = cluster.submit("-w", "node0", "-o", f"{out}/o-%j", *gated_task(out))
    cluster.wait_job(job, "RUN")
    cluster.corral("drain", "node0", "--reason", "replace dimm")
    assert cluster.node("node0")["state"] == "draining"
    cluster.kill_controller(signal.SIGKILL)
    cluster.restart_controller()
    cluster.wait_nodes_up(2)
    node = cluster.node("node0")
    assert node["state"] == "draining" and node["reason"] == "replace dimm", node
    assert cluster.job(job)["state"] == "RUN"
    (out / "go").touch()
    assert cluster.wait_job(job)["result"] == "COMPLETED"
    node = cluster.wait_node("node0", lambda n: n["state"] == "drained")
    assert node["reason"] == "replace dimm", node
