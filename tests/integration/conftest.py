"""Shared fixtures for corral's integration tests: real corrald and corral-node processes.

The `cluster` fixture starts the controller and its agents directly (not through
`corral start`) so a test can kill -9 and restart the controller or kill one agent.
ctest sets CORRAL_BUILD_DIR (binaries in $CORRAL_BUILD_DIR/bin) and CORRAL_SOURCE_DIR.

Size a cluster with a marker, `@pytest.mark.cluster(size=8, agents=2, cores=2)`, or by
indirect parametrisation, `@pytest.mark.parametrize("cluster", [2, {"size": 4}],
indirect=True)`. Tests that use `cluster` fail (never skip) when corrald is missing.
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("CORRAL_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("CORRAL_BUILD_DIR", SOURCE_DIR / "build"))
BIN_DIR = BUILD_DIR / "bin"

# Short timings keep failure detection tests fast.
FAST_SETTINGS = (
    "controller.heartbeat-interval=0.5s",
    "controller.node-timeout=3s",
    "controller.kill-grace=1s",
)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "cluster(size=4, agents=None, cores=4, gpus=0, memory='16GiB', sets=(), "
        "config=None, agent_args=()): shape of the `cluster` fixture")


def binary(name):
    """Path of a built executable; fails the test (not skips) when it is missing."""
    path = BIN_DIR / name
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: build it first (cmake --build {BUILD_DIR} "
                    f"--target {name}) or set CORRAL_BUILD_DIR", pytrace=False)
    return str(path)


def run_corral(*args, env=None, input=None, timeout=60, check=False, user=None, cwd=None):
    """Runs build/bin/corral; returns the CompletedProcess (text mode)."""
    cmd = [binary("corral"), *map(str, args)]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    proc = subprocess.run(cmd, env=env if env is not None else dict(os.environ),
                          input=input, capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def split_nodes(nodes, agents):
    """The same split as `corral start`: contiguous, nearly equal parts."""
    out, first = [], 0
    for i in range(agents):
        count = nodes // agents + (1 if i < nodes % agents else 0)
        if count == 0:
            continue
        last = first + count - 1
        out.append(f"node{first}" if count == 1 else f"node[{first}-{last}]")
        first = last + 1
    return out


def log_tail(path, lines=20):
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return f"  ({path} is missing)\n"
    return f"  last lines of {path}:\n" + "".join(f"    {l}\n" for l in text[-lines:])


def wait_until(predicate, timeout=30, interval=0.2, what="the condition", cluster=None):
    """Polls predicate() until it returns something truthy, which is returned; fails the
    test after `timeout` seconds, with the cluster's logs when one is given."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    logs = cluster.logs() if cluster is not None else ""
    pytest.fail(f"timed out after {timeout}s waiting for {what} (last: {last!r})\n{logs}",
                pytrace=False)


# Job helpers that take a Cluster (used by the lifecycle, dependency and batch tests).

def submit_job(cluster, *args, **kw):
    """`corral submit ARGS` (cwd=, env=, user= pass through); returns the job id."""
    return int(cluster.corral("submit", *args, **kw).stdout.split()[0])


def job_until(cluster, jobid, pred, timeout=20, what="the condition"):
    """Polls `show job` until pred(job dict) holds; returns the job dict."""
    def check():
        info = cluster.job(jobid)
        return info if pred(info) else None
    return wait_until(check, timeout=timeout, interval=0.05,
                      what=f"job {jobid}: {what}", cluster=cluster)


def read_env(path):
    """KEY=VALUE lines that `env` in a task wrote to `path`, as a dict."""
    env = {}
    for line in Path(path).read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            env[key] = value
    return env


def event_names(cluster, jobid):
    """The names in a job's eventlog, in order."""
    return [ev["name"] for ev in cluster.eventlog(jobid)]


