"""A hostile local user against real daemons: files named by users are never opened by
root, no daemon descriptor reaches a task, other users' job details are private, state
files are private, per-user limits hold, and hostile requests are refused (docs/admin.md,
"Security"). Users are real uids run through setpriv, as in test_permissions.py."""
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import binary
from test_slingshot import sim_cluster

ALICE, BOB = 12345, 12346


def refused(proc, *words):
    assert proc.returncode != 0, (proc.returncode, proc.stdout, proc.stderr)
    for w in words:
        assert w in proc.stderr, proc.stderr


def roots_file(cluster, name="roots-file", text="root's\n"):
    """A file root owns, 0644, in a directory users can reach but not write."""
    path = Path(cluster.dir) / name
    path.write_text(text)
    path.chmod(0o644)
    return path


def test_job_notes_are_never_written_as_root(make_cluster, tmp_path):
    # A NIC too small for the job makes the Slingshot hook add a note to the job's stderr.
    cluster = sim_cluster(make_cluster, tmp_path, sim_config="nics = 1\n[capacity]\nles = 8\n",
                          size=2, agents=1)
    victim = roots_file(cluster)
    out = cluster.shared_dir()
    job = cluster.submit("-N1", "-w", "node0", "-D", out, "-o", f"{out}/o-%j", "-e", str(victim),
                         "echo", "ran", user=ALICE)
    info = cluster.wait_job(job)
    # Alice may not open root's file, so her task cannot start; root never wrote to it.
    assert info["result"] == "FAILED", info
    assert victim.read_text() == "root's\n"
    st = victim.stat()
    assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o644, st

    # Her own error file gets the note, written as her.
    ok = cluster.submit("-N1", "-w", "node0", "-D", out, "-o", f"{out}/o-%j", "-e", f"{out}/e-%j",
                        "echo", "ran", user=ALICE)
    assert cluster.wait_job(ok)["result"] == "COMPLETED"
    err = out / f"e-{ok}"
    assert "corral: cray-slingshot: node0:" in err.read_text(), err.read_text()
    assert err.stat().st_uid == ALICE


@pytest.mark.cluster(size=1, agents=1)
def test_a_batch_scripts_directory_is_not_the_users(cluster):
    out = cluster.shared_dir()
    victim = roots_file(cluster)
    # The script tries to put a link in its own place; the directory is the agent's.
    script = ("#!/bin/sh\n"
              "d=$(dirname \"$0\")\n"
              "stat -c '%u %a' \"$d\"\n"
              f"ln -sf {victim} \"$d/swap\" 2>/dev/null && echo swapped || echo refused\n")
    sfile = out / "job.sh"
    sfile.write_text(script)
    sfile.chmod(0o644)
    proc = cluster.corral("batch", "-D", out, "-o", f"{out}/b-%j", str(sfile), user=ALICE)
    job = int(proc.stdout.split()[-1])
    assert cluster.wait_job(job)["result"] == "COMPLETED"
    owner, mode, verdict = (out / f"b-{job}").read_text().split()
    assert int(owner) != ALICE and mode == "711", (owner, mode)
    assert verdict == "refused"
    assert victim.stat().st_uid == 0


@pytest.mark.cluster(size=2, agents=1)
def test_no_daemon_descriptor_reaches_a_task(cluster):
    out = cluster.shared_dir()
    # The shell's descriptors: its standard streams and the PMI socket it was given
    # (PMI_FD), nothing of the agent's (its log file, its sockets).
    for user, tag in ((ALICE, "alice"), (None, "root")):
        job = cluster.submit("-D", out, "-o", f"{out}/fd-{tag}", "sh", "-c",
                             "echo $PMI_FD; for i in $(seq 0 1100); do "
                             "[ -e /proc/$$/fd/$i ] && echo $i $(readlink /proc/$$/fd/$i); done; true",
                             user=user)
        assert cluster.wait_job(job)["result"] == "COMPLETED"
        lines = [l for l in (out / f"fd-{tag}").read_text().split("\n") if l.strip()]
        pmi = int(lines[0])
        fds = sorted(int(l.split()[0]) for l in lines[1:])
        assert fds == sorted([0, 1, 2, pmi]), (tag, lines)


