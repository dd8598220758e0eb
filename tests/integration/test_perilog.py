"""Prolog, epilog and housekeeping scripts: a failing (or hanging) prolog fails the job and
drains the node; the epilog runs after the tasks and its failure drains the node;
housekeeping runs after the job without holding it, and keeps its node out of scheduling
until it finishes."""
import os
import textwrap
import time

import pytest

from conftest import wait_until


def write_script(path, body):
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    os.chmod(path, 0o755)
    return path


def events(cluster, jobid):
    return [e["name"] for e in cluster.eventlog(jobid)]


def exceptions(cluster, jobid):
    return [e["context"] for e in cluster.eventlog(jobid) if e["name"] == "exception"]


def drained_with(cluster, name, *words, timeout=20):
    """Waits until the node is drained with a reason containing every word."""
    return cluster.wait_node(
        name, lambda n: "drain" in n["state"] and all(w in n["reason"] for w in words),
        timeout=timeout, what=f"{name} to be drained with a reason naming {words}")


def test_prolog_failure_and_timeout_fail_the_job_and_drain_the_node(make_cluster, tmp_path):
    log = tmp_path / "prolog.log"
    prolog = write_script(tmp_path / "prolog.sh", f"""\
        echo "$CORRAL_JOBID $CORRAL_NODENAME $CORRAL_PERILOG" >> {log}
        case "$CORRAL_NODENAME" in
          node1) echo "disk check failed on $CORRAL_NODENAME"; exit 3 ;;
          node2) sleep 60 ;;
        esac
        exit 0
        """)
    config = tmp_path / "corral.toml"
    config.write_text(f'[job]\nprolog = "{prolog}"\nprolog-timeout = "2s"\n')
    cluster = make_cluster(size=4, config=config)
    out = cluster.shared_dir()

    # A prolog that passes: the job runs normally.
    good = cluster.submit("-w", "node0", "-o", f"{out}/good-%j", "echo", "ran")
    info = cluster.wait_job(good)
    assert info["result"] == "COMPLETED", info
    assert (out / f"good-{good}").read_text() == "ran\n"
    assert f"{good} node0 prolog" in log.read_text()

    # A prolog that exits 3: fatal `prolog` exception, the task never starts.
    bad = cluster.submit("-w", "node1", "-o", f"{out}/bad-%j", "echo", "must not run")
    info = cluster.wait_job(bad)
    assert info["result"] != "COMPLETED", info
    assert info["exception_type"] == "prolog", info
    assert "exit 3" in info["exception_note"], info
    assert "disk check failed on node1" in info["exception_note"], info
    assert "start" not in events(cluster, bad)
    assert [e["severity"] for e in exceptions(cluster, bad)] == [0]
    assert not (out / f"bad-{bad}").exists()
    node = drained_with(cluster, "node1", "prolog", str(bad))
    assert "exit 3" in node["reason"], node

    # A prolog that hangs past job.prolog-timeout fails the same way.
    t0 = time.monotonic()
    hung = cluster.submit("-w", "node2", "-o", f"{out}/hung-%j", "echo", "must not run")
    info = cluster.wait_job(hung, timeout=20)
    assert time.monotonic() - t0 < 15, "the prolog timeout was not enforced promptly"
    assert info["exception_type"] == "prolog", info
    assert "timed out" in info["exception_note"], info
    assert "start" not in events(cluster, hung)
    assert not (out / f"hung-{hung}").exists()
    drained_with(cluster, "node2", "prolog", str(hung), "timed out")

    # The scheduler avoids the drained nodes; the others stay in service.
    states = {n["name"]: n["state"] for n in cluster.nodes()}
    assert states["node0"] == "idle" and states["node3"] == "idle", states
    both = cluster.submit("-N2", "-o", f"{out}/both-%j", "true")
    info = cluster.wait_job(both)
    assert info["result"] == "COMPLETED", info
    assert info["nodelist"] == "node[0,3]", info


