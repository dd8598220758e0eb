"""The command's calls to corrald without gRPC (net/rpc_frames.h): the same answers as over
gRPC, the caller named by the socket, and hand-written frames from another user refused
with a reason while everybody else is served; watches as streams on the same socket."""
import json
import os
import subprocess
import tempfile

import pytest

from conftest import run_corral
from frame_client import FRAME_HELPERS

NOBODY = 65534

# A client of corrald's own rpc protocol written by hand, run as another user: each exchange
# prints the status frame's code and message (and, for ping, the uid corrald saw).
RAW_CLIENT = FRAME_HELPERS + r'''
path = sys.argv[1]

def call(data):
    return exchange(path, b"CORRAL-RPC/1\n", data)

jobid = int(sys.argv[2])
status, body = call(frame(1, b"\x07"))                        # Ping
print(status, "your_uid" if varint(6 << 3) + varint(65534) in body else "?")
status, body = call(frame(1, b"\x02" + b"\x0a" + varint(len(varint(jobid))) + varint(jobid)))  # Cancel{jobids}
print(status, "belongs to" in body.decode(errors="replace") or body)
print(call(frame(1, b"\x01\xff\xff"))[0])                     # Submit, not a SubmitRequest
print(call(frame(1, b"\x63"))[0])                             # method 99
print(call(b"\x01\xff\xff\xff\xff")[0])                       # 4 GiB announced
print(call(frame(9, b""))[0])                                 # not a call frame
'''

# The administrative methods and watches, by hand, as another user: the status of a
# shutdown and a drain, a malformed watch, and a watch of `jobid` (history) up to its first
# reply, then hung up.
RAW_WATCHER = FRAME_HELPERS + r"""
path = sys.argv[1]
jobid = int(sys.argv[2])
def call(data):
    return exchange(path, b"CORRAL-RPC/1\n", data)
print(call(frame(1, b"\x0d"))[0])                                   # Shutdown
print(call(frame(1, b"\x08" + field(1, b"node[0-1]")))[0])          # SetNodeState: drain
print(call(frame(1, b"\x0e\xff\xff"))[0])                           # Watch, not a WatchRequest
watch = b"\x0e" + varint(1 << 3) + varint(jobid) + varint(4 << 3) + varint(1)  # jobids, history
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
s.send(b"CORRAL-RPC/1\n" + frame(1, watch))
buf = b""
while len(buf) < 5 or len(buf) < 5 + struct.unpack(">I", buf[1:5])[0]:
    chunk = s.recv(65536)
    if not chunk:
        break
    buf += chunk
print(buf[0] if buf else "closed", b"submit" in buf)
s.close()
"""


@pytest.mark.cluster(size=2, agents=1, cores=4)
def test_corralds_rpc_protocol_checks_hand_written_frames_from_other_users(cluster):
    jobid = cluster.submit("-N1", "sleep", "300")
    proc = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                           "/usr/bin/python3", "-c", RAW_CLIENT, cluster.socket, str(jobid)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 6, proc.stdout
    assert lines[0] == "0  your_uid", lines[0]  # the socket's uid, not one the client claims
    assert lines[1] == "0  True", lines[1]  # answered, with the job's refusal in the reply
    assert lines[2].startswith("3 malformed request: not a valid SubmitRequest"), lines[2]
    assert lines[3].startswith("12 rpc protocol: unknown method"), lines[3]
    assert lines[4] == "3 step protocol: a frame of 4294967295 bytes is over the limit of 67108864"
    assert lines[5].startswith("3 "), lines[5]
    # nobody's cancel of root's job changed nothing
    assert cluster.job(jobid)["state"] not in ("INACTIVE", "CLEANUP"), lines[1]
    cluster.corral("cancel", jobid)
    cluster.wait_job(jobid)


@pytest.mark.cluster(size=2, agents=1, cores=4)
def test_another_user_can_watch_but_not_stop_or_drain_through_the_socket(cluster):
    jobid = cluster.submit("-N1", "sleep", "300")
    for _ in range(2):  # the hung-up watch leaves nothing behind: the second run is the same
        proc = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                               "/usr/bin/python3", "-c", RAW_WATCHER, cluster.socket, str(jobid)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0].startswith("7 only root or the instance owner may stop corrald"), lines[0]
        assert lines[1].startswith("7 only root or the instance owner may drain nodes"), lines[1]
        assert lines[2].startswith("3 malformed request: not a valid WatchRequest"), lines[2]
        assert lines[3] == "1 True", lines[3]  # a WatchReply frame with the job's submit event
    assert cluster.corral("queue").returncode == 0  # corrald is still up
    # The command's own watch over the socket, as that user: eventlog -f of a job that ends.
    own = int(cluster.corral("submit", "true", user=NOBODY).stdout)
    log = cluster.corral("eventlog", "-f", own, user=NOBODY, timeout=60)
    assert "clean" in log.stdout, log.stdout
    cluster.corral("cancel", jobid)
    cluster.wait_job(jobid)


@pytest.mark.cluster(size=2, agents=1, cores=4)
def test_commands_answer_the_same_over_both_transports(cluster):
    grpc = dict(cluster.env, CORRAL_RPC_TRANSPORT="grpc")
    jobs = {}
    for name, env in (("socket", cluster.env), ("grpc", grpc)):
        jobs[name] = int(cluster.corral("submit", "--urgency", "0", "-J", name, "true", env=env).stdout)
    for env in (cluster.env, grpc):
        rows = json.loads(cluster.corral("queue", "--json", env=env).stdout)
        assert sorted(r["id"] for r in rows) == sorted(jobs.values()), rows
        shown = json.loads(cluster.corral("show", "job", jobs["socket"], "--json", env=env).stdout)
        assert shown["name"] == "socket", shown
        missing = cluster.corral("show", "job", "999999", env=env, check=False)
        assert missing.returncode != 0 and "999999" in missing.stderr, missing.stderr
    # Another user is who the socket says, on both: root's jobs are not theirs to cancel.
    for env in (cluster.env, grpc):
        refused = cluster.corral("cancel", jobs["grpc"], env=env, user=NOBODY, check=False)
        assert refused.returncode != 0, refused.stdout
    own = int(cluster.corral("submit", "--urgency", "0", "true", user=NOBODY).stdout)
    cluster.corral("cancel", own, user=NOBODY)
    cluster.corral("cancel", *jobs.values(), env=grpc)
    for j in (own, *jobs.values()):
        cluster.wait_job(j)


def test_an_unreachable_controller_is_said_the_same_way():
    # A short directory: pytest's own may be longer than a socket address holds.
    with tempfile.TemporaryDirectory(prefix="corral-") as d:
        for extra in ({}, {"CORRAL_RPC_TRANSPORT": "grpc"}):
            env = dict(os.environ, CORRAL_URI=f"unix:{d}/none.sock", **extra)
            proc = run_corral("queue", env=env)
            assert proc.returncode != 0
            assert f"cannot reach the controller at unix:{d}/none.sock: no such file or directory" \
                in proc.stderr, proc.stderr
