"""Who may do what: a user cannot cancel or signal another user's job (the owner and root
can), tasks run as the submitting uid, and only root drains and resumes nodes."""
import os

import pytest

ALICE, BOB = 12345, 12346


def submit_as(cluster, uid, out, *command, extra=()):
    return cluster.submit("-D", out, "-o", f"{out}/%u-%j.out", *extra, *command, user=uid)


def refused(proc, *words):
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    for w in words:
        assert w in proc.stderr, proc.stderr


@pytest.mark.cluster(size=2, agents=1)
def test_only_the_owner_or_root_cancels_a_job(cluster):
    out = cluster.shared_dir()
    job = submit_as(cluster, ALICE, out, "sleep", "300")
    other = submit_as(cluster, ALICE, out, "sleep", "300")
    info = cluster.wait_job(job, "RUN")
    assert info["userid"] == ALICE, info
    cluster.wait_job(other, "RUN")

    # Bob may not cancel or signal Alice's job, by id or by selecting her jobs.
    proc = cluster.corral("cancel", job, user=BOB, check=False)
    refused(proc, f"job {job}", "permission denied", "belongs to")
    proc = cluster.corral("cancel", "-s", "KILL", job, user=BOB, check=False)
    refused(proc, f"job {job}", "permission denied")
    proc = cluster.corral("cancel", "-u", str(ALICE), user=BOB, check=False)
    refused(proc, "permission denied")
    for j in (job, other):
        j_info = cluster.job(j)
        assert j_info["state"] == "RUN" and j_info["exception_type"] == "", j_info
    assert not any(e["name"] == "exception" for e in cluster.eventlog(job))

    # Alice may cancel her own job; root may cancel anyone's.
    cluster.corral("cancel", job, user=ALICE)
    info = cluster.wait_job(job)
    assert info["result"] == "CANCELED", info
    assert cluster.job(other)["state"] == "RUN"
    cluster.corral("cancel", other)
    assert cluster.wait_job(other)["result"] == "CANCELED"

    # Bob's own job is his to cancel, not Alice's.
    bobs = submit_as(cluster, BOB, out, "sleep", "300")
    cluster.wait_job(bobs, "RUN")
    refused(cluster.corral("cancel", bobs, user=ALICE, check=False), "permission denied")
    cluster.corral("cancel", bobs, user=BOB)
    assert cluster.wait_job(bobs)["result"] == "CANCELED"


@pytest.mark.cluster(size=2, agents=2)
def test_tasks_run_as_the_submitting_user(cluster):
    out = cluster.shared_dir()
    alice = submit_as(cluster, ALICE, out, "sh", "-c", "id -u; id -g; touch made-by-task",
                      extra=("-w", "node0"))
    bob = submit_as(cluster, BOB, out, "id", "-u", extra=("-w", "node1"))
    root = cluster.submit("-D", out, "-o", f"{out}/root-%j.out", "id", "-u")
    for j in (alice, bob, root):
        info = cluster.wait_job(j)
        assert info["result"] == "COMPLETED", info
    assert (out / f"{ALICE}-{alice}.out").read_text().split() == [str(ALICE), str(ALICE)]
    assert (out / f"{BOB}-{bob}.out").read_text().split() == [str(BOB)]
    assert (out / f"root-{root}.out").read_text().split() == ["0"]
    # Files the task creates belong to the user, as does its output.
    assert os.stat(out / "made-by-task").st_uid == ALICE
    assert os.stat(out / f"{ALICE}-{alice}.out").st_uid == ALICE
    assert cluster.job(alice)["userid"] == ALICE


@pytest.mark.cluster(size=2, agents=2)
def test_a_task_cannot_write_where_its_user_cannot(cluster):
    # Root's 0755 cluster directory is not writable by Alice's task.
    out = cluster.shared_dir()
    job = cluster.submit("-D", out, "-o", f"{out}/o-%j", "sh", "-c",
                         f"touch {cluster.dir}/forbidden", user=ALICE)
    info = cluster.wait_job(job)
    assert info["result"] == "FAILED", info
    assert not os.path.exists(os.path.join(cluster.dir, "forbidden"))


@pytest.mark.cluster(size=2, agents=2)
def test_only_root_drains_and_resumes(cluster):
    proc = cluster.corral("drain", "node0", "--reason", "mine now", user=ALICE, check=False)
    refused(proc, "corral drain:", "only root", "may drain nodes")
    assert cluster.node("node0")["state"] == "idle"

    cluster.corral("drain", "node1", "--reason", "maintenance")
    proc = cluster.corral("resume", "node1", user=ALICE, check=False)
    refused(proc, "corral resume:", "only root", "may resume nodes")
    node = cluster.node("node1")
    assert node["state"] == "drained" and node["reason"] == "maintenance", node

    # Anyone may look; root resumes.
    nodes = cluster.corral("nodes", "--json", user=ALICE)
    assert '"drained"' in nodes.stdout
    cluster.corral("resume", "node1")
    assert cluster.node("node1")["state"] == "idle"


@pytest.mark.cluster(size=1, agents=1)
def test_only_root_raises_urgency(cluster):
    out = cluster.shared_dir()
    proc = cluster.corral("submit", "-D", out, "--urgency", "20", "true", user=ALICE,
                          check=False)
    refused(proc, "urgency")
    assert cluster.jobs() == []
    job = submit_as(cluster, ALICE, out, "true", extra=("--urgency", "10"))
    assert cluster.wait_job(job)["urgency"] == 10
