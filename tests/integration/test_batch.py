"""Batch scripts (`corral batch` with #CORRAL directives) run once on the first node of
their allocation; mock execution (--test-run-duration) runs nothing; `submit --cc`
submits one job per id with {cc} substituted."""
import signal
import textwrap

import pytest

from conftest import event_names, submit_job


def batch(cluster, script_path, *args, cwd=None):
    proc = cluster.corral("batch", *args, script_path, cwd=cwd)
    words = proc.stdout.split()
    assert words[:3] == ["Submitted", "batch", "job"], proc.stdout
    return int(words[3])


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.cluster(size=3, cores=2)
def test_batch_script_runs_once_on_the_first_node(cluster, tmp_path):
    script = write(tmp_path / "job.sh", """\
        #!/bin/sh
        # an ordinary comment
        #CORRAL -N 2 -n 4
        #CORRAL --job-name=scripted -t 1m
        echo "node=$CORRAL_NODENAME nnodes=$CORRAL_NNODES list=$CORRAL_NODELIST rank=$CORRAL_TASK_RANK"
        echo "cwd=$(pwd)"
        echo ran >> runs.txt
        echo to-stderr >&2
        #CORRAL -N 3
        """)
    jobid = batch(cluster, script, cwd=tmp_path)
    job = cluster.wait_job(jobid)
    assert job["result"] == "COMPLETED" and job["waitstatus"] == 0, job
    assert job["name"] == "scripted" and job["duration"] == 60
    assert job["nnodes"] == 2 and job["ntasks"] == 4  # the directive after the command is ignored
    nodes = cluster.corral("hostlist", "expand", job["nodelist"]).stdout.split()
    assert len(nodes) == 2
    # Default output: corral-<id>.out in the submit directory, stdout and stderr together.
    out = (tmp_path / f"corral-{jobid}.out").read_text().splitlines()
    assert out == [f"node={nodes[0]} nnodes=2 list={job['nodelist']} rank=0",
                   f"cwd={tmp_path}", "to-stderr"]
    assert (tmp_path / "runs.txt").read_text() == "ran\n"  # once, not once per task
    assert event_names(cluster, jobid)[-1] == "clean"


@pytest.mark.cluster(size=2, cores=2)
def test_batch_from_stdin_exit_status_and_overrides(cluster, tmp_path):
    proc = cluster.corral("batch", "--parsable", "-D", tmp_path, "-",
                          input="#!/bin/bash\n#CORRAL -o from-directive.out\necho hi\nexit 5\n")
    jobid = int(proc.stdout.strip())
    assert cluster.corral("wait", jobid, check=False).returncode == 5
    job = cluster.job(jobid)
    assert job["result"] == "FAILED" and job["exit_code"] == 5 and job["name"] == "batch"
    assert (tmp_path / "from-directive.out").read_text() == "hi\n"

    # Options on the command line win over the directives.
    script = write(tmp_path / "over.sh", """\
        #!/bin/sh
        #CORRAL -o directive-%j.out -N 1
        echo "$CORRAL_NNODES"
        """)
    jobid = batch(cluster, script, "-o", tmp_path / "cmdline-%j.out", "-N", "2")
    assert cluster.wait_job(jobid)["result"] == "COMPLETED"
    assert (tmp_path / f"cmdline-{jobid}.out").read_text() == "2\n"
    assert not (tmp_path / f"directive-{jobid}.out").exists()

    # A script that is killed reports the signal like any job.
    script = write(tmp_path / "killed.sh", "#!/bin/sh\nkill -TERM $$\n")
    jobid = batch(cluster, script, "-o", "/dev/null")
    assert cluster.corral("wait", jobid, check=False).returncode == 128 + signal.SIGTERM


@pytest.mark.cluster(size=2, cores=2)
def test_mock_execution_runs_no_process(cluster, tmp_path):
    marker = tmp_path / "marker"
    jobid = submit_job(cluster, "--test-run-duration", "0.5s", "-N2", "-o", tmp_path / "out",
                       "touch", marker)
    job = cluster.wait_job(jobid)
    assert job["result"] == "COMPLETED" and job["waitstatus"] == 0, job
    assert job["nodelist"] == "node[0-1]"
    assert not marker.exists() and not (tmp_path / "out").exists()
    log = {ev["name"]: ev["timestamp"] for ev in cluster.eventlog(jobid)}
    assert 0.45 <= log["finish"] - log["start"] < 2.0, log
    assert event_names(cluster, jobid) == ["submit", "validate", "depend", "priority", "alloc",
                                           "start", "finish", "release", "free", "clean"]

    # A mock batch job doesn't run its script either.
    script = tmp_path / "mock.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    jobid = batch(cluster, script, "--test-run-duration", "0", "-o", "/dev/null")
    assert cluster.wait_job(jobid)["result"] == "COMPLETED"
    assert not marker.exists()

    # A mock job keeps its time limit.
    jobid = submit_job(cluster, "--test-run-duration", "60s", "-t", "1s", "-o", "/dev/null",
                       "true")
    job = cluster.wait_job(jobid, timeout=10)
    assert job["result"] == "TIMEOUT" and job["waitstatus"] == signal.SIGTERM, job

    # A mock job can be canceled while it "runs".
    jobid = submit_job(cluster, "--test-run-duration", "60s", "-o", "/dev/null", "true")
    cluster.wait_job(jobid, "RUN")
    cluster.corral("cancel", jobid)
    job = cluster.wait_job(jobid, timeout=10)
    assert job["result"] == "CANCELED" and job["exception_type"] == "cancel", job


@pytest.mark.cluster(size=4, cores=4)
def test_cc_submits_one_job_per_id(cluster, tmp_path):
    proc = cluster.corral("submit", "--cc=1-20", "-J", "copy-{cc}", "-o",
                          tmp_path / "out-{cc}.txt", "sh", "-c", "echo copy {cc} of 20")
    ids = [int(w) for w in proc.stdout.split()]
    assert len(ids) == 20 and ids == list(range(ids[0], ids[0] + 20))
    for i, jobid in enumerate(ids, start=1):
        job = cluster.wait_job(jobid)
        assert job["result"] == "COMPLETED", job
        assert job["name"] == f"copy-{i}"
        assert job["jobspec"]["tasks"][0]["command"] == ["sh", "-c", f"echo copy {i} of 20"]
        assert (tmp_path / f"out-{i}.txt").read_text() == f"copy {i} of 20\n"
    names = [j["name"] for j in cluster.jobs()]
    assert sorted(names) == sorted(f"copy-{i}" for i in range(1, 21))

    # Without {cc} every copy is the same job.
    proc = cluster.corral("submit", "--cc=3,5", "-o", "/dev/null", "--test-run-duration",
                          "0", "true")
    ids = [int(w) for w in proc.stdout.split()]
    assert len(ids) == 2
    for jobid in ids:
        assert cluster.wait_job(jobid)["result"] == "COMPLETED"
