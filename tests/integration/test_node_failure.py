"""Node failures: an agent killed (kill -9) or frozen mid-job fails the job with a
`node-fail` exception, its node goes down and the scheduler avoids it; when the agent
comes back the node is up again and takes work."""
import os
import signal
import time

import pytest

from conftest import wait_until


def alive(pid):
    """Whether the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def task_pids(path):
    """{node: pid} from lines "NODE PID" the job's tasks wrote."""
    if not path.exists():
        return {}
    return {n: int(p) for n, p in (l.split() for l in path.read_text().splitlines())}


def reap_orphans(pids):
    # A task whose agent was killed is no longer anyone's: do not leave it running.
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def is_down(node):
    return node["state"].startswith("down")


@pytest.mark.cluster(size=4, agents=4)
def test_killed_agent_fails_the_job_and_its_node_returns(cluster):
    out = cluster.shared_dir()
    pids = out / "pids"
    job = cluster.submit("-N2", "-w", "node[1-2]", "-o", f"{out}/job-%j-%t", "sh", "-c",
                         f'echo "$CORRAL_NODENAME $$" >> {pids}; exec sleep 300')
    cluster.wait_job(job, "RUN")
    wait_until(lambda: len(task_pids(pids)) == 2, what="both tasks to start", cluster=cluster)
    started = task_pids(pids)
    try:
        cluster.kill_agent(1)  # hosts node1

        info = cluster.wait_job(job, timeout=20)
        assert info["exception_type"] == "node-fail", info
        assert "node1" in info["exception_note"], info
        assert info["result"] == "FAILED", info
        # The job's task on the surviving node was killed with it.
        wait_until(lambda: not alive(started["node2"]), timeout=10,
                   what="the task on node2 to be killed", cluster=cluster)

        node1 = cluster.node("node1")
        assert is_down(node1), node1
        assert node1["reason"], node1
        assert node1["agent"] == "", node1
        assert cluster.node("node2")["state"] == "idle"

        # New work avoids the down node; work that needs it waits.
        three = cluster.submit("-N3", "-o", f"{out}/three-%j", "true")
        info = cluster.wait_job(three)
        assert info["result"] == "COMPLETED", info
        assert info["nodelist"] == "node[0,2-3]", info
        four = cluster.submit("-N4", "-o", f"{out}/four-%j", "printenv", "CORRAL_NODENAME")
        time.sleep(1.5)
        assert cluster.job(four)["state"] == "SCHED", cluster.job(four)

        # The killed agent's task outlived it; nobody can adopt it now.
        assert alive(started["node1"])

        # The agent comes back: it ends the task the controller already declared lost,
        # node1 is up, and the waiting job runs on all four nodes.
        cluster.start_agent(1)
        cluster.wait_node("node1", lambda n: n["state"] in ("idle", "allocated", "mixed"),
                          what="node1 to come back up")
        wait_until(lambda: not alive(started["node1"]), timeout=10,
                   what="the restarted agent to end the orphaned task", cluster=cluster)
        info = cluster.wait_job(four)
        assert info["result"] == "COMPLETED", info
        assert info["nodelist"] == "node[0-3]", info
        outputs = sorted((out / f"four-{four}").read_text().split())
        assert outputs == ["node0", "node1", "node2", "node3"], outputs
        assert cluster.node("node1")["state"] == "idle"
    finally:
        reap_orphans(started.values())


@pytest.mark.cluster(size=2, agents=2)
def test_frozen_agent_times_out_and_recovers(cluster):
    out = cluster.shared_dir()
    pids = out / "pids"
    job = cluster.submit("-w", "node1", "-o", f"{out}/job-%j", "sh", "-c",
                         f'echo "$CORRAL_NODENAME $$" >> {pids}; exec sleep 300')
    cluster.wait_job(job, "RUN")
    wait_until(lambda: task_pids(pids), what="the task to start", cluster=cluster)
    agent = cluster.agents[1]
    t0 = time.monotonic()
    agent.send_signal(signal.SIGSTOP)
    try:
        # No heartbeat for controller.node-timeout (3s): the node is declared down.
        cluster.wait_node("node1", is_down, timeout=15, what="node1 to be declared down")
        elapsed = time.monotonic() - t0
        assert elapsed >= 2.5, f"node1 declared down after only {elapsed:.1f}s"
        info = cluster.wait_job(job, timeout=15)
        assert info["exception_type"] == "node-fail", info
        other = cluster.submit("-o", f"{out}/other-%j", "true")
        assert cluster.wait_job(other)["nodelist"] == "node0"
    finally:
        agent.send_signal(signal.SIGCONT)
    # Thawed, the agent reconnects; the controller kills the task it no longer wants.
    cluster.wait_node("node1", lambda n: n["state"] == "idle", timeout=20,
                      what="node1 to reconnect after the freeze")
    try:
        wait_until(lambda: not alive(task_pids(pids)["node1"]), timeout=10,
                   what="the stale task on node1 to be killed", cluster=cluster)
    finally:
        reap_orphans(task_pids(pids).values())
    again = cluster.submit("-w", "node1", "-o", f"{out}/again-%j", "printenv", "CORRAL_NODENAME")
    info = cluster.wait_job(again)
    assert info["result"] == "COMPLETED", info
    assert (out / f"again-{again}").read_text() == "node1\n"