@pytest.mark.cluster(size=2, agents=1)
def test_other_users_job_details_are_private(cluster):
    out = cluster.shared_dir()
    env = dict(cluster.env, SECRET_TOKEN="hunter2")
    job = cluster.corral("submit", "-D", out, "-o", f"{out}/s-%j", "-J", "visible-name", "sh", "-c",
                         "echo secret-output; sleep 300", env=env, user=ALICE)
    jobid = int(job.stdout.split()[0])
    cluster.wait_job(jobid, "RUN")

    # Bob sees what squeue shows...
    mine = json.loads(cluster.corral("show", "job", jobid, "--json", user=ALICE).stdout)
    theirs = json.loads(cluster.corral("show", "job", jobid, "--json", user=BOB).stdout)
    assert theirs["name"] == "visible-name" and theirs["userid"] == ALICE, theirs
    assert theirs["state"] == "RUN" and theirs["nodelist"] == mine["nodelist"]
    # ...but not her environment, command, working directory or event details.
    assert "hunter2" in json.dumps(mine) and str(out) in json.dumps(mine)
    assert "hunter2" not in json.dumps(theirs) and str(out) not in json.dumps(theirs), theirs
    log = cluster.corral("eventlog", jobid, user=BOB).stdout
    events = [json.loads(l) for l in log.splitlines() if l.strip()]
    assert [e["name"] for e in events][:2] == ["submit", "validate"]
    assert all(e["context"] == {} for e in events), events
    queue = cluster.corral("queue", "--json", user=BOB).stdout
    assert str(jobid) in queue and str(out) not in queue
    # Root sees everything.
    assert "hunter2" in cluster.corral("show", "job", jobid, "--json").stdout
    cluster.corral("cancel", jobid)
    cluster.wait_job(jobid)
    theirs = json.loads(cluster.corral("show", "job", jobid, "--json", user=BOB).stdout)
    assert "hunter2" not in json.dumps(theirs)
    hist = cluster.corral("history", "--json", user=BOB).stdout
    assert "hunter2" not in hist and str(out) not in hist


@pytest.mark.cluster(size=2, agents=1, sets=("controller.private-data=[\"jobs\"]",))
def test_private_data_jobs_hides_other_users_jobs(cluster):
    out = cluster.shared_dir()
    jobid = cluster.submit("-D", out, "-o", f"{out}/p-%j", "sleep", "300", user=ALICE)
    cluster.wait_job(jobid, "RUN")
    assert str(jobid) in cluster.corral("queue", "--json", user=ALICE).stdout
    assert json.loads(cluster.corral("queue", "--json", user=BOB).stdout) == []
    refused(cluster.corral("show", "job", jobid, user=BOB, check=False), "belongs to another user")
    refused(cluster.corral("eventlog", jobid, user=BOB, check=False), "belongs to another user")
    assert str(jobid) in cluster.corral("queue", "--json").stdout  # root
    cluster.corral("cancel", jobid)


