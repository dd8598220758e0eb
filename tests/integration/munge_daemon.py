"""A private munged for tests: its own key, socket and files in a temporary directory,
stopped at the end. Two of them with different keys play two sites."""
import os
import shutil
import subprocess
import tempfile
import time

MUNGED = "/usr/sbin/munged"


class Munged:
    """`prefix` runs munged and `munge` through a command (another host's namespaces);
    `origin` is the address its credentials carry (default: munged's own lookup)."""

    def __init__(self, key=None, prefix=(), origin=None, dir=None, socket_name="munge.socket"):
        self.prefix, self.origin = list(prefix), origin
        self.dir = dir or tempfile.mkdtemp(prefix="corral-munge-")
        os.chmod(self.dir, 0o755)  # clients of other uids reach the socket
        self.key = os.path.join(self.dir, "munge.key")
        with open(self.key, "wb") as f:
            f.write(key if key is not None else os.urandom(1024))
        os.chmod(self.key, 0o600)
        self.socket = os.path.join(self.dir, socket_name)
        self.proc = None

    def start(self):
        origin = [f"--origin={self.origin}"] if self.origin else []
        self.proc = subprocess.Popen(
            self.prefix + [MUNGED, "-F", *origin, "-f", f"--socket={self.socket}", f"--key-file={self.key}",
             f"--log-file={self.dir}/munged.log", f"--pid-file={self.dir}/munged.pid",
             f"--seed-file={self.dir}/munged.seed"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if os.path.exists(self.socket):
                return self
            time.sleep(0.05)
        raise RuntimeError(f"munged did not start: {open(self.dir + '/munged.log').read()}")

    def credential(self, payload=None):
        """A credential from this munged (the `munge` command), for a hand-written request."""
        cmd = self.prefix + ["munge", "-S", self.socket] + (["-s", payload] if payload is not None else ["-n"])
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # a SIGTERM while it was starting can be missed
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def have_munged():
    return os.path.exists(MUNGED) and os.geteuid() == 0 and shutil.which("munge") is not None
