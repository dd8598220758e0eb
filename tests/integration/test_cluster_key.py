"""corrald over TCP on a site without MUNGE: [controller] auth = "cluster-key". Clients get
their credentials from corral-authd, which signs as the uid the kernel gives for its socket;
an agent over TCP signs with the cluster key itself. A request with no credential, a replayed
one, one for another purpose or one made with another key is refused, and corrald's log says
why. No munged runs in these tests."""
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import Cluster, binary, stop_process, wait_until, write_key_file
from test_tcp_munge import free_port

ALICE = 23411
BOB = 23412

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (corral-authd reads the key as root)")


class Authd:
    """A corral-authd with the given key file, its socket in a directory every user reaches."""

    def __init__(self, key_file, dir):
        self.dir = dir
        self.socket = os.path.join(dir, "authd.sock")
        self.log = os.path.join(dir, "authd.log")
        self.proc = subprocess.Popen([binary("corral-authd"), "--key-file", key_file, "--socket", self.socket,
                                      "--log-file", self.log, "--log-level", "debug"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: os.path.exists(self.socket) or self.proc.poll() is not None, timeout=20,
                   what="corral-authd to start")
        assert self.proc.poll() is None, self.proc.stderr.read()

    def sign(self, user=None, payload=None):
        cmd = [binary("corral-rpc-probe"), "--sign", self.socket, *([payload] if payload else [])]
        if user is not None:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    def stop(self):
        stop_process(self.proc, signal.SIGTERM)


def public_dir(prefix):
    d = Path(tempfile.mkdtemp(prefix=prefix))  # pytest's tmp_path is root's only
    os.chmod(d, 0o755)
    return d


@pytest.fixture
def key_cluster(tmp_path):
    """corrald on TCP with the cluster key, its agents on its Unix socket, and corral-authd."""
    port = free_port()
    config = tmp_path / "corral.toml"
    config.write_text(f'[controller]\nlisten = ["127.0.0.1:{port}"]\nauth = "cluster-key"\n')
    c = Cluster(size=2, cores=2, config=config)
    authd = None
    try:
        c.start()
        authd = Authd(c.key_file, str(public_dir("corral-authd-")))
        c.authd = authd
        c.tcp = f"127.0.0.1:{port}"
        c.tcp_env = dict(c.env, CORRAL_URI=c.tcp, CORRAL_AUTH="cluster-key", CORRAL_AUTH_SOCKET=authd.socket)
        yield c
    finally:
        for p in getattr(c, "extra_agents", []):
            stop_process(p, signal.SIGTERM)
        if authd is not None:
            authd.stop()
            shutil.rmtree(authd.dir, ignore_errors=True)
        c.stop()


def corral_tcp(c, *args, env=None, user=None, check=True, input=None):
    cmd = [binary("corral"), *map(str, args)]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    proc = subprocess.run(cmd, env=env or c.tcp_env, capture_output=True, text=True, timeout=60, input=input,
                          cwd=c.shared_dir("cwd"))
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def probe(c, *cred):
    return subprocess.run([binary("corral-rpc-probe"), c.tcp, *cred], capture_output=True, text=True, timeout=30)


def log(c):
    return open(os.path.join(c.dir, "corrald.log")).read()


def test_users_are_who_the_kernel_told_corral_authd(key_cluster):
    c = key_cluster
    assert f"listening on {c.tcp} (TCP, cluster-key credentials)" in log(c)
    out = corral_tcp(c, "run", "-N2", "id", "-u", user=ALICE).stdout.split()
    assert out == [str(ALICE)] * 2, out
    job = int(corral_tcp(c, "batch", "--parsable", "-", input="#!/bin/sh\nexec sleep 300\n").stdout)
    assert c.job(job)["userid"] == 0
    refused = corral_tcp(c, "cancel", job, user=BOB, check=False)
    assert refused.returncode != 0 and "belongs to" in refused.stderr, refused.stderr
    corral_tcp(c, "cancel", job)
    assert c.wait_job(job)["result"] == "CANCELED"
    assert f"signed a credential for uid {ALICE}" in open(c.authd.log).read()


def test_requests_without_a_good_credential_are_refused_and_logged(key_cluster):
    c = key_cluster
    none = probe(c)
    assert none.returncode == 1 and none.stdout.startswith("16 "), none.stdout  # UNAUTHENTICATED
    assert "no cluster-key credential" in none.stdout and "corral-authd" in none.stdout, none.stdout

    cred = c.authd.sign(user=ALICE)
    assert probe(c, cred).returncode == 0
    replay = probe(c, cred)
    assert replay.returncode == 1 and "replay" in replay.stdout, replay.stdout

    other_purpose = probe(c, c.authd.sign(payload="something-else"))
    assert other_purpose.returncode == 1 and "not made for a corral request" in other_purpose.stdout

    # One character of a good credential changed: its uid, say.
    good = c.authd.sign(user=ALICE)
    bent = good[:20] + ("A" if good[20] != "A" else "B") + good[21:]
    altered = probe(c, bent)
    assert altered.returncode == 1 and "cluster-key credential refused" in altered.stdout, altered.stdout

    # A signer with another key (another site's, or a guessed one).
    d = public_dir("corral-authd-other-")
    other_key = write_key_file(str(d / "other.key"))
    stranger = Authd(other_key, str(d))
    try:
        foreign = corral_tcp(c, "queue", check=False, env=dict(c.tcp_env, CORRAL_AUTH_SOCKET=stranger.socket))
        assert foreign.returncode != 0 and "bad signature" in foreign.stderr, foreign.stderr
    finally:
        stranger.stop()
        shutil.rmtree(d, ignore_errors=True)
    text = log(c)
    for why in ("no cluster-key credential", "a replay", "bad signature"):
        assert "refused a request from ipv4:127.0.0.1" in text and why in text, why


def test_a_client_without_corral_authd_is_told_so(key_cluster):
    c = key_cluster
    proc = corral_tcp(c, "queue", check=False, env=dict(c.tcp_env, CORRAL_AUTH_SOCKET="/nonexistent/authd.sock"))
    assert proc.returncode != 0
    assert "/nonexistent/authd.sock" in proc.stderr and "is corral-authd running?" in proc.stderr, proc.stderr
    bad = corral_tcp(c, "queue", check=False, env=dict(c.tcp_env, CORRAL_AUTH="kerberos"))
    assert bad.returncode != 0 and "CORRAL_AUTH" in bad.stderr, bad.stderr


def test_an_agent_over_tcp_signs_with_the_key_and_runs_jobs(key_cluster):
    c = key_cluster
    log_path = os.path.join(c.dir, "tcp-agent.log")
    agent = subprocess.Popen(
        [binary("corral-node"), "--controller", c.tcp, "--nodes", "localhost", "--cores", "2",
         "--state-dir", os.path.join(c.dir, "tcp-agent"), "--log-file", log_path, "--cgroups", "none",
         "--auth", "cluster-key", "--key-file", c.key_file],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    c.extra_agents = [agent]
    c.wait_node("localhost", lambda n: n["state"] in ("idle", "up"), timeout=30,
                what="the TCP agent's node to come up")
    out = corral_tcp(c, "run", "-w", "localhost", "sh", "-c", "echo $(id -u) on $CORRAL_NODELIST", user=ALICE)
    assert out.stdout.strip() == f"{ALICE} on localhost", out.stdout
    # Without the key it cannot take part; with MUNGE against a cluster-key corrald it is refused.
    nokey = subprocess.run([binary("corral-node"), "--controller", c.tcp, "--auth", "cluster-key"],
                           capture_output=True, text=True, timeout=30)
    assert nokey.returncode != 0 and "--auth cluster-key needs --key-file" in nokey.stderr, nokey.stderr


IDLE_CLIENT = """
import socket, struct, sys, time
path, n = sys.argv[1], int(sys.argv[2])
held = []
for _ in range(n):  # connections that never send their request
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    held.append(s)
s = socket.socket(socket.AF_UNIX)
s.connect(path)
try:
    s.sendall(b"CAS1" + struct.pack(">BIH", 0, 0, 5) + b"hello")
except BrokenPipeError:  # refused at once: the refusal is still there to read
    pass
status, length = struct.unpack(">BH", s.recv(3))
print(status, s.recv(length).decode())
"""


def raw_request(socket_path, header_length, payload=b""):
    import socket as sk
    import struct
    s = sk.socket(sk.AF_UNIX)
    s.connect(socket_path)
    try:
        s.sendall(b"CAS1" + struct.pack(">BIH", 0, 0, header_length) + payload)
    except BrokenPipeError:  # refused before the payload was all sent: the answer is there
        pass
    head = s.recv(3)
    status, length = struct.unpack(">BH", head)
    return status, s.recv(length).decode()


def test_corral_authd_refuses_a_key_others_can_read_long_payloads_and_hoarders(tmp_path):
    key = write_key_file(str(tmp_path / "loose.key"))
    os.chmod(key, 0o644)
    proc = subprocess.run([binary("corral-authd"), "--key-file", key, "--socket", str(tmp_path / "a.sock")],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "chmod 600" in proc.stderr, proc.stderr
    os.chmod(key, 0o600)
    public = public_dir("corral-authd-limits-")
    authd = Authd(key, str(public))
    try:
        assert oct(os.stat(authd.socket).st_mode & 0o777) == "0o777"  # every local user asks it
        status, why = raw_request(authd.socket, 2000, b"p" * 2000)
        assert status == 1 and "at most 1024 bytes" in why, why
        # Alice holds 8 idle connections: her 9th request is refused, Bob is served.
        as_alice = subprocess.run(["setpriv", f"--reuid={ALICE}", f"--regid={ALICE}", "--clear-groups",
                                   "/usr/bin/python3", "-c", IDLE_CLIENT, authd.socket, "8"],
                                  capture_output=True, text=True, timeout=30)
        assert as_alice.stdout.startswith("1 too many requests from this user"), as_alice.stdout + as_alice.stderr
        assert authd.sign(user=BOB).startswith("corral1.")
        # A connection that sends nothing is closed by corral-authd (after 2 s) ...
        import socket as sk
        idle = sk.socket(sk.AF_UNIX)
        idle.connect(authd.socket)
        idle.settimeout(20)
        assert idle.recv(3) == b""
        idle.close()
        # ... and when Alice's connections end, her slots are free again.
        again = subprocess.run(["setpriv", f"--reuid={ALICE}", f"--regid={ALICE}", "--clear-groups",
                                "/usr/bin/python3", "-c", IDLE_CLIENT, authd.socket, "0"],
                               capture_output=True, text=True, timeout=30)
        assert again.stdout.startswith("0 corral1."), again.stdout + again.stderr
    finally:
        authd.stop()
        shutil.rmtree(public, ignore_errors=True)
