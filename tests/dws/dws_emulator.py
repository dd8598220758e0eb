"""Starts corral-dws-emu for tests: the CRDs and NNF ruleset come from ../shared/data/dws
(read at test time, never copied into the repository), or $CORRAL_DWS_DATA."""
import os
import signal
import subprocess
import time
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("CORRAL_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("CORRAL_BUILD_DIR", SOURCE_DIR / "build"))
DWS_DATA = Path(os.environ.get("CORRAL_DWS_DATA", SOURCE_DIR.parent / "shared" / "data" / "dws"))
GROUP, VERSION = "dataworkflowservices.github.io", "v1alpha7"


def data_present():
    return (DWS_DATA / "crd").is_dir() and (DWS_DATA / "nnf-ruleset.yaml").is_file()


class Emulator:
    def __init__(self, workdir, rabbits="rabbit0=node[0-3];rabbit1=node[4-7]", token="t0ken", extra=()):
        self.dir = Path(workdir)
        self.state = self.dir / "state"
        self.mnt = self.dir / "mnt"
        self.state.mkdir(parents=True, exist_ok=True)
        self.mnt.mkdir(parents=True, exist_ok=True)
        self.token_file = self.dir / "token"
        self.token_file.write_text(token + "\n")
        self.token = token
        self.kubeconfig = self.dir / "kubeconfig"
        self.rabbits = rabbits
        self.extra = list(extra)
        self.proc = None
        self.url = None

    def start(self):
        if self.kubeconfig.exists():
            self.kubeconfig.unlink()
        self.proc = subprocess.Popen(
            [str(BUILD_DIR / "bin" / "corral-dws-emu"), "--crd-dir", str(DWS_DATA / "crd"),
             "--ruleset", str(DWS_DATA / "nnf-ruleset.yaml"), "--state-dir", str(self.state),
             "--token-file", str(self.token_file), "--kubeconfig-out", str(self.kubeconfig),
             "--rabbits", self.rabbits, "--mount-root", str(self.mnt), *self.listen(), *self.extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        if "serving" not in line:
            raise AssertionError(f"corral-dws-emu did not start: {line}{self.proc.stdout.read()}")
        self.url = line.strip().rsplit(" ", 1)[-1]
        return self

    def listen(self):
        """A restart serves where the first start did, as a real API server's address stays."""
        if not self.url:
            return []
        return ["--listen", self.url.split("://", 1)[1]]

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)
        self.proc = None

    def env(self):
        e = dict(os.environ)
        e["KUBECONFIG"] = str(self.kubeconfig)
        return e

    def kubectl(self, *args, check=True, timeout=30):
        p = subprocess.run(["kubectl", *args], env=self.env(), capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {p.returncode}: {p.stderr}")
        return p

    def request(self, method, path, body=None, token=True):
        """(HTTP code, decoded JSON body) of a request written by hand (`body`: an object, or
        the text to send as it is)."""
        import json
        import ssl
        import urllib.error
        import urllib.request
        ctx = ssl._create_unverified_context()
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None if body is None else (body if isinstance(body, str) else json.dumps(body)).encode()
        req = urllib.request.Request(f"{self.url}{path}", method=method, headers=headers, data=data)
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def admin(self, what, body=None):
        import json
        import ssl
        import urllib.request
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        req = urllib.request.Request(f"{self.url}/emu/v1/{what}", method="POST" if body is not None else "GET",
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return json.loads(r.read())


def wait_for(pred, timeout=10.0, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