def test_epilog_runs_after_the_job_and_its_failure_drains_the_node(cluster_with_epilog):
    cluster, out = cluster_with_epilog
    task = f'sleep 0.5; touch {out}/done-$CORRAL_JOBID-$CORRAL_NODENAME'

    ok = cluster.submit("-N2", "-w", "node[0-1]", "-o", f"{out}/ok-%j", "sh", "-c", task)
    info = cluster.wait_job(ok)
    assert info["result"] == "COMPLETED", info
    lines = sorted(l for l in (out / "epilog.log").read_text().splitlines()
                   if l.startswith(f"{ok} "))
    # The epilog ran once per node, and each time the node's tasks had already finished.
    assert lines == [f"{ok} node0 after", f"{ok} node1 after"], lines
    names = events(cluster, ok)
    assert names.index("finish") < names.index("epilog-start") < names.index("epilog-finish")
    assert names.index("epilog-finish") < names.index("free")
    assert exceptions(cluster, ok) == []
    for name in ("node0", "node1"):
        assert cluster.node(name)["state"] == "idle"

    bad = cluster.submit("-w", "node3", "-o", f"{out}/bad-%j", "sh", "-c", task)
    info = cluster.wait_job(bad)
    assert (out / f"done-{bad}-node3").exists(), "the job's task should have run"
    assert f"{bad} node3 after" in (out / "epilog.log").read_text()
    excs = exceptions(cluster, bad)
    assert [e["type"] for e in excs] == ["epilog"], excs
    assert "scrub failed" in excs[0]["note"], excs
    node = drained_with(cluster, "node3", "epilog", str(bad))
    assert "exit 4" in node["reason"], node

    # node3 is out of service; the next 3-node job uses the others.
    nxt = cluster.submit("-N3", "-o", f"{out}/next-%j", "true")
    assert cluster.wait_job(nxt)["nodelist"] == "node[0-2]"


