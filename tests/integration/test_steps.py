"""Job steps: the step manager in the agent of the job's first node, `corral run` inside
an allocation (from a batch script, with --jobid), subsets of the job and waiting, I/O,
signals, step cancel, accounting reaching the controller, an MPICH program across four
virtual nodes, and a controller restart while steps run."""
import json
import os
import signal
import subprocess
import textwrap
import time

import pytest

from conftest import SOURCE_DIR, binary, wait_until
from frame_client import FRAME_HELPERS


def hold(cluster, *args):
    """A batch job that only holds its allocation; returns its id once it runs."""
    proc = cluster.corral("batch", "--parsable", *args, "-",
                          input="#!/bin/sh\nexec sleep 300\n")
    jobid = int(proc.stdout.strip())
    cluster.wait_job(jobid, "RUN")
    return jobid


def step(cluster, jobid, *args, check=False, input=None, timeout=60):
    return cluster.corral("run", f"--jobid={jobid}", *args, check=check, input=input,
                          timeout=timeout)


def steps_json(cluster, jobid):
    return json.loads(cluster.corral("steps", jobid, "--json").stdout)


def agent_of(cluster, node):
    for i, nodes in enumerate(cluster.node_sets):
        names = cluster.corral("hostlist", "expand", nodes).stdout.split()
        if node in names:
            return i
    raise AssertionError(f"no agent hosts {node}")


@pytest.mark.cluster(size=4, agents=2, cores=4)
def test_step_manager_runs_on_the_first_node_and_steps_get_subsets(cluster):
    jobid = hold(cluster, "-N4", "-n16")
    job = cluster.job(jobid)
    first = cluster.corral("hostlist", "expand", job["nodelist"]).stdout.split()[0]
    # The controller tells where the step manager is: the agent of the first node.
    i = agent_of(cluster, first)
    assert job["stepmgr"] == "unix:" + os.path.join(cluster.dir, f"agent-{i}", "step.sock"), job

    proc = step(cluster, jobid, "-N2", "-n4", "-l", "sh", "-c",
                "echo $CORRAL_NODENAME $CORRAL_STEPID $CORRAL_NTASKS $CORRAL_STEPMGR", check=True)
    lines = sorted(proc.stdout.splitlines())
    assert len(lines) == 4, proc.stdout
    for rank, line in enumerate(lines):
        label, node, stepid, ntasks, mgr = line.split()
        assert label == f"{rank}:"
        assert stepid == "0" and ntasks == "4" and mgr == job["stepmgr"]
    nodes = {line.split()[1] for line in lines}
    assert len(nodes) == 2

    # Each step gets its own id; -w places it; the exit code is the step's.
    proc = step(cluster, jobid, "-w", "node3", "sh", "-c", "echo $CORRAL_NODENAME; exit 7")
    assert proc.returncode == 7 and proc.stdout.strip() == "node3", proc.stderr
    bad = step(cluster, jobid, "-n17", "true")
    assert bad.returncode != 0 and "17 tasks" in bad.stderr and "4 cores each" in bad.stderr, bad.stderr


