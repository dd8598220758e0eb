"""A local corral cluster for benchmarks: corrald plus node agents in a temp directory."""
import os
import shutil
import signal
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
