"""The controller cut off from every agent for a minute (the login host still reaches
it): running jobs go on, their output and exits arrive when the link returns, nothing is
lost or run twice, and no node is marked down although each agent is silent for twenty
times the node timeout."""
import json
import os
import time

from netcluster import NetCluster, requires_hosts, wait_until

pytestmark = requires_hosts
CUT_SECONDS = int(os.environ.get("CUT_SECONDS", 60))


def test_a_minute_without_the_controller(tmp_path):
    c = NetCluster(node_timeout="3s")
    try:
        c.start()
        shared = c.shared_dir()
        cut_marker = os.path.join(shared, "cut")
        # An attached job: its output reaches `corral run` on the login host through corrald.
        run = c.corral_bg("run", "-N4", "-n4", "sh", "-c",
                          f"echo before $(hostname); while [ ! -e {cut_marker} ]; do sleep 0.2; done; "
                          "sleep 20; echo during $(hostname); exit 3")
        wait_until(lambda: c.jobs_in("RUN"), what="the attached job to run", cluster=c)
        # A job that outlives the cut, counting seconds into a file on its host.
        ticks = os.path.join(shared, "ticks")
        long = c.submit("-w", "c2", "-o", f"{shared}/long.out", "sh", "-c",
                        f"while true; do date +%s >> {ticks}; sleep 1; done")
        c.wait_job(long, "RUN")
        wait_until(lambda: os.path.exists(ticks), what="the long job to tick", cluster=c)
        attached = c.jobs_in("RUN")[0]["id"] if c.jobs_in("RUN")[0]["id"] != long else c.jobs_in("RUN")[1]["id"]

        computes = [c.host(n) for n in c.compute_names]
        c.host("ctl").cut_from(computes)
        t0 = time.monotonic()
        open(cut_marker, "w").close()
        ticks_at_cut = len(open(ticks).read().split())
        while time.monotonic() - t0 < CUT_SECONDS:
            nodes = c.nodes()  # the login host still reaches corrald
            assert nodes and not any(n["state"].startswith("down") for n in nodes), nodes
            time.sleep(5)
        assert "looks cut off from the cluster" in c.log("corrald.log")
        # The agents noticed, and kept what the tasks printed meanwhile.
        assert len(open(ticks).read().split()) >= ticks_at_cut + CUT_SECONDS - 5  # it ran on
        c.host("ctl").rejoin(computes)

        out, err = run.communicate(timeout=90)
        assert "piece(s) of task output kept while it could not reach us" in c.log("corrald.log")
        assert run.returncode == 3, (out, err, c.logs())
        lines = sorted(out.split("\n")[:-1])
        assert lines == sorted([f"before c{i}" for i in range(1, 5)] + [f"during c{i}" for i in range(1, 5)]), \
            (out, err)
        info = c.job(attached)
        assert info["result"] == "FAILED" and info["exit_code"] == 3, info
        events = [json.loads(x)["name"] for x in c.corral("eventlog", attached).stdout.splitlines()]
        assert events.count("start") == 1 and events.count("finish") == 1, events
        assert c.job(long)["state"] == "RUN"
        assert not any(n["state"].startswith("down") for n in c.nodes())
        c.corral("cancel", long)
        assert c.wait_job(long)["result"] == "CANCELED"
    finally:
        c.stop()