def write_key_file(path):
    """The cluster key corrald and every agent share: hex, private to its owner (0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    return path


def cgroup_v1_bases():
    """This process's own cgroup in each cgroup v1 hierarchy of a limit controller (where
    agents make their trees for the limits cgroup v2 does not give them)."""
    mounts = {}
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 3 and fields[2] == "cgroup":
                for opt in fields[3].split(","):
                    if opt in ("memory", "pids", "cpuset"):
                        mounts[opt] = fields[1]
    bases = []
    with open("/proc/self/cgroup") as f:
        for line in f:
            parts = line.rstrip("\n").split(":", 2)
            for c in parts[1].split(",") if len(parts) == 3 else []:
                if c in mounts:
                    bases.append(mounts[c] + ("" if parts[2] == "/" else parts[2]))
    return bases


def agent_cgroup_suffix(state_dir):
    """The end of an agent's cgroup directory name: FNV-1a of its state directory, as
    TaskCgroups names it."""
    h = 2166136261
    for b in os.path.realpath(state_dir).encode():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return f"-{h:08x}"


def cgroup2_mount():
    """Where cgroup v2 is mounted, if it is and this process may create cgroups there."""
    if os.geteuid() != 0:
        return None
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 2 and fields[2] == "cgroup2":
                return fields[1]
    return None


def remove_cgroup_tree(path):
    """Kills what is left in a cgroup tree and removes it, deepest first."""
    if not os.path.isdir(path):
        return
    for _ in range(100):
        for root, dirs, _files in os.walk(path, topdown=False):
            try:
                with open(os.path.join(root, "cgroup.kill"), "w") as f:
                    f.write("1")
            except OSError:
                try:  # cgroup v1 has no cgroup.kill
                    with open(os.path.join(root, "cgroup.procs")) as f:
                        for pid in f.read().split():
                            os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            except OSError:
                pass
            try:
                os.rmdir(root)
            except OSError:
                pass
        if not os.path.isdir(path):
            return
        time.sleep(0.05)


def remove_agent_cgroups(cgroup, state_dirs):
    """The cluster's cgroup v2 parent, and what agents killed without a chance to clean up
    (their state directories `state_dirs`) left in the cgroup v1 hierarchies."""
    if cgroup:
        remove_cgroup_tree(cgroup)
    suffixes = [agent_cgroup_suffix(d) for d in state_dirs]
    for base in cgroup_v1_bases():
        for name in os.listdir(base) if os.path.isdir(base) else []:
            if name.startswith("corral-") and any(name.endswith(s) for s in suffixes):
                remove_cgroup_tree(os.path.join(base, name))


def stop_process(proc, sig):
    """Sends `sig` and waits up to 10 s, then SIGKILL; nothing for a process already gone."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class ClusterQueries:
    """What a test asks of a running cluster through `corral`, whatever runs it: needs
    self.corral(*args, check=, input=, user=, timeout=), self.controller (its Popen),
    self.start_controller(), self.logs() and self.dir."""

    def kill_controller(self, sig=signal.SIGKILL):
        stop_process(self.controller, sig)

    def restart_controller(self, timeout=30):
        """Starts a new corrald on the same state directory and waits until it answers."""
        self.start_controller()
        wait_until(lambda: self.corral("queue", "--all", "--json", check=False,
                                       timeout=15).returncode == 0,
                   timeout=timeout, what="the restarted corrald to answer", cluster=self)

    def nodes(self):
        """`corral nodes --json` as a list of dicts ([] while the controller is down)."""
        proc = self.corral("nodes", "--json", check=False, timeout=15)
        if proc.returncode != 0:
            return []
        return json.loads(proc.stdout)

    def node(self, name):
        for n in self.nodes():
            if n["name"] == name:
                return n
        return None

    def wait_nodes_up(self, n, timeout=30):
        deadline = time.monotonic() + timeout
        up = 0
        while time.monotonic() < deadline:
            if self.controller is not None and self.controller.poll() is not None:
                pytest.fail(f"corrald exited with {self.controller.returncode}\n{self.logs()}",
                            pytrace=False)
            up = sum(1 for node in self.nodes() if not node["state"].startswith("down"))
            if up >= n:
                return
            time.sleep(0.2)
        pytest.fail(f"only {up} of {n} nodes came up within {timeout}s\n{self.logs()}",
                    pytrace=False)

    def shared_dir(self, name="shared"):
        """A world-writable directory inside the cluster's directory, for jobs and clients
        that run as other users."""
        path = Path(self.dir) / name
        path.mkdir(exist_ok=True)
        os.chmod(path, 0o1777)
        return path

    def submit(self, *args, user=None):
        """`corral submit ARGS`; returns the job id."""
        proc = self.corral("submit", *args, user=user)
        return int(proc.stdout.split()[0])

    def job(self, jobid):
        """`corral show job ID --json` as a dict."""
        return json.loads(self.corral("show", "job", jobid, "--json").stdout)

    def jobs(self):
        """Every job the controller knows, active and inactive (`queue --all --json`)."""
        return json.loads(self.corral("queue", "--all", "--json").stdout)

    def eventlog(self, jobid):
        """The job's eventlog as a list of {timestamp, name, context} dicts."""
        out = self.corral("eventlog", jobid).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def wait_job(self, jobid, states=("INACTIVE",), timeout=30):
        """Waits until the job is in one of `states`; returns its `show job` dict."""
        if isinstance(states, str):
            states = (states,)

        def reached():
            j = self.job(jobid)
            return j if j["state"] in states else None
        return wait_until(reached, timeout=timeout,
                          what=f"job {jobid} to reach {'/'.join(states)}", cluster=self)

    def wait_node(self, name, predicate, timeout=30, what=None):
        """Waits until predicate(node dict) holds; returns the node dict."""
        def check():
            n = self.node(name)
            return n if n is not None and predicate(n) else None
        return wait_until(check, timeout=timeout, what=what or f"node {name} to change",
                          cluster=self)


