"""corrald over TCP: every request authenticated with MUNGE. A client's uid and gid come
from its credential (the same rules as on the Unix socket then apply); a request with no
credential, a replayed one, one for another purpose or one from a munged with another key
is refused, and corrald's log says why. Needs root (munged) and Debian's munge."""
import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import Cluster, binary, wait_until
from munge_daemon import Munged, have_munged

ALICE = 23411

pytestmark = pytest.mark.skipif(not have_munged(), reason="needs root and munge (munged)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def munge_cluster(site, **opts):
    """A started cluster with the site's munged, both stopped at the end."""
    c = Cluster(**opts)
    c.munged = site
    c.munge_env = dict(c.env, CORRAL_MUNGE_SOCKET=site.socket)
    try:
        c.start()
        yield c
    finally:
        c.stop()
        site.stop()


@pytest.fixture
def tcp_cluster(tmp_path):
    """corrald listening on TCP with MUNGE; its agents on its Unix socket."""
    site = Munged().start()
    port = free_port()
    config = tmp_path / "corral.toml"
    config.write_text(f'[controller]\nlisten = ["127.0.0.1:{port}"]\nmunge-socket = "{site.socket}"\n')
    with munge_cluster(site, size=2, cores=2, config=config) as c:
        c.tcp = f"127.0.0.1:{port}"
        c.tcp_env = dict(c.munge_env, CORRAL_URI=c.tcp)
        yield c


def corral_tcp(c, *args, env=None, user=None, check=True):
    cmd = [binary("corral"), *map(str, args)]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    proc = subprocess.run(cmd, env=env or c.tcp_env, capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def probe(c, *cred):
    return subprocess.run([binary("corral-rpc-probe"), c.tcp, *cred], capture_output=True, text=True,
                          timeout=30)


def log(c):
    return open(os.path.join(c.dir, "corrald.log")).read()


def test_jobs_run_through_tcp_as_the_munge_user(tcp_cluster):
    c = tcp_cluster
    assert "listening on " + c.tcp in log(c)
    out = corral_tcp(c, "run", "-N2", "hostname").stdout.split()
    assert len(out) == 2
    job = int(subprocess.run([binary("corral"), "batch", "--parsable", "-"], env=c.tcp_env,
                             input="#!/bin/sh\nexec sleep 300\n", capture_output=True, text=True,
                             check=True).stdout)
    assert c.job(job)["userid"] == 0
    # Alice's credential says Alice: she sees the job but may not cancel root's.
    refused = corral_tcp(c, "cancel", job, user=ALICE, check=False)
    assert refused.returncode != 0 and "belongs to" in refused.stderr, refused.stderr
    assert corral_tcp(c, "queue", user=ALICE).returncode == 0
    corral_tcp(c, "cancel", job)
    assert c.wait_job(job)["result"] == "CANCELED"


def test_requests_without_a_good_credential_are_refused_and_logged(tcp_cluster):
    c = tcp_cluster
    none = probe(c)
    assert none.returncode == 1 and none.stdout.startswith("16 "), none.stdout  # UNAUTHENTICATED
    assert "no MUNGE credential" in none.stdout

    cred = c.munged.credential("corral-request-v1")
    assert probe(c, cred).returncode == 0
    replay = probe(c, cred)
    assert replay.returncode == 1 and "Replayed credential" in replay.stdout, replay.stdout

    other_purpose = probe(c, c.munged.credential())
    assert other_purpose.returncode == 1 and "not made for a corral request" in other_purpose.stdout

    garbage = probe(c, "MUNGE:not-a-credential:")
    assert garbage.returncode == 1 and "MUNGE credential refused" in garbage.stdout, garbage.stdout

    # A client whose munged has another key (another site, or a stolen machine).
    stranger = Munged().start()
    try:
        foreign = corral_tcp(c, "queue", check=False,
                             env=dict(c.tcp_env, CORRAL_MUNGE_SOCKET=stranger.socket))
        assert foreign.returncode != 0 and "Invalid credential" in foreign.stderr, foreign.stderr
    finally:
        stranger.stop()
    text = log(c)
    for why in ("no MUNGE credential", "Replayed credential", "Invalid credential"):
        assert "refused a request from ipv4:127.0.0.1" in text and why in text, why


def test_listen_without_munged_stops_corrald_with_a_message(tmp_path):
    config = tmp_path / "corral.toml"
    config.write_text(f'[controller]\nlisten = ["127.0.0.1:{free_port()}"]\n'
                      f'munge-socket = "{tmp_path}/no-munged"\n')
    proc = subprocess.run([binary("corrald"), "--socket", str(tmp_path / "s.sock"), "--state-dir",
                           str(tmp_path / "state"), "--config", str(config)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert "controller.listen needs munged" in proc.stderr, proc.stderr


def start_tcp_agent(c, nodes, munge_socket, name):
    log = os.path.join(c.dir, f"{name}.log")
    proc = subprocess.Popen(
        [binary("corral-node"), "--controller", c.tcp, "--nodes", nodes, "--cores", "2",
         "--state-dir", os.path.join(c.dir, name), "--log-file", log, "--key-file", c.key_file,
         "--cgroups", "none", "--munge-socket", munge_socket],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        start_new_session=True)
    c.extra_agents = getattr(c, "extra_agents", []) + [proc]
    return proc, log


def test_an_agent_over_tcp_registers_only_the_nodes_of_its_host(tcp_cluster):
    c = tcp_cluster
    try:
        # "localhost" resolves to the address munged puts in this host's credentials.
        _, good_log = start_tcp_agent(c, "localhost", c.munged.socket, "tcp-agent")
        c.wait_node("localhost", lambda n: n["state"] in ("idle", "up"), timeout=30,
                    what="the TCP agent's node to come up")
        out = corral_tcp(c, "run", "-w", "localhost", "hostname").stdout.strip()
        assert out
        # A process that claims another host's node, and one whose munged has another key.
        start_tcp_agent(c, "node7", c.munged.socket, "liar")
        stranger = Munged().start()
        try:
            start_tcp_agent(c, "localhost2", stranger.socket, "stranger")
            wait_until(lambda: "may not register node 'node7': the name does not resolve" in log(c)
                       and "Invalid credential" in log(c), timeout=20,
                       what="corrald to refuse both agents", cluster=c)
        finally:
            stranger.stop()
        names = {n["name"] for n in json.loads(c.corral("nodes", "--json").stdout)}
        assert "node7" not in names and "localhost2" not in names, names
    finally:
        for p in getattr(c, "extra_agents", []):
            p.terminate()
            p.wait(timeout=10)


@pytest.fixture
def tcp_steps_cluster(tmp_path):
    """One agent hosting two nodes whose StepService is on TCP (--listen HOST:PORT)."""
    site = Munged().start()
    step_port = free_port()
    with munge_cluster(site, size=2, agents=1, cores=2,
                       agent_args=["--listen", f"127.0.0.1:{step_port}", "--munge-socket", site.socket]) as c:
        c.step_addr = f"127.0.0.1:{step_port}"
        yield c


def test_steps_over_tcp_need_a_munge_credential(tcp_steps_cluster):
    c = tcp_steps_cluster
    job = int(c.corral("batch", "--parsable", "-N2", "-", input="#!/bin/sh\nexec sleep 300\n").stdout)
    c.wait_job(job, "RUN")
    run = subprocess.run([binary("corral"), "run", f"--jobid={job}", "-N2", "-n2", "hostname"],
                         env=c.munge_env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and len(run.stdout.split()) == 2, run.stderr
    # The step manager's agent answers no one it cannot identify.
    nomunge = subprocess.run([binary("corral"), "run", f"--jobid={job}", "hostname"],
                             env=dict(c.munge_env, CORRAL_MUNGE_SOCKET="/nonexistent/munge.sock"),
                             capture_output=True, text=True, timeout=60)
    assert nomunge.returncode != 0 and "/nonexistent/munge.sock" in nomunge.stderr, nomunge.stderr
    bare = subprocess.run([binary("corral-rpc-probe"), "--fence", c.step_addr], capture_output=True,
                          text=True, timeout=30)
    assert bare.returncode == 1 and bare.stdout.startswith("16 "), bare.stdout
    agent_log = open(os.path.join(c.dir, "agent-0.log")).read()
    assert "step service: refused a request from ipv4:127.0.0.1" in agent_log
    c.corral("cancel", job)


def test_an_agent_obeys_only_a_controller_that_proves_itself(tmp_path):
    """A corrald run by an ordinary user on the cluster's network (with the site's munged,
    so its own credentials are genuine): the agent refuses it before it registers, and runs
    nothing for it."""
    site = Munged().start()
    fake = Path(tempfile.mkdtemp(prefix="corral-fake-ctld-"))  # pytest's tmp_path is root's only
    os.chmod(fake, 0o755)
    os.chown(fake, ALICE, ALICE)
    port = free_port()
    config = fake / "corral.toml"
    config.write_text(f'[controller]\nlisten = ["127.0.0.1:{port}"]\nmunge-socket = "{site.socket}"\n')
    os.chown(config, ALICE, ALICE)
    ctld = subprocess.Popen(["setpriv", f"--reuid={ALICE}", f"--regid={ALICE}", "--clear-groups",
                             binary("corrald"), "--socket", str(fake / "s.sock"), "--state-dir",
                             str(fake / "state"), "--config", str(config), "--log-file",
                             str(fake / "corrald.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    agent_log = tmp_path / "agent.log"
    agent = None
    try:
        wait_until(lambda: (fake / "s.sock").exists(), timeout=20, what="the fake corrald to start")
        # Its step socket lives in its state directory: a short path, whatever the checkout's.
        agent = subprocess.Popen(
            [binary("corral-node"), "--controller", f"127.0.0.1:{port}", "--nodes", "localhost",
             "--state-dir", str(fake / "agent"), "--log-file", str(agent_log), "--cgroups", "none",
             "--munge-socket", site.socket], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def refused():
            assert agent.poll() is None, f"the agent exited ({agent.returncode})"
            return agent_log.exists() and "not root: refused" in agent_log.read_text()
        try:
            wait_until(refused, timeout=20, what="the agent to refuse the fake controller")
        except BaseException:
            for log in (agent_log, fake / "corrald.log"):
                print(f"--- {log}:\n{log.read_text() if log.exists() else '(none)'}")
            raise
        assert "registered with the controller" not in agent_log.read_text()
        # It never told the impostor which nodes it has.
        assert "registered" not in (fake / "corrald.log").read_text()
    finally:
        for p in (agent, ctld):
            if p is not None:
                p.terminate()
                p.wait(timeout=10)
        site.stop()
        shutil.rmtree(fake, ignore_errors=True)
