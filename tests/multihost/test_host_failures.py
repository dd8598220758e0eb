"""A compute host cut off from the network (its switch port down), and corrald killed -9,
while jobs run on every host."""
import os
import signal
import time

from netcluster import net_cluster, requires_hosts, wait_until  # noqa: F401

pytestmark = requires_hosts


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def task_pids(path):
    """NAME PID lines the tasks wrote, as {name: pid}."""
    if not os.path.exists(path):
        return {}
    return {n: int(p) for n, p in (line.split() for line in open(path).read().splitlines() if line)}


def sleeper(c, nodes, out, tag):
    pids = os.path.join(out, f"{tag}.pids")
    job = c.submit(f"-N{len(nodes)}", "-w", ",".join(nodes), "-o", f"{out}/{tag}-%t", "sh", "-c",
                   f'echo "$CORRAL_NODENAME $$" >> {pids}; exec sleep 300')
    wait_until(lambda: len(task_pids(pids)) == len(nodes), what=f"job {tag}'s tasks to start", cluster=c)
    return job, pids


def is_down(n):
    return n is not None and n["state"].startswith("down")


def test_a_host_cut_off_goes_down_alone_and_returns(net_cluster):
    c = net_cluster
    out = c.shared_dir()
    lost, lost_pids = sleeper(c, ["c1"], out, "lost")
    kept, kept_pids = sleeper(c, ["c2", "c3", "c4"], out, "kept")
    started = task_pids(lost_pids)
    # A job that asked to be requeued runs again on c1 once it is back (it may run only there).
    marker = os.path.join(out, "go")
    again_pids = os.path.join(out, "again.pids")
    requeued = c.submit("--requeue", "-w", "c1", "-o", f"{out}/requeued", "sh", "-c",
                        f'echo "$CORRAL_NODENAME $$" >> {again_pids}; echo run $CORRAL_RESTART_COUNT; '
                        f'while [ ! -e {marker} ]; do sleep 0.1; done')
    wait_until(lambda: len(open(again_pids).read().splitlines()) == 1 if os.path.exists(again_pids) else False,
               what="the requeue job's first run", cluster=c)
    c.host("c1").cut()
    t0 = time.monotonic()
    wait_until(lambda: is_down(c.node("c1")), timeout=20, what="c1 to be declared down", cluster=c)
    assert time.monotonic() - t0 >= 2.5  # controller.node-timeout is 3s
    info = c.wait_job(lost, timeout=20)
    assert info["exception_type"] == "node-fail" and "c1" in info["exception_note"], info
    assert info["result"] == "FAILED", info
    assert c.job(kept)["state"] == "RUN", c.job(kept)
    info = c.wait_job(requeued, ("SCHED",), timeout=20)
    assert info.get("requeues", 0) == 1, info
    assert all(alive(p) for p in task_pids(kept_pids).values())
    # Cut off, the task on c1 knows nothing yet; it is still running.
    assert alive(started["c1"])

    c.host("c1").reconnect()
    wait_until(lambda: c.node("c1") is not None and not is_down(c.node("c1")), timeout=60,
               what="c1 to come back", cluster=c)
    wait_until(lambda: not alive(started["c1"]), timeout=15,
               what="c1's agent to end the task of the failed job", cluster=c)
    assert c.job(kept)["state"] == "RUN"  # untouched throughout
    # The requeued job's second run is on c1, after the first one there ended.
    wait_until(lambda: len(open(again_pids).read().splitlines()) == 2, timeout=30,
               what="the requeued job's second run on c1", cluster=c)
    open(marker, "w").close()
    info = c.wait_job(requeued, timeout=30)
    assert info["result"] == "COMPLETED" and info.get("requeues", 0) == 1, info
    assert open(f"{out}/requeued").read() == "run 0\nrun 1\n"
    again = c.submit("-w", "c1", "-o", f"{out}/again", "hostname")
    assert c.wait_job(again)["result"] == "COMPLETED"
    assert open(f"{out}/again").read() == "c1\n"
    c.corral("cancel", kept)
    assert c.wait_job(kept)["result"] == "CANCELED"


def test_corrald_killed_and_restarted_while_jobs_run_on_every_host(net_cluster):
    c = net_cluster
    out = c.shared_dir()
    marker = os.path.join(out, "go")
    jobs = []
    for h in c.compute_names:
        jobs.append(c.submit("-w", h, "-o", f"{out}/{h}.out", "sh", "-c",
                             f"echo start $(hostname); while [ ! -e {marker} ]; do sleep 0.1; done; "
                             "echo end $(hostname)"))
    for j in jobs:
        c.wait_job(j, "RUN")
    wait_until(lambda: all(os.path.exists(f"{out}/{h}.out") and os.path.getsize(f"{out}/{h}.out")
                           for h in c.compute_names), what="every job to start", cluster=c)
    c.kill_controller(signal.SIGKILL)
    open(marker, "w").close()  # the jobs end while corrald is gone
    time.sleep(1)
    c.restart_controller()
    for j, h in zip(jobs, c.compute_names):
        info = c.wait_job(j, timeout=30)
        assert info["result"] == "COMPLETED", info
        assert open(f"{out}/{h}.out").read() == f"start {h}\nend {h}\n"
    # Nothing ran twice, nothing was lost: every job has one start and one finish.
    for j in jobs:
        names = [e["name"] for e in map(__import__("json").loads,
                                        c.corral("eventlog", j).stdout.splitlines())]
        assert names.count("start") == 1 and names.count("finish") == 1, names
    assert len(c.nodes()) == 4
    wait_until(lambda: all(n["state"] == "idle" for n in c.nodes()), what="every node idle", cluster=c)
