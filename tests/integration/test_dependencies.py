"""Job dependencies on a real cluster: afterok, afternotok, afterany, after, begin times
(--begin and begin-time:), what `queue --json` says while a job waits, and the exception a
dependency that can never be satisfied raises."""
import json
import time

import pytest

from conftest import event_names, submit_job

QUIET = ("-o", "/dev/null")


def submit(cluster, *args):
    return submit_job(cluster, *QUIET, *args)


def first_event(cluster, jobid, name):
    for ev in cluster.eventlog(jobid):
        if ev["name"] == name:
            return ev
    return None


def gated(gate, code=0):
    """A command that runs until `gate` exists, then exits with `code`: the test decides
    when the job ends."""
    return ("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done; exit {code}")


def queue_entry(cluster, jobid):
    for j in json.loads(cluster.corral("queue", "--json").stdout):
        if j["id"] == jobid:
            return j
    return None


def assert_ran(cluster, jobid):
    job = cluster.wait_job(jobid)
    assert job["result"] == "COMPLETED" and job["exception_type"] == "", job
    return job


def assert_never_satisfied(cluster, jobid, dep):
    job = cluster.wait_job(jobid)
    assert job["exception_type"] == "dependency", job
    assert "can never be satisfied" in job["exception_note"], job
    assert dep in job["exception_note"], job
    assert job["result"] == "FAILED" and job["waitstatus"] == -1, job
    names = event_names(cluster, jobid)
    assert "alloc" not in names and "start" not in names, names
    return job


@pytest.mark.cluster(size=1, cores=4)
def test_afterok_waits_for_success(cluster, tmp_path):
    gate = tmp_path / "go"
    a = submit(cluster, *gated(gate))
    b = submit(cluster, "-d", f"afterok:{a}", "true")
    cluster.wait_job(a, "RUN")
    time.sleep(0.2)
    entry = queue_entry(cluster, b)
    assert entry["state"] == "DEPEND" and entry["reason"] == "Dependency", entry
    assert entry["dependencies"] == [f"afterok:{a}"]
    assert "(Dependency)" in cluster.corral("queue").stdout
    gate.touch()
    assert_ran(cluster, b)
    # b started only after a finished.
    assert first_event(cluster, b, "start")["timestamp"] >= \
        first_event(cluster, a, "finish")["timestamp"]
    names = event_names(cluster, b)
    assert names.index("dependency-add") < names.index("dependency-remove") < \
        names.index("depend") < names.index("alloc")
    dep = first_event(cluster, b, "dependency-add")
    assert dep["context"]["description"] == f"afterok:{a}"


@pytest.mark.cluster(size=1, cores=4)
def test_afterok_on_a_failed_job_raises(cluster, tmp_path):
    gate = tmp_path / "go"
    a = submit(cluster, *gated(gate, 3))
    b = submit(cluster, "-d", f"afterok:{a}", "true")
    time.sleep(0.2)
    assert cluster.job(b)["state"] == "DEPEND"
    gate.touch()
    assert_never_satisfied(cluster, b, f"afterok:{a}")
    assert cluster.job(a)["result"] == "FAILED"
    proc = cluster.corral("wait", b, check=False)
    assert proc.returncode == 1 and "can never be satisfied" in proc.stderr
    # Against a job that has already ended, the answer is immediate.
    c = submit(cluster, "-d", f"afterok:{a}", "true")
    assert_never_satisfied(cluster, c, f"afterok:{a}")
    ok = submit(cluster, "true")
    cluster.wait_job(ok)
    assert_ran(cluster, submit(cluster, "-d", f"afterok:{ok}", "true"))


@pytest.mark.cluster(size=1, cores=4)
def test_afternotok(cluster, tmp_path):
    gate = tmp_path / "go"
    bad = submit(cluster, *gated(gate, 1))
    good = submit(cluster, *gated(gate, 0))
    runs = submit(cluster, "-d", f"afternotok:{bad}", "true")
    never = submit(cluster, "-d", f"afternotok:{good}", "true")
    assert queue_entry(cluster, runs)["reason"] == "Dependency"
    assert queue_entry(cluster, never)["reason"] == "Dependency"
    gate.touch()
    assert_ran(cluster, runs)
    assert_never_satisfied(cluster, never, f"afternotok:{good}")
    # A canceled job did not succeed either.
    held = submit(cluster, "--urgency", "0", "true")
    after_cancel = submit(cluster, "-d", f"afternotok:{held}", "true")
    cluster.corral("cancel", held)
    assert_ran(cluster, after_cancel)
    # Already ended: decided at once.
    assert_ran(cluster, submit(cluster, "-d", f"afternotok:{bad}", "true"))
    assert_never_satisfied(cluster, submit(cluster, "-d", f"afternotok:{good}", "true"),
                           f"afternotok:{good}")