@pytest.fixture
def cluster_with_epilog(make_cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    epilog = write_script(tmp_path / "epilog.sh", f"""\
        if [ -e {out}/done-$CORRAL_JOBID-$CORRAL_NODENAME ]; then when=after; else when=before; fi
        echo "$CORRAL_JOBID $CORRAL_NODENAME $when" >> {out}/epilog.log
        if [ "$CORRAL_NODENAME" = node3 ]; then echo "scrub failed"; exit 4; fi
        exit 0
        """)
    # The epilog comes from --set this time (the prolog test uses a config file).
    cluster = make_cluster(size=4, sets=[f"job.epilog={epilog}", "job.epilog-timeout=20s"])
    return cluster, out


def test_housekeeping_runs_after_the_job_without_holding_it(make_cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    release = out / "release"
    hk = write_script(tmp_path / "housekeeping.sh", f"""\
        echo "$CORRAL_JOBID" >> {out}/hk-$CORRAL_NODENAME
        while [ ! -e {release} ]; do sleep 0.1; done
        if [ "$CORRAL_NODENAME" = node1 ]; then echo "memory leak"; exit 5; fi
        exit 0
        """)
    cluster = make_cluster(size=2, sets=[f"job.housekeeping={hk}"])

    first = cluster.submit("-w", "node0", "-o", f"{out}/first-%j", "true")
    # The job completes while housekeeping still runs on its node.
    info = cluster.wait_job(first)
    assert info["result"] == "COMPLETED", info
    wait_until(lambda: (out / "hk-node0").exists(), timeout=10, what="housekeeping to start",
               cluster=cluster)
    node = cluster.node("node0")
    assert node["housekeeping"] is True, node
    assert first not in node["jobs"], node
    assert cluster.job(first)["state"] == "INACTIVE"

    # The node takes no new work until housekeeping finishes.
    second = cluster.submit("-w", "node0", "-o", f"{out}/second-%j", "true")
    time.sleep(1.5)
    assert cluster.job(second)["state"] == "SCHED", cluster.job(second)
    assert cluster.node("node0")["housekeeping"] is True

    release.touch()
    assert cluster.wait_job(second)["result"] == "COMPLETED"
    cluster.wait_node("node0", lambda n: n["state"] == "idle" and not n["housekeeping"],
                      what="node0 to return to service after housekeeping")
    assert (out / "hk-node0").read_text().split() == [str(first), str(second)]

    # Failing housekeeping drains its node (the job itself is not blamed).
    third = cluster.submit("-w", "node1", "-o", f"{out}/third-%j", "true")
    assert cluster.wait_job(third)["result"] == "COMPLETED"
    node = drained_with(cluster, "node1", "housekeeping", str(third))
    assert not node["housekeeping"], node
    assert exceptions(cluster, third) == []


def test_controller_restart_during_prolog_and_epilog(make_cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    script = write_script(tmp_path / "perilog.sh", f"""\
        echo "$CORRAL_JOBID start" >> {out}/$CORRAL_PERILOG.log
        sleep 2
        echo "$CORRAL_JOBID end" >> {out}/$CORRAL_PERILOG.log
        """)
    cluster = make_cluster(size=2, sets=[f"job.prolog={script}", f"job.epilog={script}",
                                         "job.prolog-timeout=30s", "job.epilog-timeout=30s"])
    task = f"echo $$ >> {out}/pids-$CORRAL_JOBID"

    # corrald dies while the prolog runs: after the restart the job still runs, once.
    job = cluster.submit("-w", "node0", "-o", f"{out}/o-%j", "sh", "-c", task)
    wait_until(lambda: (out / "prolog.log").exists(), timeout=10, what="the prolog to start",
               cluster=cluster)
    cluster.kill_controller()
    cluster.restart_controller()
    info = cluster.wait_job(job, timeout=30)
    assert info["result"] == "COMPLETED", info
    assert len((out / f"pids-{job}").read_text().split()) == 1
    assert f"{job} end" in (out / "prolog.log").read_text()
    assert f"{job} end" in (out / "epilog.log").read_text()

    # corrald dies while the epilog runs: the job still finishes and frees its node.
    job = cluster.submit("-w", "node1", "-o", f"{out}/o-%j", "sh", "-c", task)
    wait_until(lambda: f"{job} start" in (out / "epilog.log").read_text(), timeout=20,
               what="the epilog to start", cluster=cluster)
    cluster.kill_controller()
    cluster.restart_controller()
    info = cluster.wait_job(job, timeout=30)
    assert info["result"] == "COMPLETED", info
    assert [e["type"] for e in exceptions(cluster, job)] == []
    cluster.wait_node("node1", lambda n: n["state"] == "idle", what="node1 to be idle")
    assert all("drain" not in n["state"] for n in cluster.nodes()), cluster.nodes()


def test_housekeeping_survives_a_controller_restart(make_cluster, tmp_path):
    release = tmp_path / "release"
    hk = write_script(tmp_path / "housekeeping.sh", f"""\
        while [ ! -e {release} ]; do sleep 0.1; done
        exit 5
        """)
    cluster = make_cluster(size=1, sets=[f"job.housekeeping={hk}"])
    job = cluster.submit("-o", "/dev/null", "true")
    cluster.wait_job(job)
    assert cluster.node("node0")["housekeeping"] is True
    cluster.kill_controller()
    cluster.restart_controller()
    cluster.wait_nodes_up(1)
    try:
        # Still in housekeeping: no new work on the node.
        assert cluster.node("node0")["housekeeping"] is True, cluster.node("node0")
    finally:
        release.touch()
    drained_with(cluster, "node0", "housekeeping", str(job), timeout=10)


def test_housekeeping_of_two_jobs_holds_the_node_until_both_end(make_cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    go = out / "go"
    hk = write_script(tmp_path / "housekeeping.sh", f"""\
        while [ ! -e {out}/release-$CORRAL_JOBID ]; do sleep 0.1; done
        touch {out}/done-$CORRAL_JOBID
        """)
    cluster = make_cluster(size=1, sets=[f"job.housekeeping={hk}"])
    task = f"while [ ! -e {go} ]; do sleep 0.1; done"
    first = cluster.submit("-o", "/dev/null", "sh", "-c", task)
    second = cluster.submit("-o", "/dev/null", "sh", "-c", task)
    for job in (first, second):
        cluster.wait_job(job, states=("RUN",))
    go.touch()
    cluster.wait_job(first)
    cluster.wait_job(second)
    assert cluster.node("node0")["housekeeping"] is True

    # The first housekeeping to end does not return the node while the other runs.
    (out / f"release-{first}").touch()
    wait_until(lambda: (out / f"done-{first}").exists(), timeout=10,
               what="the first housekeeping to end", cluster=cluster)
    third = cluster.submit("-o", "/dev/null", "true")
    time.sleep(1.5)
    assert cluster.job(third)["state"] == "SCHED", cluster.job(third)
    assert cluster.node("node0")["housekeeping"] is True

    (out / f"release-{second}").touch()
    assert cluster.wait_job(third)["result"] == "COMPLETED"


def test_housekeeping_that_fails_while_the_controller_is_down_drains_the_node(
        make_cluster, tmp_path):
    release = tmp_path / "release"
    done = tmp_path / "done"
    hk = write_script(tmp_path / "housekeeping.sh", f"""\
        while [ ! -e {release} ]; do sleep 0.1; done
        touch {done}
        exit 6
        """)
    cluster = make_cluster(size=1, sets=[f"job.housekeeping={hk}"])
    job = cluster.submit("-o", "/dev/null", "true")
    cluster.wait_job(job)
    assert cluster.node("node0")["housekeeping"] is True
    cluster.kill_controller()
    time.sleep(0.5)  # the agent notices the lost stream
    release.touch()
    wait_until(done.exists, timeout=10, what="housekeeping to end")
    time.sleep(0.5)
    cluster.restart_controller()
    cluster.wait_nodes_up(1)
    node = drained_with(cluster, "node0", "housekeeping", str(job), timeout=10)
    assert not node["housekeeping"], node
