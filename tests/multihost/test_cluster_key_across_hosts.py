"""A site without MUNGE, across hosts: every host runs corral-authd with the cluster key
(no munged anywhere); corrald and the agents sign with the key. Jobs, steps and an MPICH
program span the hosts as their user, and what an attacker on the network tries is refused
with a log line that says why."""
import os

import pytest

from netcluster import NetCluster, binary, requires_hosts, wait_until
from test_spanning import mpi_program  # noqa: F401

pytestmark = requires_hosts
ALICE = 23411


@pytest.fixture(scope="module")
def key_cluster():
    c = NetCluster(auth="cluster-key")
    try:
        c.start()
        yield c
    finally:
        c.stop()


def probe(c, host, *args):
    return c.host(host).run([binary("corral-rpc-probe"), *args], timeout=30)


def test_jobs_and_steps_span_the_hosts_as_their_user(key_cluster, mpi_program):  # noqa: F811
    c = key_cluster
    assert not c.munged
    assert "(TCP, cluster-key credentials)" in c.log("corrald.log")
    out = c.corral("run", "-N4", "sh", "-c", "echo $(hostname):$(id -u)", user=ALICE).stdout.split()
    assert sorted(out) == [f"c{h}:{ALICE}" for h in (1, 2, 3, 4)], out
    script = f"#!/bin/sh\n{binary('corral')} run -N4 -n8 sh -c 'echo $(hostname):$(id -u)'\n"
    lines = c.batch_output(script, "-N4", "-n8", user=ALICE)
    assert sorted(lines) == sorted(f"c{h}:{ALICE}" for h in (1, 1, 2, 2, 3, 3, 4, 4)), lines
    # A job that passes none of its submitter's environment still runs steps: its agent
    # tells its tasks how the site authenticates (CORRAL_AUTH).
    lines = c.batch_output(f"#!/bin/sh\necho auth=$CORRAL_AUTH\n{binary('corral')} run -N2 hostname\n", "-N2",
                           "--export=NONE", user=ALICE, name="bare.out")
    assert lines[0] == "auth=cluster-key" and len(lines) == 3, lines
    proc = c.corral("run", "-N4", "-n8", mpi_program, timeout=180, user=ALICE)
    assert sorted(proc.stdout.splitlines()) == sorted(
        [f"rank {r} of 8" for r in range(8)] + ["ring and allreduce ok"]), proc.stdout + proc.stderr


def test_what_an_attacker_on_the_network_tries_is_refused(key_cluster):
    c = key_cluster
    bare = probe(c, "login", c.uri)
    assert bare.returncode == 1 and "no cluster-key credential" in bare.stdout, bare.stdout
    cred = probe(c, "login", "--sign", "/run/corral-authd/authd.sock").stdout.strip()
    assert probe(c, "login", c.uri, cred).returncode == 0
    # The same credential again, from the same host and from another one.
    for host in ("login", "c3"):
        replay = probe(c, host, c.uri, cred)
        assert replay.returncode == 1 and "a replay" in replay.stdout, replay.stdout
    # A user on a compute host cannot read the key, so cannot be an agent (or a controller).
    user_dir = c.shared_dir("user-agent")
    agent = c.host("c1").run(["setpriv", f"--reuid={ALICE}", f"--regid={ALICE}", "--clear-groups",
                              binary("corral-node"), "--controller", c.uri, "--auth", "cluster-key",
                              "--key-file", c.key_file, "--state-dir", os.path.join(user_dir, "state")])
    assert agent.returncode != 0 and "cannot read key file" in agent.stderr, agent.stderr
    # A credential made on c3 names c3: it cannot register c2's node for root on c3.
    state = os.path.join(c.dir, "liar")
    c.host("c3").spawn([binary("corral-node"), "--controller", c.uri, "--nodes", "c2", "--agent-id", "liar",
                        "--state-dir", state, "--cgroups", "none", "--auth", "cluster-key", "--key-file",
                        c.key_file, "--log-file", os.path.join(c.dir, "liar.log")],
                       os.path.join(c.dir, "liar.out"))
    wait_until(lambda: "may not register node 'c2'" in c.log("corrald.log"), timeout=30,
               what="the lying agent to be refused", cluster=c)
    log = c.log("corrald.log")
    assert f"the agent at {c.host('c3').addr} may not register node 'c2'" in log
    assert f"refused a request from ipv4:{c.host('c3').addr}" in log and "a replay" in log
