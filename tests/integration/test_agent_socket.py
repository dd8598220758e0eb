"""The agent stream without gRPC on corrald's Unix socket (net/agent_frames.h): agents use
it by default there and run jobs exactly as over gRPC; only an agent's uid gets a thread
of corrald, and hand-written frames are answered with a reason; an agent whose corrald
does not speak it goes over to gRPC."""
import os
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import binary
from frame_client import FRAME_HELPERS

NOBODY = 65534


def wait_for_text(path, text, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path) and text in open(path, errors="replace").read():
            return True
        time.sleep(0.05)
    return False


def corrald_log(cluster):
    return open(os.path.join(cluster.dir, "corrald.log"), errors="replace").read()


@pytest.mark.cluster(size=2, agents=2, cores=2)
def test_agents_on_the_socket_and_over_grpc_run_the_same_jobs(cluster):
    assert "agent node0 streams over the socket without gRPC" in corrald_log(cluster)
    assert "agent node1 streams over the socket without gRPC" in corrald_log(cluster)
    before = corrald_log(cluster).count("agent node1 registered")
    cluster.kill_agent(1)
    cluster.start_agent(1, env=dict(os.environ, CORRAL_AGENT_TRANSPORT="grpc"))
    deadline = time.time() + 15
    while corrald_log(cluster).count("agent node1 registered") == before:
        assert time.time() < deadline, corrald_log(cluster)[-3000:]
        time.sleep(0.05)
    # Registered again, this time over gRPC: no second socket stream for it.
    assert corrald_log(cluster).count("agent node1 streams over the socket without gRPC") == 1
    cluster.wait_nodes_up(2)
    out = cluster.corral("run", "-N2", "-n2", "--label", "echo", "ran").stdout.split("\n")
    assert sorted(line for line in out if line) == ["0: ran", "1: ran"], out
    jobid = cluster.submit("-N2", "sleep", "300")
    cluster.wait_job(jobid, states=("RUN",))
    cluster.corral("cancel", jobid)  # a signal down both kinds of stream, exits up both
    cluster.wait_job(jobid)


# A client of the agent protocol written by hand: prints the status frame of each try.
RAW_AGENT = FRAME_HELPERS + r'''
path = sys.argv[1]

def call(data):
    return exchange(path, b"CORRAL-AGENT/1\n", data)[0]

print(call(frame(1, field(1, field(1, b"node0")))))   # a register, from whoever runs this
print(call(frame(1, b"\x30\x01")))                     # heartbeat first, not register
print(call(frame(1, b"\xff\xff\xff")))                  # not an AgentMessage
print(call(b"\x01\xff\xff\xff\xff"))                    # 4 GiB announced
'''


@pytest.mark.cluster(size=2, agents=1, cores=2)
def test_the_agent_protocol_answers_strangers_and_bad_frames_with_reasons(cluster):
    nobody = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                             "/usr/bin/python3", "-c", RAW_AGENT, cluster.socket],
                            capture_output=True, text=True, timeout=60)
    assert nobody.returncode == 0, nobody.stderr
    # Refused before anything of it is read: each line is the same refusal.
    assert nobody.stdout.splitlines() == ["7 uid 65534 may not register node agents"] * 4, nobody.stdout
    root = subprocess.run(["/usr/bin/python3", "-c", RAW_AGENT, cluster.socket],
                          capture_output=True, text=True, timeout=60)
    assert root.returncode == 0, root.stderr
    lines = root.stdout.splitlines()
    assert len(lines) == 4, root.stdout
    assert lines[0] == "3 register: no nodes", lines[0]  # refused by the same checks as over gRPC
    assert lines[1] == "3 the first agent message must be register", lines[1]
    assert lines[2] == "3 the first agent message must be register", lines[2]
    assert lines[3] == "3 step protocol: a frame of 4294967295 bytes is over the limit of 67108864", lines[3]
    # The real agent was not displaced, and corrald goes on.
    assert cluster.corral("run", "-N1", "echo", "still").stdout.strip() == "still"


def test_an_agent_whose_controller_does_not_answer_the_protocol_uses_grpc():
    with tempfile.TemporaryDirectory(prefix="corral-") as d:
        path = os.path.join(d, "old.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(16)
        stop = threading.Event()

        def close_everything():  # what a corrald without the protocol's gRPC does with it
            server.settimeout(0.1)
            while not stop.is_set():
                try:
                    conn, _ = server.accept()
                except socket.timeout:
                    continue
                conn.recv(4096)
                conn.close()

        t = threading.Thread(target=close_everything)
        t.start()
        log = os.path.join(d, "agent.log")
        agent = subprocess.Popen([binary("corral-node"), "--controller", "unix:" + path, "--nodes", "node0",
                                  "--cores", "1", "--state-dir", os.path.join(d, "state"), "--log-file", log,
                                  "--cgroups", "none"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            assert wait_for_text(log, "closed the agent stream unanswered; using gRPC"), \
                open(log).read() if os.path.exists(log) else "no log"
        finally:
            agent.terminate()
            agent.wait(timeout=10)
            stop.set()
            t.join()
            server.close()
