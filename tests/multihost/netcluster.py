"""A corral cluster across separate network stacks (netns_hosts): a controller host
`ctl`, a login host `login` for clients, and compute hosts c1..cN, each with its own
munged (its own socket, the site's shared key). corrald listens on TCP; every agent is a
real node (no --nodes: hwloc discovery, named after its host) that reaches the controller
by name over TCP with MUNGE and serves steps on TCP; clients run on the login host. No
process is told a MUNGE socket: each host's is at libmunge's default path.

With auth="cluster-key" no munged runs: every host runs corral-authd (at its default socket
in the host's own /run) with the cluster key, corrald and the agents sign with the key.

Used as the `net_cluster` fixture (import it into a test module); `NetCluster(...)` for
a cluster a test shapes itself. Everything is stopped and removed at the end.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from conftest import (SOURCE_DIR, ClusterQueries, binary, cgroup2_mount,  # noqa: E402,F401
                      log_tail, remove_agent_cgroups, stop_process, wait_until, write_key_file)
from munge_daemon import Munged, have_munged  # noqa: E402
from netns_hosts import Network, can_make_hosts  # noqa: E402
from tls_certs import make_ca, make_cert  # noqa: E402

CONTROLLER_PORT = 6817
STEP_PORT = 6818

requires_hosts = pytest.mark.skipif(not (can_make_hosts() and have_munged()),
                                    reason="needs root, unshare/nsenter/ip and munge")


class NetCluster(ClusterQueries):
    def __init__(self, computes=4, node_timeout="3s", sets=(), agent_args=(), tls=False, auth="munge"):
        self.compute_names = [f"c{i}" for i in range(1, computes + 1)]
        self.net = Network(["ctl", "login", *self.compute_names])
        self.dir = tempfile.mkdtemp(prefix="corral-mh-")
        os.chmod(self.dir, 0o755)
        self.key = os.urandom(1024)  # the site's MUNGE key, on every host
        self.munged = {}
        self.auth = auth
        self.authd = {}
        self.sets = ["controller.heartbeat-interval=0.5s", f"controller.node-timeout={node_timeout}",
                     "controller.kill-grace=1s", *sets]
        self.agent_args = [str(a) for a in agent_args]
        self.key_file = write_key_file(os.path.join(self.dir, "cluster.key"))
        self.controller = None
        self.agents = {}
        self.cgroup = None
        mount = cgroup2_mount()
        if mount is not None:
            path = os.path.join(mount, "corral-mh-" + os.path.basename(self.dir))
            try:
                os.mkdir(path)
                self.cgroup = path
            except OSError:
                pass
        self.uri = f"ctl:{CONTROLLER_PORT}"
        self.tls = None
        if tls:  # a site CA, and a certificate per host for its name (docs/install.md)
            ca = make_ca(self.dir, "site-ca")
            self.tls = {"ca": ca[1]}
            for name in ["ctl", *self.compute_names]:
                self.tls[name] = make_cert(self.dir, ca, name, names=(name,))

    # ------------------------------------------------------------ hosts and daemons

    def host(self, name):
        return self.net[name]

    def start_munged(self, name, key=None):
        h = self.host(name)
        m = Munged(key=key if key is not None else self.key, prefix=h.prefix(), origin=h.addr,
                   dir=h.munge_dir, socket_name="munge.socket.2").start()
        self.munged[name] = m
        return m

    def start_authd(self, name):
        """corral-authd on host `name`, at its default socket (/run is the host's own)."""
        self.authd[name] = self.host(name).spawn(
            [binary("corral-authd"), "--key-file", self.key_file, "--log-file", os.path.join(self.dir, f"{name}-authd.log")],
            os.path.join(self.dir, f"{name}-authd.out"))
        return self.authd[name]

    def start_signers(self):
        for name in self.net.hosts:
            if self.auth == "cluster-key":
                self.start_authd(name)
            else:
                self.start_munged(name)
        if self.auth == "cluster-key":  # ready when every host's socket answers
            wait_until(lambda: all(self.host(n).run(["test", "-S", "/run/corral-authd/authd.sock"]).returncode == 0
                                   for n in self.net.hosts), timeout=20, what="corral-authd on every host")

    def start_controller(self):
        config = os.path.join(self.dir, "corral.toml")
        with open(config, "w") as f:
            f.write(f'[controller]\nlisten = ["0.0.0.0:{CONTROLLER_PORT}"]\nauth = "{self.auth}"\n')
            if self.tls:
                f.write(f'tls-key = "{self.tls["ctl"][0]}"\ntls-cert = "{self.tls["ctl"][1]}"\n')
        args = [binary("corrald"), "--config", config, "--socket", os.path.join(self.dir, "corrald.sock"),
                "--state-dir", os.path.join(self.dir, "state"),
                "--log-file", os.path.join(self.dir, "corrald.log"),
                "--set", f"controller.key-file={self.key_file}"]
        for s in self.sets:
            args += ["--set", s]
        self.controller = self.host("ctl").spawn(args, os.path.join(self.dir, "corrald.out"))
        return self.controller

    def start_agent(self, name):
        state = os.path.join(self.dir, name)
        args = [binary("corral-node"), "--controller", self.uri, "--listen", f"0.0.0.0:{STEP_PORT}", "--state-dir", state,
                "--log-file", os.path.join(self.dir, f"{name}.log"),
                "--cgroups", self.cgroup if self.cgroup else "none", "--auth", self.auth, *self.agent_args]
        if self.auth == "cluster-key":
            args += ["--key-file", self.key_file]
        if self.tls:
            args += ["--tls-ca", self.tls["ca"], "--tls-key", self.tls[name][0], "--tls-cert", self.tls[name][1]]
        self.agents[name] = self.host(name).spawn(args, os.path.join(self.dir, f"{name}.out"))
        return self.agents[name]

    def start(self, timeout=60):
        self.start_signers()
        self.start_controller()
        for name in self.compute_names:
            self.start_agent(name)
        self.wait_nodes_up(len(self.compute_names), timeout=timeout)
        return self

    # ------------------------------------------------------------ clients (on the login host)

    def client_env(self, **extra):
        env = dict(os.environ, CORRAL_URI=self.uri, CORRAL_AUTH=self.auth, **extra)
        if self.tls:
            env.setdefault("CORRAL_TLS_CA", self.tls["ca"])
        env.pop("CORRAL_MUNGE_SOCKET", None)  # each host's own, at libmunge's default path
        return env

    def corral(self, *args, check=True, user=None, host="login", input=None, timeout=60, env=None):
        cmd = [binary("corral"), *map(str, args)]
        if user is not None:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
        proc = self.host(host).run(cmd, env=env or self.client_env(), input=input, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"corral {' '.join(map(str, args))} on {host} exited {proc.returncode}\n"
                                 f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\n{self.logs()}")
        return proc

    def corral_bg(self, *args, host="login", user=None):
        """A client left running (corral run / alloc); its output in pipes."""
        cmd = [binary("corral"), *map(str, args)]
        if user is not None:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
        p = subprocess.Popen(self.host(host).prefix() + cmd, env=self.client_env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
        self.host(host).procs.append(p)  # stopped with its host if the test did not wait for it
        return p

    def batch(self, script, *args, user=None):
        return int(self.corral("batch", "--parsable", *args, "-", input=script, user=user).stdout)

    def batch_output(self, script, *args, user=None, name="job.out"):
        """Runs a batch job to its end (it must complete) and returns its output's words."""
        out = os.path.join(self.shared_dir(), name)
        info = self.wait_job(self.batch(script, *args, "-o", out, user=user))
        text = open(out).read() if os.path.exists(out) else ""
        assert info["result"] == "COMPLETED", (info, text)
        return text.split()

    def jobs_in(self, state):
        """Jobs in `state`, from `corral queue --json`."""
        return [j for j in self.jobs() if j["state"] == state]

    def log(self, name):
        with open(os.path.join(self.dir, name), errors="replace") as f:
            return f.read()

    def logs(self):
        names = ["corrald.log", "corrald.out"]
        for n in self.compute_names:
            names += [f"{n}.log", f"{n}.out"]
        return "".join(log_tail(os.path.join(self.dir, n)) for n in names)

    # ------------------------------------------------------------ teardown

    def stop(self):
        for p in self.agents.values():
            stop_process(p, signal.SIGTERM)
        stop_process(self.controller, signal.SIGTERM)
        for m in self.munged.values():
            m.stop()
        for p in self.authd.values():
            stop_process(p, signal.SIGTERM)
        self.net.stop()
        remove_agent_cgroups(self.cgroup, [os.path.join(self.dir, n) for n in self.compute_names])
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def net_cluster():
    c = NetCluster()
    try:
        c.start()
        yield c
    finally:
        c.stop()
