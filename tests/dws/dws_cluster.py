"""A corral test cluster with Rabbit storage: corral-dws-emu (rabbit0 serves node[0-3],
rabbit1 node[4-7]), corral-dws-clientmountd for the nodes, and corrald's dws hook
pointed at the emulator."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import importlib.util  # noqa: E402

# The integration tests' cluster helpers, under a name that is not this folder's conftest.
_INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
sys.path.insert(0, str(_INTEGRATION))
_spec = importlib.util.spec_from_file_location("corral_integration", _INTEGRATION / "conftest.py")
integration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(integration)
Cluster, binary, wait_until, job_until = integration.Cluster, integration.binary, integration.wait_until, \
    integration.job_until

from dws_emulator import GROUP, VERSION, Emulator  # noqa: E402


class DwsCluster:
    def __init__(self, size=4, sets=(), emu_args=(), rabbits="rabbit0=node[0-3];rabbit1=node[4-7]", agents=1):
        self.agents = agents
        self.dir = tempfile.mkdtemp(prefix="corral-dws-")
        os.chmod(self.dir, 0o755)
        self.emu = Emulator(Path(self.dir) / "emu", rabbits=rabbits, extra=emu_args)
        self.size = size
        self.sets = ("rabbit.enabled=true", f"rabbit.kubeconfig={self.emu.kubeconfig}", *sets)
        self.mountd = None
        self.c = None

    def start(self):
        self.emu.start()
        os.chmod(self.emu.mnt, 0o755)
        self.start_mountd()
        self.c = Cluster(size=self.size, agents=self.agents, sets=self.sets).start()
        return self

    def start_mountd(self):
        self.mountd = subprocess.Popen([binary("corral-dws-clientmountd"), "--kubeconfig", str(self.emu.kubeconfig),
                                        "--nodes", f"node[0-{self.size - 1}]"])

    def stop(self):
        if self.c:
            self.c.stop()
        if self.mountd and self.mountd.poll() is None:
            self.mountd.terminate()
            self.mountd.wait(timeout=10)
        self.emu.stop()

    def workflows(self):
        code, body = self.emu.request("GET", f"/apis/{GROUP}/{VERSION}/namespaces/default/workflows")
        assert code == 200, body
        return body["items"]

    def workflow(self, jobid):
        code, body = self.emu.request("GET", f"/apis/{GROUP}/{VERSION}/namespaces/default/workflows/corral-{jobid}")
        return body if code == 200 else None

    def faults(self, *rules):
        return self.emu.admin("faults", {"faults": list(rules)})

    def events(self, jobid):
        out = self.c.corral("eventlog", str(jobid)).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def wait_no_workflows(self, timeout=20):
        wait_until(lambda: not self.workflows(), timeout=timeout, what="every workflow deleted", cluster=self.c)