@pytest.mark.cluster(size=1, agents=1, cores=2)
def test_a_variable_that_is_not_utf8_reaches_the_task(cluster):
    # Any byte but NUL may be in a variable (a Latin-1 file name): the step protocol carried
    # the environment as UTF-8 strings and refused the whole step as malformed.
    jobid = hold(cluster, "-n1")
    env = {k.encode(): v.encode() for k, v in cluster.env.items()}
    env[b"LATIN_NAME"] = b"caf\xe9 \xff"
    proc = subprocess.run([binary("corral"), "run", f"--jobid={jobid}", "sh", "-c", 'printf %s "$LATIN_NAME"'],
                          env=env, capture_output=True, timeout=60, cwd=cluster.shared_dir("cwd"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"caf\xe9 \xff"
    assert b"UTF-8" not in proc.stderr, proc.stderr


@pytest.mark.cluster(size=2, agents=2, cores=2)
def test_steps_wait_for_cores_or_fail_with_immediate(cluster, tmp_path):
    jobid = hold(cluster, "-N2", "-n4")
    first = subprocess.Popen([binary("corral"), "run", f"--jobid={jobid}", "-n4", "sleep", "2"],
                             env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: any(s["state"] == "RUNNING" and s["step"] == "0"
                           for s in steps_json(cluster, jobid)),
               what="the first step to run", cluster=cluster)
    imm = step(cluster, jobid, "--immediate", "-n1", "true")
    assert imm.returncode != 0 and "step" in imm.stderr.lower(), imm.stderr
    t0 = time.monotonic()
    waited = step(cluster, jobid, "-n1", "echo", "after")
    assert waited.returncode == 0 and waited.stdout == "after\n"
    assert first.wait(timeout=30) == 0
    assert time.monotonic() - t0 > 0.5  # it waited for the first step's cores
    over = step(cluster, jobid, "--overlap", "-n1", "true")
    assert over.returncode == 0


@pytest.mark.cluster(size=2, agents=2, cores=2)
def test_step_io_labels_stdin_and_kill_on_bad_exit(cluster):
    jobid = hold(cluster, "-N2", "-n4")
    proc = step(cluster, jobid, "-n2", "-l", "cat", input="hello\n", check=True)
    assert proc.stdout == "0: hello\n", proc.stdout  # stdin goes to rank 0 only
    # stdin from /dev/null (a batch script's): rank 0 reads its end at once
    null = subprocess.run([binary("corral"), "run", f"--jobid={jobid}", "cat"], env=cluster.env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20)
    assert null.returncode == 0 and null.stdout == "", null.stderr
    proc = step(cluster, jobid, "-n4", "-l", "sh", "-c", "echo out $CORRAL_TASK_RANK; echo err >&2")
    assert sorted(proc.stdout.splitlines()) == [f"{r}: out {r}" for r in range(4)]
    assert proc.stderr.count("err") == 4
    t0 = time.monotonic()
    proc = step(cluster, jobid, "-n4", "--kill-on-bad-exit", "sh", "-c",
                'if [ "$CORRAL_TASK_RANK" = 2 ]; then exit 3; fi; exec sleep 60')
    assert proc.returncode == 3, proc.stderr
    assert time.monotonic() - t0 < 30


@pytest.mark.cluster(size=2, agents=1, cores=2)
def test_ctrl_c_forwards_sigint_and_cancel_ends_one_step(cluster):
    jobid = hold(cluster, "-N2", "-n4")
    run = subprocess.Popen([binary("corral"), "run", f"--jobid={jobid}", "-n1", "sh", "-c",
                            "trap 'echo got-int; exit 9' INT; echo ready; while :; do sleep 0.1; done"],
                           env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert run.stdout.readline() == "ready\n"
    run.send_signal(signal.SIGINT)
    out, _ = run.communicate(timeout=20)
    assert run.returncode == 9 and "got-int" in out

    long = subprocess.Popen([binary("corral"), "run", f"--jobid={jobid}", "-n1", "sleep", "300"],
                            env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sid = wait_until(lambda: next((s["step"] for s in steps_json(cluster, jobid)
                                   if s["state"] == "RUNNING" and s["step"] != "batch"), None),
                     what="the long step to run", cluster=cluster)
    cluster.corral("cancel", f"{jobid}.{sid}")
    assert long.wait(timeout=20) != 0
    rec = wait_until(lambda: next((s for s in steps_json(cluster, jobid)
                                   if s["step"] == sid and s["state"] == "CANCELED"), None),
                     what="the canceled step's record", cluster=cluster)
    assert rec["t_end"] > 0
    assert cluster.job(jobid)["state"] == "RUN"  # the job itself goes on
    bad = cluster.corral("cancel", f"{jobid}.x", check=False)
    assert bad.returncode != 0 and f"{jobid}.x" in bad.stderr


@pytest.mark.cluster(size=2, agents=2, cores=2)
def test_batch_script_steps_and_accounting(cluster, tmp_path):
    env = dict(cluster.env, CORRAL_BIN=binary("corral"))
    script = tmp_path / "job.sh"
    script.write_text(textwrap.dedent("""\
        #!/bin/sh
        #CORRAL -N 2 -n 4
        "$CORRAL_BIN" run -n4 -l hostname-is-not-needed 2>/dev/null
        "$CORRAL_BIN" run -N2 -n2 sh -c 'echo step $CORRAL_STEPID on $CORRAL_NODENAME'
        "$CORRAL_BIN" run -n1 sh -c 'exit 4'
        echo done
        """))
    proc = cluster.corral("batch", "--parsable", str(script), cwd=tmp_path, env=env)
    jobid = int(proc.stdout.strip())
    job = cluster.wait_job(jobid)
    assert job["result"] == "COMPLETED", job
    out = (tmp_path / f"corral-{jobid}.out").read_text().splitlines()
    assert sorted(out[:2]) == ["step 1 on node0", "step 1 on node1"], out
    assert out[-1] == "done"
    # Step records reached the controller (the job is finished: nothing to ask its step manager).
    hist = json.loads(cluster.corral("history", "-j", jobid, "--json").stdout)
    steps = {s["step"]: s for s in hist[0]["steps"]}
    assert set(steps) >= {"0", "1", "2"}, steps
    assert steps["0"]["state"] == "FAILED" and steps["0"]["waitstatus"] == 127 << 8
    assert steps["1"]["ntasks"] == 2 and steps["1"]["nnodes"] == 2
    assert steps["2"]["waitstatus"] == 4 << 8 and steps["2"]["state"] == "FAILED"
    assert all(s["t_end"] >= s["t_start"] > 0 for s in steps.values())


@pytest.mark.cluster(size=2, agents=1, cores=2)
def test_other_users_cannot_attach_steps(cluster):
    jobid = hold(cluster, "-N1")
    proc = cluster.corral("run", f"--jobid={jobid}", "true", user=1234, check=False)
    assert proc.returncode != 0
    assert "belongs to" in proc.stderr or "permission" in proc.stderr.lower(), proc.stderr


@pytest.fixture(scope="module")
def mpi_program(tmp_path_factory):
    out = tmp_path_factory.mktemp("mpi") / "pmi_ring"
    src = SOURCE_DIR / "tests" / "data" / "mpi" / "pmi_ring.c"
    subprocess.run(["mpicc.mpich", "-o", str(out), str(src)], check=True)
    return str(out)


@pytest.mark.cluster(size=4, agents=4, cores=2)
def test_mpich_program_across_four_nodes_as_a_step(cluster, mpi_program):
    jobid = hold(cluster, "-N4", "-n8")
    proc = step(cluster, jobid, "-N4", "-n8", mpi_program, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(proc.stdout.splitlines()) == sorted(
        [f"rank {r} of 8" for r in range(8)] + ["ring and allreduce ok"]), proc.stdout


# A task speaking PMI-2's wire protocol over PMI_FD, as MPICH's pmi2 client and Intel MPI
# do: init, fullinit, a put of its own key, the fence, and a get of its neighbour's.
PMI2_TASK = r'''
import os, sys
fd = int(os.environ["PMI_FD"])
rank, size = int(os.environ["PMI_RANK"]), int(os.environ["PMI_SIZE"])
f = os.fdopen(fd, "r+b", buffering=0)

def read_exact(n):
    data = b""
    while len(data) < n:
        chunk = f.read(n - len(data))
        if not chunk:
            sys.exit("PMI connection closed")
        data += chunk
    return data

def call(msg):
    body = msg.encode()
    f.write(b"%6d" % len(body) + body)
    n = int(read_exact(6))
    return dict(kv.split("=", 1) for kv in read_exact(n).decode().split(";") if kv)

f.write(b"cmd=init pmi_version=2 pmi_subversion=0\n")
line = b""
while not line.endswith(b"\n"):
    line += read_exact(1)
assert b"rc=0" in line, line
init = call(f"cmd=fullinit;pmirank={rank};threaded=FALSE;")
assert init["rc"] == "0" and int(init["rank"]) == rank and int(init["size"]) == size, init
assert call(f"cmd=kvs-put;key=addr-{rank};value=node-{os.environ['CORRAL_NODEID']};")["rc"] == "0"
assert call("cmd=kvs-fence;")["rc"] == "0"
peer = (rank + 1) % size
got = call(f"cmd=kvs-get;key=addr-{peer};")
assert got["found"] == "TRUE", got
print(f"rank {rank}: {peer} is on {got['value']}")
call("cmd=finalize;")
'''


@pytest.mark.cluster(size=4, agents=4, cores=2)
def test_pmi2_tasks_exchange_keys_across_four_nodes(cluster):
    jobid = hold(cluster, "-N4", "-n8")
    # Labelled: the output of tasks on different nodes is merged line by line.
    proc = step(cluster, jobid, "-l", "-N4", "-n8", "/usr/bin/python3", "-c", PMI2_TASK, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = sorted(line.split(": ", 1)[1] for line in proc.stdout.splitlines())
    assert len(lines) == 8, proc.stdout
    for r in range(8):  # -n8 over 4 nodes: two ranks per node, in blocks
        assert f"rank {r}: {(r + 1) % 8} is on node-{((r + 1) % 8) // 2}" in lines, proc.stdout
    cluster.corral("cancel", jobid)


@pytest.mark.cluster(size=4, agents=4, cores=2)
def test_mpich_program_across_four_nodes_as_a_job(cluster, mpi_program):
    proc = cluster.corral("run", "-N4", "-n8", mpi_program, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(proc.stdout.splitlines()) == sorted(
        [f"rank {r} of 8" for r in range(8)] + ["ring and allreduce ok"]), proc.stdout


@pytest.mark.cluster(size=2, agents=2, cores=2, sets=("controller.kill-grace=1s",))
def test_steps_keep_running_across_a_controller_restart(cluster, tmp_path):
    jobid = hold(cluster, "-N2", "-n4")
    marker = tmp_path / "started"
    long = subprocess.Popen([binary("corral"), "run", f"--jobid={jobid}", "-N2", "-n2", "sh", "-c",
                             f"touch {marker}.$CORRAL_TASK_RANK; sleep 4; echo survived"],
                            env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: os.path.exists(f"{marker}.0") and os.path.exists(f"{marker}.1"),
               what="the step's tasks to start", cluster=cluster)
    inside = dict(cluster.env, CORRAL_JOBID=str(jobid), CORRAL_STEPMGR=cluster.job(jobid)["stepmgr"])
    cluster.kill_controller(signal.SIGKILL)
    # Steps do not need the controller: inside the allocation a new one starts while it is down.
    quick = cluster.corral("run", "-n1", "echo", "while-down", env=inside, check=False)
    assert quick.returncode == 0 and quick.stdout == "while-down\n", quick.stderr
    cluster.restart_controller()
    out, err = long.communicate(timeout=30)
    assert long.returncode == 0 and out.count("survived") == 2, err
    recs = wait_until(lambda: (lambda s: s if len(s) >= 2 else None)(
        [s for s in json.loads(cluster.corral("steps", jobid, "--json").stdout)
         if s["state"] == "COMPLETED"]), what="both step records", cluster=cluster)
    assert {s["step"] for s in recs} >= {"0", "1"}
    cluster.corral("cancel", jobid)
    cluster.wait_job(jobid)
    hist = json.loads(cluster.corral("history", "-j", jobid, "--json").stdout)
    assert {s["step"] for s in hist[0]["steps"]} >= {"0", "1"}


@pytest.mark.cluster(size=2, agents=2, cores=2)
def test_alloc_runs_the_interactive_step_and_steps_inside_it(cluster):
    env = dict(cluster.env, CORRAL_BIN=binary("corral"))
    proc = cluster.corral(
        "alloc", "-N2", "-n4", "sh", "-c",
        'echo job $CORRAL_JOBID step $CORRAL_STEPID; "$CORRAL_BIN" run -n4 -l true && '
        '"$CORRAL_BIN" run -N2 -n2 sh -c \'echo on $CORRAL_NODENAME\'; exit 5',
        env=env, check=False)
    assert proc.returncode == 5, proc.stderr  # the exit code is the interactive step's
    lines = proc.stdout.splitlines()
    jobid = int(lines[0].split()[1])
    assert lines[0] == f"job {jobid} step interactive", lines
    assert sorted(lines[1:]) == ["on node0", "on node1"], lines
    job = cluster.wait_job(jobid)  # the allocation ends with its shell
    assert "stepmgr" not in job
    hist = json.loads(cluster.corral("history", "-j", jobid, "--json").stdout)
    assert {s["step"] for s in hist[0]["steps"]} >= {"interactive", "0", "1"}


@pytest.mark.cluster(size=1, agents=1, cores=2)
def test_alloc_gives_the_shell_a_terminal(cluster):
    import pty
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(binary("corral"), [binary("corral"), "alloc", "sh", "-c",
                                     "test -t 0 && test -t 1 && echo TTY-OK; read line; "
                                     "echo got $line"], cluster.env)
    out = b""
    deadline = time.monotonic() + 30
    while b"TTY-OK" not in out and time.monotonic() < deadline:
        out += os.read(fd, 1024)
    os.write(fd, b"hello\r")
    while b"got hello" not in out and time.monotonic() < deadline:
        try:
            out += os.read(fd, 1024)
        except OSError:
            break
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert b"TTY-OK" in out and b"got hello" in out, out
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.cluster(size=2, agents=2, cores=2,
                     sets=("steps.mpi-ports=12000-12099", "steps.mpi-ports-per-job=10",
                           "steps.mpi-ports-per-step=3"))
def test_steps_get_mpi_ports_from_their_jobs_share(cluster):
    jobid = hold(cluster, "-N2", "-n4")
    longer = subprocess.Popen([binary("corral"), "run", f"--jobid={jobid}", "-N2", "-n2", "sh", "-c",
                               "echo $CORRAL_MPI_PORTS; sleep 2"],
                              env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: any(s["state"] == "RUNNING" and s["step"] == "0"
                           for s in steps_json(cluster, jobid)),
               what="the first step to run", cluster=cluster)
    second = step(cluster, jobid, "-N2", "-n2", "sh", "-c", "echo $CORRAL_MPI_PORTS", check=True)
    out, _ = longer.communicate(timeout=30)
    a, b = set(out.split()), set(second.stdout.split())
    assert len(a) == 1 and len(b) == 1, (out, second.stdout)  # the same on every node of a step
    ranges = [tuple(map(int, r.pop().split("-"))) for r in (a, b)]
    for lo, hi in ranges:
        assert hi - lo + 1 == 3 and 12000 <= lo and hi <= 12099, ranges
    (lo1, hi1), (lo2, hi2) = ranges
    assert hi1 < lo2 or hi2 < lo1, ranges  # steps running together never share a port


# A client of the agent's own step protocol written by hand (net/step_frames.h), run as
# another user: each exchange prints the status frame's code and message.
RAW_CLIENT = FRAME_HELPERS + r'''
path = sys.argv[1]
PREFACE = b"CORRAL-STEP/1\n"

def exchange(data, slowly=False):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    if slowly:  # the preface a byte at a time
        for i in range(len(PREFACE)):
            s.send(PREFACE[i:i + 1])
            time.sleep(0.01)
        s.send(data)
    else:
        s.send(PREFACE + data)
    return read_answer(s)[0]

jobid = int(sys.argv[2])
spec = varint(1 << 3) + varint(jobid) + field(2, b"/bin/true")  # StepSpec{jobid, argv}
create = field(1, spec)                                             # StepClientMessage{create}
print(exchange(frame(1, create)))
print(exchange(frame(1, create), slowly=True))
print(exchange(b"\x01\xff\xff\xff\xff"))
print(exchange(frame(7, b"")))
print(exchange(frame(1, b"\xff\xff")))
'''


@pytest.mark.cluster(size=2, agents=1, cores=4)
def test_the_agents_step_protocol_checks_hand_written_frames_from_other_users(cluster):
    jobid = hold(cluster, "-N1")
    verbose = step(cluster, jobid, "-v", "true", check=True)
    where = verbose.stderr.split(" through ")[-1].split()[0]
    assert where.startswith("unix:"), verbose.stderr
    proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           "/usr/bin/python3", "-c", RAW_CLIENT, where[5:], str(jobid)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 5, proc.stdout
    for refused in lines[:2]:  # root's job, asked by nobody (at once, and a byte at a time)
        assert refused.startswith("7 ") and "belongs to" in refused, refused
    assert lines[2] == "3 step protocol: a frame of 4294967295 bytes is over the limit of 67108864"
    assert lines[3] == "3 step protocol: unknown frame type 7"
    assert lines[4] == "3 step protocol: a malformed message"
    # The owner's steps still run, over this protocol and over gRPC on the same socket.
    assert step(cluster, jobid, "echo", "own", check=True).stdout == "own\n"
    env = dict(cluster.env, CORRAL_STEP_TRANSPORT="grpc")
    grpc = cluster.corral("run", f"--jobid={jobid}", "sh", "-c", "echo grpc; exit 3", env=env,
                          check=False)
    assert grpc.stdout == "grpc\n" and grpc.returncode == 3, grpc.stderr
    cluster.corral("cancel", jobid)


# One connection, one call after another (net/step_frames.h), by a client written by hand.
REUSE_CLIENT = FRAME_HELPERS + r'''
path, jobid = sys.argv[1], int(sys.argv[2])
spec = varint(1 << 3) + varint(jobid) + field(2, b"/bin/true")
create = frame(1, field(1, spec))

class Answers:
    """Status frames in order, keeping what arrives beyond one answer for the next."""
    def __init__(self, sock):
        self.sock, self.buf, self.body = sock, b"", b""
    def __call__(self):
        while True:
            while len(self.buf) >= 5:
                kind, n = self.buf[0], struct.unpack(">I", self.buf[1:5])[0]
                if len(self.buf) < 5 + n:
                    break
                payload, self.buf = self.buf[5:5 + n], self.buf[5 + n:]
                if kind == 1:
                    self.body = payload  # the last message (the step's exit, at the end)
                if kind == 2:
                    return f"{payload[0]} {payload[1:].decode()}"
            chunk = self.sock.recv(65536)
            if not chunk:
                return "closed"
            self.buf += chunk

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
s.connect(path)
read_answer = lambda sock: (answers(),)
answers = Answers(s)
s.send(b"CORRAL-STEP/1\n" + create)
print(read_answer(s)[0])
s.send(create)                       # the next call on the same connection
print(read_answer(s)[0])
# Environments no program could start with (StepSpec.env, field 22): refused with the
# reason, the connection kept.
for env, reason in ((b"NOEQUALS", b"is not NAME=VALUE"), (b"A=b\0c", b"holds a NUL byte"),
                    (b"BIG=" + b"x" * (128 << 10), b"a program can be given at most")):
    s.send(frame(1, field(1, spec + field(22, env))))
    print(read_answer(s)[0], reason in answers.body)
s.send(frame(1, field(3, b"x")))     # a call that does not start with `create`
print(read_answer(s)[0])
print(read_answer(s)[0])             # ... ends the connection
t = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
t.settimeout(30)
t.connect(path)
answers = Answers(t)
t.send(b"CORRAL-STEP/1\n" + create)
t.shutdown(socket.SHUT_WR)           # a client that says it is done writing
print(read_answer(t)[0])
print(read_answer(t)[0])             # gets its answer, then the connection ends
'''


@pytest.mark.cluster(size=1, agents=1, cores=4)
def test_a_connection_carries_one_call_after_another(cluster):
    proc = cluster.corral("batch", "--parsable", "-N1", "-", input="#!/bin/sh\nexec sleep 300\n", user=4242)
    jobid = int(proc.stdout.strip())
    cluster.wait_job(jobid, "RUN")
    stepmgr = cluster.job(jobid)["stepmgr"]
    assert stepmgr.startswith("unix:"), stepmgr
    proc = subprocess.run(["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups",
                           "/usr/bin/python3", "-c", REUSE_CLIENT, stepmgr[5:], str(jobid)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["0 "] * 2 + ["0  True"] * 3 + [
        "3 the first RunStep message must carry `create`", "closed", "0 ", "closed"], proc.stdout
    steps = steps_json(cluster, jobid)
    assert sum(1 for s in steps if s.get("state") == "COMPLETED") >= 3, steps
    cluster.corral("cancel", jobid)


def nice_of(stat_text):
    return int(stat_text.rsplit(")", 1)[1].split()[16])  # field 19 of /proc/PID/stat


@pytest.mark.cluster(size=1, agents=1, cores=4)
def test_the_agents_loop_runs_above_its_tasks(cluster):
    # The agent (root, --loop-nice -10 by default) raises its event loop's priority; its
    # tasks start at the agent's own, 0: steps, a job's own tasks and batch scripts alike.
    agent = cluster.agents[0].pid
    with open(f"/proc/{agent}/stat") as f:
        assert nice_of(f.read()) == -10
    # Only the loop (the main thread): the link to corrald and gRPC's threads, made before
    # it was raised, stay at the agent's own.
    others = {}
    for tid in os.listdir(f"/proc/{agent}/task"):
        if int(tid) != agent:
            with open(f"/proc/{agent}/task/{tid}/stat") as f:
                others[tid] = nice_of(f.read())
    assert others and set(others.values()) == {0}, others
    show = "cat /proc/self/stat"
    jobid = hold(cluster, "-N1")
    assert nice_of(step(cluster, jobid, "sh", "-c", show, check=True).stdout) == 0
    cluster.corral("cancel", jobid)
    assert nice_of(cluster.corral("run", "-n1", "sh", "-c", show, user=4242).stdout) == 0
    out = str(cluster.shared_dir("cwd") / "nice.out")
    proc = cluster.corral("batch", "--parsable", "-o", out, "-", input=f"#!/bin/sh\n{show}\n")
    batch = int(proc.stdout.strip())
    cluster.wait_job(batch, "INACTIVE")
    with open(out) as f:
        assert nice_of(f.read()) == 0
