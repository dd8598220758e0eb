"""What an attacker on the cluster's network tries, refused with a log line that says why:
a client whose munged has another key, a fake agent (another host's node; a user's
process), a fake controller that took over the controller's address, a replayed
credential, and a plain request with no credential at all."""
import os
import time

from netcluster import CONTROLLER_PORT, Munged, binary, net_cluster, requires_hosts, wait_until  # noqa: F401

pytestmark = requires_hosts
ALICE = 23411


def probe(c, host, target, *cred):
    return c.host(host).run([binary("corral-rpc-probe"), target, *cred], timeout=30)


def test_a_client_with_another_key_and_hand_made_requests(net_cluster):
    c = net_cluster
    stranger = Munged(prefix=c.host("login").prefix(), origin=c.host("login").addr).start()
    try:
        env = dict(c.client_env(), CORRAL_MUNGE_SOCKET=stranger.socket)
        foreign = c.corral("queue", check=False, env=env)
        assert foreign.returncode != 0 and "Invalid credential" in foreign.stderr, foreign.stderr
    finally:
        stranger.stop()
    bare = probe(c, "login", c.uri)
    assert bare.returncode == 1 and "no MUNGE credential" in bare.stdout, bare.stdout
    cred = c.munged["login"].credential("corral-request-v1")
    assert probe(c, "login", c.uri, cred).returncode == 0
    # The same credential again, from the same host and from another one.
    for host in ("login", "c3"):
        replay = probe(c, host, c.uri, cred)
        assert replay.returncode == 1 and "Replayed credential" in replay.stdout, replay.stdout
    log = c.log("corrald.log")
    for why in ("Invalid credential", "no MUNGE credential", "Replayed credential"):
        assert why in log, why
    assert f"refused a request from ipv4:{c.host('c3').addr}" in log


def test_fake_agents_are_refused(net_cluster):
    c = net_cluster
    state = os.path.join(c.dir, "liar")
    # Root on c1 claims c2's node; a user on c1 runs an agent for c1 itself.
    liar = c.host("c1").spawn([binary("corral-node"), "--controller", c.uri, "--nodes", "c2", "--agent-id",
                               "liar", "--state-dir", state, "--cgroups", "none",
                               "--log-file", os.path.join(c.dir, "liar.log")], os.path.join(c.dir, "liar.out"))
    user_dir = c.shared_dir("user-agent")
    user = c.host("c1").spawn(["setpriv", f"--reuid={ALICE}", f"--regid={ALICE}", "--clear-groups",
                               binary("corral-node"), "--controller", c.uri, "--agent-id", "mine",
                               "--state-dir", os.path.join(user_dir, "state"), "--cgroups", "none",
                               "--log-file", os.path.join(user_dir, "agent.log")],
                              os.path.join(user_dir, "agent.out"))
    try:
        wait_until(lambda: "may not register node 'c2'" in c.log("corrald.log")
                   and "may not register node agents" in c.log("user-agent/agent.log")
                   and "refused agent mine at" in c.log("corrald.log"),
                   timeout=30, what="both fake agents to be refused", cluster=c)
        assert f"the agent at {c.host('c1').addr} may not register node 'c2': it resolves to " \
               f"{c.host('c2').addr}" in c.log("corrald.log")
        nodes = {n["name"]: n for n in c.nodes()}
        assert nodes["c2"]["agent"] == "c2" and nodes["c1"]["agent"] == "c1", nodes
        assert "mine" not in nodes and "liar" not in {n["agent"] for n in nodes.values()}
    finally:
        for p in (liar, user):
            p.terminate()
            p.wait(timeout=10)


def test_a_fake_controller_at_the_controllers_address_is_not_obeyed(net_cluster):
    """Root on the login host takes over the controller's address (the switch now sends
    it there) and runs its own corrald with the site's munged: genuine credentials, but
    from the wrong host. The agents that reconnect to it refuse it and run nothing."""
    c = net_cluster
    login, ctl = c.host("login"), c.host("ctl")
    fake_dir = os.path.join(c.dir, "fake")
    os.makedirs(fake_dir)
    with open(os.path.join(fake_dir, "corral.toml"), "w") as f:
        f.write(f'[controller]\nlisten = ["0.0.0.0:{CONTROLLER_PORT}"]\n')
    registered = {n: c.log(f"{n}.log").count("registered with the controller") for n in c.compute_names}
    login.run(["ip", "addr", "add", f"{ctl.addr}/32", "dev", "eth0"], check=True)
    c.net.switch_cmd("ip", "route", "replace", f"{ctl.addr}/32", "dev", login.port)
    fake = login.spawn([binary("corrald"), "--config", os.path.join(fake_dir, "corral.toml"),
                        "--socket", os.path.join(fake_dir, "s.sock"), "--state-dir", os.path.join(fake_dir, "state"),
                        "--log-file", os.path.join(fake_dir, "corrald.log")], os.path.join(fake_dir, "out"))
    try:
        wait_until(lambda: all(f"the controller's credential comes from {login.addr}, not from ctl: refused"
                               in c.log(f"{n}.log") for n in c.compute_names),
                   timeout=60, what="every agent to refuse the fake controller", cluster=c)
        # The fake took their registrations; none of them took its answer.
        assert registered == {n: c.log(f"{n}.log").count("registered with the controller")
                              for n in c.compute_names}
    finally:
        fake.terminate()
        fake.wait(timeout=10)
        login.run(["ip", "addr", "del", f"{ctl.addr}/32", "dev", "eth0"])
        c.net.switch_cmd("ip", "route", "replace", f"{ctl.addr}/32", "dev", ctl.port)
    # The real controller is back where it was: the agents return to it.
    time.sleep(1)
    c.wait_nodes_up(4, timeout=60)
    assert sorted(c.corral("run", "-N4", "hostname").stdout.split()) == ["c1", "c2", "c3", "c4"]