@pytest.mark.cluster(size=1, cores=4)
def test_afterany(cluster, tmp_path):
    gate = tmp_path / "go"
    bad = submit(cluster, *gated(gate, 2))
    good = submit(cluster, *gated(gate, 0))
    held = submit(cluster, "--urgency", "0", "true")
    jobs = [submit(cluster, "-d", f"afterany:{t}", "true") for t in (bad, good, held)]
    both = submit(cluster, "-d", f"afterany:{bad}:{good}", "true")
    for j in jobs + [both]:
        assert queue_entry(cluster, j)["reason"] == "Dependency"
    cluster.corral("cancel", held)
    assert_ran(cluster, jobs[2])
    time.sleep(0.2)
    for j in jobs[:2] + [both]:
        assert cluster.job(j)["state"] == "DEPEND"
    gate.touch()
    for j in jobs + [both]:
        assert_ran(cluster, j)


@pytest.mark.cluster(size=1, cores=4)
def test_after_waits_for_the_start_only(cluster):
    a = submit(cluster, "--urgency", "0", "sleep", "30")  # held: it hasn't started
    b = submit(cluster, "-d", f"after:{a}", "true")
    time.sleep(0.3)
    assert queue_entry(cluster, b)["reason"] == "Dependency"
    assert cluster.job(b)["state"] == "DEPEND"
    cluster.corral("cancel", a)
    # a ended without ever starting: `after` can never be satisfied.
    assert_never_satisfied(cluster, b, f"after:{a}")

    a = submit(cluster, "sleep", "30")
    b = submit(cluster, "-d", f"after:{a}", "true")
    assert_ran(cluster, b)
    assert cluster.job(a)["state"] == "RUN"  # b did not wait for a to end
    cluster.corral("cancel", a)


@pytest.mark.cluster(size=1, cores=4)
def test_several_dependencies_all_hold(cluster, tmp_path):
    a = submit(cluster, *gated(tmp_path / "a"))
    b = submit(cluster, *gated(tmp_path / "b", 4))
    c = submit(cluster, "-d", f"afterok:{a},afterany:{b}", "true")
    entry = queue_entry(cluster, c)
    assert sorted(entry["dependencies"]) == sorted([f"afterok:{a}", f"afterany:{b}"])
    (tmp_path / "a").touch()
    cluster.wait_job(a)
    time.sleep(0.2)
    assert cluster.job(c)["state"] == "DEPEND"  # b still runs
    (tmp_path / "b").touch()
    assert_ran(cluster, c)
    assert first_event(cluster, c, "start")["timestamp"] >= \
        first_event(cluster, b, "finish")["timestamp"]


@pytest.mark.cluster(size=1, cores=4)
def test_begin_time(cluster):
    submitted = time.time()
    later = submit(cluster, "--begin", "now+2", "true")
    epoch = submit(cluster, "-d", f"begin-time:{submitted + 2:.3f}", "true")
    past = submit(cluster, "--begin", "now", "true")
    for j in (later, epoch):
        entry = queue_entry(cluster, j)
        assert entry is not None and entry["state"] == "DEPEND", entry
        assert entry["reason"] == "BeginTime", entry
    assert "(BeginTime)" in cluster.corral("queue").stdout
    assert_ran(cluster, past)
    for j in (later, epoch):
        assert_ran(cluster, j)
        start = first_event(cluster, j, "alloc")["timestamp"]
        assert start >= submitted + 1.9, (j, start - submitted)
    assert cluster.job(past)["t_run"] < submitted + 1.5


@pytest.mark.cluster(size=1, cores=2)
def test_dependency_on_unknown_job_is_refused(cluster):
    proc = cluster.corral("submit", "-d", "afterok:4242", "true", check=False)
    assert proc.returncode != 0
    assert "4242" in proc.stderr and "does not exist" in proc.stderr, proc.stderr
    assert json.loads(cluster.corral("queue", "--all", "--json").stdout) == []