class Cluster(ClusterQueries):
    """A controller and K agents hosting node0..node{size-1} in a temporary directory.
    Where cgroup v2 is writable, the agents contain their tasks in cgroups under a parent
    made for this cluster (self.cgroup), removed with everything in it at the end."""

    def __init__(self, size=4, agents=None, cores=4, gpus=0, memory="16GiB", sets=(),
                 config=None, agent_args=(), agent_key_file=False):
        self.size = size
        self.agent_count = min(agents or min(size, 4), size)
        self.cores, self.gpus, self.memory = cores, gpus, memory
        self.sets = list(FAST_SETTINGS) + list(sets)
        self.config = config
        self.agent_args = [str(a) for a in agent_args]  # extra corral-node flags, every agent
        # Agents check step credentials with the keys the controller sends (configless),
        # or with the cluster key file when asked.
        self.agent_key_file = agent_key_file
        self.dir = tempfile.mkdtemp(prefix="corral-test-")
        os.chmod(self.dir, 0o755)  # tests may run clients as other users
        self.socket = os.path.join(self.dir, "corrald.sock")
        self.uri = "unix:" + self.socket
        self.env = dict(os.environ, CORRAL_URI=self.uri)
        self.node_sets = split_nodes(size, self.agent_count)
        self.key_file = write_key_file(os.path.join(self.dir, "cluster.key"))
        self.controller = None
        self.agents = [None] * len(self.node_sets)
        mount = cgroup2_mount()
        self.cgroup = None
        if mount is not None:
            path = os.path.join(mount, "corral-test-" + os.path.basename(self.dir))
            try:
                os.mkdir(path)
                self.cgroup = path
            except OSError:
                pass

    # ------------------------------------------------------------ processes

    def _spawn(self, args, log, env=None):
        with open(log, "ab") as out:
            return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, env=env,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    def start_controller(self):
        args = [binary("corrald"), "--socket", self.socket,
                "--state-dir", os.path.join(self.dir, "state"),
                "--log-file", os.path.join(self.dir, "corrald.log"),
                "--set", f"controller.key-file={self.key_file}"]
        if self.config:
            args += ["--config", str(self.config)]
        for s in self.sets:
            args += ["--set", s]
        self.controller = self._spawn(args, os.path.join(self.dir, "corrald.out"))
        return self.controller

    def start_agent(self, i, env=None):
        """Starts agent i (again); `env`: its whole environment, else the test's."""
        log = os.path.join(self.dir, f"agent-{i}.log")
        args = [binary("corral-node"), "--controller", self.uri, "--nodes", self.node_sets[i],
                "--cores", str(self.cores), "--gpus", str(self.gpus), "--memory", self.memory,
                "--state-dir", os.path.join(self.dir, f"agent-{i}"), "--log-file", log, *self.agent_args]
        if self.agent_key_file:
            args += ["--key-file", self.key_file]
        if "--cgroups" not in self.agent_args:
            args += ["--cgroups", self.cgroup if self.cgroup else "none"]
        # Tasks start on two spawn threads beside the loop (one by default on CI's two
        # CPUs), so that batches of several tasks start side by side in the suite too.
        if "--spawn-threads" not in self.agent_args:
            args += ["--spawn-threads", "2"]
        self.agents[i] = self._spawn(args, os.path.join(self.dir, f"agent-{i}.out"), env=env)
        return self.agents[i]

    def start(self, timeout=30):
        self.start_controller()
        for i in range(len(self.node_sets)):
            self.start_agent(i)
        self.wait_nodes_up(self.size, timeout=timeout)
        return self

    def kill_agent(self, i, sig=signal.SIGKILL):
        stop_process(self.agents[i], sig)

    # ------------------------------------------------------------ queries

    def corral(self, *args, check=True, input=None, user=None, timeout=60, cwd=None,
               env=None):
        # Clients run in the cluster's directory: default output files (corral-N.out) land
        # there, not in the checkout.
        return run_corral(*args, env=env if env is not None else self.env, input=input,
                          timeout=timeout, check=check, user=user,
                          cwd=cwd if cwd is not None else self.shared_dir("cwd"))

    def logs(self):
        names = ["corrald.log", "corrald.out"]
        for i in range(len(self.node_sets)):
            names += [f"agent-{i}.log", f"agent-{i}.out"]
        return "".join(log_tail(os.path.join(self.dir, n)) for n in names)

    def stop(self, failed=False):
        """Stops every daemon and removes the cluster's directory; a failed test's cluster
        prints its log tails first (CI shows them beside the failure), and keeps its
        directory when CORRAL_KEEP_FAILED is set."""
        if failed:
            print(f"cluster directory {self.dir}:\n{self.logs()}")
        for i in range(len(self.agents)):
            stop_process(self.agents[i], signal.SIGTERM)
        stop_process(self.controller, signal.SIGTERM)
        if self.cgroup:
            remove_agent_cgroups(self.cgroup, [os.path.join(self.dir, f"agent-{i}")
                                               for i in range(len(self.agents))])
        if not (failed and os.environ.get("CORRAL_KEEP_FAILED")):
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Each phase's report on the item, for fixtures' teardown to see whether the test failed.
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


def call_failed(request):
    report = getattr(request.node, "report_call", None)
    return report is not None and report.failed


@pytest.fixture
def cluster(request):
    opts = {}
    marker = request.node.get_closest_marker("cluster")
    if marker is not None:
        opts.update(marker.kwargs)
    param = getattr(request, "param", None)
    if isinstance(param, int):
        opts["size"] = param
    elif isinstance(param, dict):
        opts.update(param)
    c = Cluster(**opts)
    try:
        c.start()
        yield c
    finally:
        c.stop(failed=call_failed(request))


@pytest.fixture
def corral():
    """`corral` without a cluster, for commands that need no controller."""
    return run_corral


@pytest.fixture
def make_cluster(request):
    """A factory for clusters whose configuration a test prepares first (scripts, a TOML
    config file): make_cluster(size=4, config=path, sets=[...]) starts one; all are
    stopped at teardown."""
    made = []

    def make(**opts):
        c = Cluster(**opts)
        made.append(c)
        return c.start()

    try:
        yield make
    finally:
        for c in made:
            c.stop(failed=call_failed(request))
