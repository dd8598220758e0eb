"""TLS on corral's TCP connections (controller.tls-cert/tls-key, corral-node --tls-ca,
--tls-cert/--tls-key, CORRAL_TLS_CA for clients): with a site CA, clients and agents reach
corrald and the step managers over TLS, still identified by MUNGE; a client that does not
trust the CA, or speaks plaintext, gets nothing. Needs root (munged) and openssl."""
import os
import shutil
import subprocess

import pytest

from conftest import binary
from munge_daemon import Munged, have_munged
from test_tcp_munge import free_port, munge_cluster
from tls_certs import make_ca, make_cert

pytestmark = pytest.mark.skipif(not (have_munged() and shutil.which("openssl")),
                                reason="needs root, munge and openssl")


@pytest.fixture
def tls_cluster(tmp_path):
    d = str(tmp_path)
    ca = make_ca(d, "site-ca")
    server = make_cert(d, ca, "server")
    os.chmod(d, 0o755)  # clients of any user read the CA certificate
    site = Munged().start()
    port, step_port = free_port(), free_port()
    config = tmp_path / "corral.toml"
    config.write_text(f'[controller]\nlisten = ["127.0.0.1:{port}"]\nmunge-socket = "{site.socket}"\n'
                      f'tls-cert = "{server[1]}"\ntls-key = "{server[0]}"\n')
    agent_args = ["--listen", f"127.0.0.1:{step_port}", "--munge-socket", site.socket, "--tls-ca", ca[1],
                  "--tls-cert", server[1], "--tls-key", server[0]]
    with munge_cluster(site, size=2, agents=1, cores=2, config=config, agent_args=agent_args) as c:
        c.tcp = f"127.0.0.1:{port}"
        c.ca = ca[1]
        c.tls_env = dict(c.munge_env, CORRAL_URI=c.tcp, CORRAL_TLS_CA=ca[1])
        c.other_ca = make_ca(d, "other-ca")[1]
        yield c


def corral(env, *args):
    return subprocess.run([binary("corral"), *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=60)


def test_clients_and_steps_over_tls(tls_cluster):
    c = tls_cluster
    assert "(TCP, TLS, MUNGE credentials)" in open(os.path.join(c.dir, "corrald.log")).read()
    ok = corral(c.tls_env, "run", "-N2", "hostname")
    assert ok.returncode == 0 and len(ok.stdout.split()) == 2, ok.stderr
    # A step through the agent's TLS step service, from a client that trusts the CA.
    job = int(subprocess.run([binary("corral"), "batch", "--parsable", "-N2", "-"], env=c.tls_env,
                             input="#!/bin/sh\nexec sleep 300\n", capture_output=True, text=True,
                             check=True).stdout)
    c.wait_job(job, "RUN")
    step = corral(c.tls_env, "run", f"--jobid={job}", "-N2", "-n2", "hostname")
    assert step.returncode == 0 and len(step.stdout.split()) == 2, step.stderr
    # Plaintext to a TLS port, or TLS with the wrong CA: refused before anything is said.
    plain = corral(dict(c.tls_env, CORRAL_TLS_CA=""), "queue")
    assert plain.returncode != 0, plain.stdout
    wrong = corral(dict(c.tls_env, CORRAL_TLS_CA=c.other_ca), "queue")
    assert wrong.returncode != 0, wrong.stdout
    missing = corral(dict(c.tls_env, CORRAL_TLS_CA="/nonexistent/ca.pem"), "queue")
    assert missing.returncode != 0 and "cannot read '/nonexistent/ca.pem'" in missing.stderr, missing.stderr
    corral(c.tls_env, "cancel", job)


def start_agent(c, name, ca):
    log = os.path.join(c.dir, f"{name}.log")
    p = subprocess.Popen([binary("corral-node"), "--controller", c.tcp, "--nodes", "localhost", "--agent-id", name,
                          "--state-dir", os.path.join(c.dir, name), "--log-file", log, "--cgroups", "none",
                          "--munge-socket", c.munged.socket, "--tls-ca", ca],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return p, log


def test_agents_reach_the_controller_over_tls(tls_cluster):
    c = tls_cluster
    good, good_log = start_agent(c, "tls-agent", c.ca)
    bad, bad_log = start_agent(c, "wrong-ca", c.other_ca)
    try:
        c.wait_node("localhost", lambda n: not n["state"].startswith("down"), timeout=30,
                    what="the agent over TLS to register")
        assert "registered with the controller" in open(good_log).read()
        assert "registered with the controller" not in open(bad_log).read()
        assert "cannot reach the controller" in open(bad_log).read()
    finally:
        for p in (good, bad):
            p.terminate()
            p.wait(timeout=10)