@pytest.mark.cluster(size=1, agents=1)
def test_state_files_are_private(cluster):
    state = Path(cluster.dir) / "state"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    for f in state.glob("corral.db*"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    assert stat.S_IMODE((Path(cluster.dir) / "corrald.log").stat().st_mode) & 0o077 == 0
    agent = Path(cluster.dir) / "agent-0"
    assert stat.S_IMODE(agent.stat().st_mode) == 0o711
    assert stat.S_IMODE((agent / "lock").stat().st_mode) == 0o600
    assert stat.S_IMODE((Path(cluster.dir) / "agent-0.log").stat().st_mode) & 0o077 == 0


@pytest.mark.cluster(size=2, agents=1, sets=("limits.max-submit-jobs=2",))
def test_a_user_cannot_pass_the_job_limit(cluster):
    out = cluster.shared_dir()
    a = [cluster.submit("-D", out, "-o", "/dev/null", "sleep", "300", user=ALICE) for _ in range(2)]
    proc = cluster.corral("submit", "-D", out, "-o", "/dev/null", "true", user=ALICE, check=False)
    refused(proc, "job limit reached", f"uid {ALICE} has 2 unfinished job(s)", "limits.max-submit-jobs")
    refused(cluster.corral("submit", "-D", out, "--cc", "1-3", "true", user=BOB, check=False),
            "limits.max-submit-jobs")
    cluster.submit("-D", out, "-o", "/dev/null", "true", user=BOB)  # Bob has his own count
    cluster.corral("cancel", a[0])
    cluster.wait_job(a[0])
    cluster.submit("-D", out, "-o", "/dev/null", "true", user=ALICE)
    cluster.corral("cancel", a[1])


@pytest.mark.cluster(size=1, agents=1, sets=("limits.submit-rate=0.5", "limits.submit-burst=2"))
def test_submission_rate_limit(cluster):
    out = cluster.shared_dir()
    for _ in range(2):
        cluster.submit("-D", out, "-o", "/dev/null", "true", user=ALICE)
    refused(cluster.corral("submit", "-D", out, "true", user=ALICE, check=False),
            "submission rate limit", "limits.submit-rate", "try again in")
    cluster.submit("-D", out, "-o", "/dev/null", "true", user=BOB)


@pytest.mark.cluster(size=1, agents=1, sets=("limits.max-batch-script=\"64KiB\"",))
def test_hostile_submissions_are_refused_and_change_nothing(cluster, tmp_path):
    big = tmp_path / "big.sh"
    big.write_text("#!/bin/sh\n" + "# padding\n" * 10000)
    refused(cluster.corral("batch", str(big), check=False), "more than the 65536 allowed",
            "limits.max-batch-script")
    deep = '{"version":1,"attributes":{"user":' + "[" * 50000 + "]" * 50000 + "}}"
    refused(cluster.corral("submit", "--jobspec", "-", input=deep, check=False),
            "nested more than 64 levels deep")
    bomb = "version: 1\na: &a [x,x,x,x,x,x,x,x,x]\n"
    for prev, cur in zip("abcdefghi", "bcdefghij"):
        bomb += f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]\n"
    refused(cluster.corral("submit", "--jobspec", "-", input=bomb, check=False, timeout=60),
            "more than 1000000 values")
    refused(cluster.corral("submit", "-w", "n[1-100000]", "true", check=False),
            "at most 65536 per range")
    assert cluster.jobs() == []
    assert cluster.controller.poll() is None  # still serving
    cluster.wait_nodes_up(1)


@pytest.mark.cluster(size=1, agents=1, cores=32)
def test_out_of_descriptors_launches_wait_instead_of_failing(cluster):
    # The agent may hold only 16 descriptors more than it has open now: 32 tasks at once
    # need more (PMI sockets, output files), so launches must wait for earlier tasks to
    # end rather than fail with 126.
    agent = cluster.agents[0].pid
    limit = len(os.listdir(f"/proc/{agent}/fd")) + 16
    subprocess.run(["prlimit", f"--pid={agent}", f"--nofile={limit}:{limit}"], check=True)
    out = cluster.shared_dir()
    ids = cluster.corral("submit", "--cc=1-96", "-D", out, "-o", "/dev/null", "sleep", "0.3").stdout.split()
    for j in ids:
        cluster.wait_job(int(j), timeout=120)
    jobs = [j for j in cluster.jobs() if str(j["id"]) in ids]
    failed = [j for j in jobs if j["result"] != "COMPLETED"]
    assert not failed, failed[:3]
    log = (Path(cluster.dir) / "agent-0.log").read_text()
    assert "task spawns wait for resources" in log, log[-2000:]


