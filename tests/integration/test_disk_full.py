"""A full state directory (a small tmpfs): a submission whose commit fails is refused and
nothing of it runs, running jobs are not lost, corrald keeps answering and says why, and
it recovers by itself when space returns, with memory and disk agreeing after a restart.
Needs root (mount)."""
import os
import shutil
import subprocess

import pytest

from conftest import Cluster, wait_until

# A script big enough that SQLite's write-ahead log must grow to hold it.
BIG_SCRIPT = "#!/bin/sh\necho never\n" + ("# padding to make the jobspec large\n" * 60000)


def fill(path):
    """Writes until the filesystem is full."""
    block = b"x" * 65536
    with open(path, "wb") as f:
        try:
            while True:
                f.write(block)
                f.flush()
        except OSError:
            pass


@pytest.fixture
def small_state_cluster():
    if os.geteuid() != 0:
        pytest.skip("needs root (mounts a tmpfs)")
    c = Cluster(size=1, cores=2)
    state = os.path.join(c.dir, "state")
    os.mkdir(state)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", state]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        c.start()
        yield c
    finally:
        c.stop()  # cannot remove the mount point: the directory goes after the umount
        subprocess.run(["umount", "-l", state])
        shutil.rmtree(c.dir, ignore_errors=True)


def test_disk_full_refuses_submissions_keeps_running_jobs_and_recovers(small_state_cluster):
    c = small_state_cluster
    go = os.path.join(c.dir, "go")
    running = int(c.corral("batch", "--parsable", "-", input=(
        f"#!/bin/sh\nwhile [ ! -e {go} ]; do sleep 0.05; done\necho done\n")).stdout)
    c.wait_job(running, "RUN")
    filler = os.path.join(c.dir, "state", "filler")
    fill(filler)

    refused = c.corral("batch", "--parsable", "-", input=BIG_SCRIPT, check=False)
    assert refused.returncode != 0
    assert "could not save the job" in refused.stderr or "cannot save new jobs" in refused.stderr, \
        refused.stderr
    assert "full" in refused.stderr, refused.stderr
    small = c.corral("batch", "--parsable", "-", input="#!/bin/sh\necho hi\n", check=False)
    assert small.returncode != 0 and "cannot save new jobs" in small.stderr, small.stderr
    # Reads go on, and say why.
    queue = c.corral("queue")
    assert "cannot write its state database" in queue.stderr, queue.stderr
    assert str(running) in queue.stdout
    assert len(queue.stdout.strip().splitlines()) == 2, queue.stdout  # the header and the running job
    assert "cannot write its state database" in c.corral("nodes").stderr
    log = open(os.path.join(c.dir, "corrald.log")).read()
    assert "database or disk is full" in log
    ids = {j["id"] for j in c.jobs()}
    assert ids == {running}, ids  # nothing of the refused submissions exists

    # The running job ends while the disk is full: it is not lost.
    open(go, "w").close()
    job = c.wait_job(running)
    assert job["result"] == "COMPLETED"

    os.unlink(filler)
    wait_until(lambda: "cannot write" not in c.corral("queue").stderr, timeout=20,
               what="corrald to write its state again", cluster=c)
    assert "writable again" in open(os.path.join(c.dir, "corrald.log")).read()
    later = int(c.corral("batch", "--parsable", "-", input="#!/bin/sh\necho hi\n").stdout)
    assert c.wait_job(later)["result"] == "COMPLETED"

    # What corrald had in memory is what it finds on disk.
    c.kill_controller()
    c.start_controller()
    c.wait_nodes_up(1)
    after = {j["id"]: j["result"] for j in c.jobs()}
    assert after == {running: "COMPLETED", later: "COMPLETED"}, after
