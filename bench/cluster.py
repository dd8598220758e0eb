"""A local corral cluster for benchmarks: corrald plus node agents in a temp directory."""
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


class Cluster:
    def __init__(self, bin_dir, nodes=16, cores=64, agents=1, sets=()):
        self.bin = Path(bin_dir)
        self.dir = Path(tempfile.mkdtemp(prefix="corral-bench-"))
        self.sock = self.dir / "corrald.sock"
        self.uri = f"unix:{self.sock}"
        self.env = dict(os.environ, CORRAL_URI=self.uri)
        self.nodes, self.cores, self.agents, self.sets = nodes, cores, agents, sets
        self.ctld = None
        self.agent_procs = []

    def start_controller(self):
        args = [str(self.bin / "corrald"), "--socket", str(self.sock),
                "--state-dir", str(self.dir / "state"), "--log-file", str(self.dir / "corrald.log"),
                "--log-level", "warn"]
        for s in self.sets:
            args += ["--set", s]
        self.ctld = subprocess.Popen(args)
        deadline = time.time() + 30
        while not self.sock.exists():
            if time.time() > deadline or self.ctld.poll() is not None:
                raise RuntimeError("corrald did not start; see " + str(self.dir / "corrald.log"))
            time.sleep(0.02)

    def start(self):
        self.start_controller()
        per = self.nodes // self.agents
        for i in range(self.agents):
            first, last = i * per, (i + 1) * per - 1 if i < self.agents - 1 else self.nodes - 1
            nodes = f"node[{first}-{last}]" if last > first else f"node{first}"
            self.agent_procs.append(subprocess.Popen(
                [str(self.bin / "corral-node"), "--controller", self.uri, "--nodes", nodes,
                 "--cores", str(self.cores), "--state-dir", str(self.dir / f"agent{i}"),
                 "--log-file", str(self.dir / f"agent{i}.log"), "--log-level", "warn"]))
        self.wait_nodes_up()
        return self

    def wait_nodes_up(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            out = self.corral("nodes", "--json", check=False)
            if out.returncode == 0 and out.stdout.count('"idle"') >= self.nodes:
                return
            time.sleep(0.1)
        raise RuntimeError("nodes did not come up")

    def corral(self, *args, check=True, **kw):
        proc = subprocess.run([str(self.bin / "corral"), *map(str, args)], env=self.env,
                              capture_output=True, text=True, **kw)
        if check and proc.returncode != 0:
            raise RuntimeError(f"corral {' '.join(map(str, args))}: {proc.stderr.strip()}")
        return proc

    def controller_cpu(self):
        """User+system CPU seconds of corrald so far."""
        fields = (Path("/proc") / str(self.ctld.pid) / "stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def controller_rss_mb(self, key="VmRSS"):
        for line in (Path("/proc") / str(self.ctld.pid) / "status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
        return 0.0

    def kill_controller(self):
        self.ctld.send_signal(signal.SIGKILL)
        self.ctld.wait()

    def restart_controller(self):
        """Starts corrald again on the same state directory (after kill_controller).

        Returns the wall-clock time (time.time()) just before the process was spawned.
        The stale socket a killed corrald leaves behind is removed first, so that
        start_controller's wait means the new process is listening.
        """
        self.sock.unlink(missing_ok=True)
        t0 = time.time()
        self.start_controller()
        return t0

    def wait_answering(self, timeout=60):
        """Polls with a cheap rpc until the controller answers; returns time.time() then."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.corral("queue", "-c", "1", "--json", check=False).returncode == 0:
                return time.time()
            time.sleep(0.005)
        raise RuntimeError("corrald did not answer")

    def submit(self, n, *opts, command=("true",), mock=0.0):
        """Submits n copies with one `corral submit --cc`; returns (ids, wall seconds).

        mock: the --test-run-duration in seconds (None runs the command for real).
        """
        cmd = ["submit", f"--cc=1-{n}", "-o", "/dev/null", *opts]
        if mock is not None:
            cmd.append(f"--test-run-duration={mock:g}s")
        t0 = time.time()
        out = self.corral(*cmd, *command, cwd=self.dir).stdout.split()
        seconds = time.time() - t0
        ids = [int(x) for x in out]
        if len(ids) != n:
            raise RuntimeError(f"submitted {len(ids)} of {n} jobs")
        return ids, seconds

    def jobs(self, *args):
        """`corral queue --json` with these extra arguments, parsed."""
        return json.loads(self.corral("queue", "--json", *args).stdout)

    def count_active(self, states="active"):
        return len(self.jobs("-t", states))

    def wait_no_active(self, timeout=600, poll=0.25):
        """Waits until the controller holds no active job (cheap: asks for one)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not self.jobs("-c", "1"):
                return
            time.sleep(poll)
        raise RuntimeError(f"jobs still active after {timeout} s")

    def wait_count(self, states, n, timeout=300, poll=0.25):
        """Waits until at least n jobs are in `states` (a `corral queue -t` value)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.count_active(states) >= n:
                return
            time.sleep(poll)
        raise RuntimeError(f"fewer than {n} jobs {states} after {timeout} s")

    def fill_finished(self, n, chunk=100000):
        """Runs n mock jobs of duration 0 to completion; returns their ids."""
        ids = []
        while len(ids) < n:
            batch, _ = self.submit(min(chunk, n - len(ids)))
            ids += batch
        self.wait_no_active()
        return ids

    def stop(self):
        for p in [self.ctld, *self.agent_procs]:
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in [self.ctld, *self.agent_procs]:
            if p:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def percentile(values, q):
    """The q-th percentile (0-100) by nearest rank."""
    values = sorted(values)
    if not values:
        return None
    k = max(0, min(len(values) - 1, int(round(q / 100 * len(values) + 0.5)) - 1))
    return values[k]


def medians(runs):
    """Per-key medians of the numeric (int/float, not bool) fields of a list of dicts."""
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return {k: median([r.get(k) for r in runs]) for k in keys}


def bin_dir(build_dir):
    return Path(build_dir).resolve() / "bin"


def default_build_dir():
    """$CORRAL_BUILD_DIR, else the optimized build-rel/ when present, else build/."""
    if "CORRAL_BUILD_DIR" in os.environ:
        return os.environ["CORRAL_BUILD_DIR"]
    root = Path(__file__).resolve().parent.parent
    return str(root / "build-rel") if (root / "build-rel" / "bin").is_dir() else str(root / "build")