@pytest.mark.cluster(size=2, agents=1)
def test_a_task_that_cannot_start_says_where_and_why(cluster):
    out = cluster.shared_dir()
    job = cluster.submit("-N2", "-D", out, "-o", "/dev/null", "no-such-command-corral", user=ALICE)
    info = cluster.wait_job(job)
    assert info["result"] == "FAILED", info
    exc = [e["context"] for e in cluster.eventlog(job) if e["name"] == "exception"]
    assert exc and exc[0]["type"] == "exec", cluster.eventlog(job)
    assert "node" in exc[0]["note"] and "cannot execute 'no-such-command-corral'" in exc[0]["note"], exc


@pytest.mark.cluster(size=2, agents=1, sets=("limits.max-running-jobs=1",))
def test_a_user_runs_at_most_max_running_jobs(cluster):
    out = cluster.shared_dir()
    a = [cluster.submit("-D", out, "-o", "/dev/null", "sleep", "300", user=ALICE) for _ in range(3)]
    cluster.wait_job(a[0], "RUN")
    for j in a[1:]:
        info = cluster.job(j)
        assert info["state"] == "SCHED" and info["reason"] == "AssocMaxJobsLimit", info
    bob = cluster.submit("-D", out, "-o", "/dev/null", "sleep", "300", user=BOB)
    cluster.wait_job(bob, "RUN")  # the idle node is Bob's to use
    cluster.corral("cancel", a[0])
    cluster.wait_job(a[1], "RUN")
    assert cluster.job(a[2])["reason"] == "AssocMaxJobsLimit"
    cluster.corral("cancel", a[1], a[2], bob)


@pytest.mark.cluster(size=1, agents=1)
def test_tasks_run_under_the_submitters_limits_not_the_agents(cluster):
    out = cluster.shared_dir()
    corral = binary("corral")

    def submit_with(limit, *extra):
        cmd = ["setpriv", f"--reuid={ALICE}", f"--regid={ALICE}", "--clear-groups", "sh", "-c",
               f'ulimit -Sn {limit}; exec "$0" "$@"', corral, "submit", *extra, "-D", str(out),
               "-o", f"{out}/lim-%j", "sh", "-c", "ulimit -Sn"]
        proc = subprocess.run(cmd, env=cluster.env, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        return int(proc.stdout.split()[0])

    job = submit_with(200)
    assert cluster.wait_job(job)["result"] == "COMPLETED"
    assert (out / f"lim-{job}").read_text().strip() == "200"
    # Without propagation the task has what the agent gives it (here its raised limit).
    agent = int(Path(f"/proc/{cluster.agents[0].pid}/limits").read_text().split("Max open files")[1].split()[0])
    job = submit_with(200, "--propagate=NONE")
    assert cluster.wait_job(job)["result"] == "COMPLETED"
    assert (out / f"lim-{job}").read_text().strip() == str(agent)


def test_steps_run_under_the_limits_of_the_shell_that_starts_them(cluster):
    job = int(cluster.corral("batch", "--parsable", "-", input="#!/bin/sh\nexec sleep 300\n").stdout)
    cluster.wait_job(job, "RUN")

    def step_with(limit, *extra):
        cmd = ["sh", "-c", f'ulimit -Sn {limit}; exec "$0" "$@"', binary("corral"), "run",
               f"--jobid={job}", *extra, "sh", "-c", "ulimit -Sn"]
        proc = subprocess.run(cmd, env=cluster.env, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert step_with(300) == "300"
    assert step_with(300, "--propagate=NONE") != "300"
    cluster.corral("cancel", job)


@pytest.mark.cluster(size=2, agents=1)
def test_many_tasks_that_cannot_start_leave_the_controller_standing(cluster):
    # The exec exception is applied inside the exit report and may end and free the job
    # there and then: a use after free corrupted corrald's heap within a few such jobs.
    for i in range(40):
        proc = cluster.corral("run", "/no/such/program", check=False)
        assert proc.returncode == 127, (i, proc.stderr)
        assert cluster.controller.poll() is None, f"corrald died after {i + 1} jobs"
