"""Partition keys applied through a subnet manager: the UFM emulator (corral-ufm-emu, the
REST interface corral drives on a real fabric) and an OpenSM partitions.conf. A job's ports
join its key before it starts and leave when it ends; a subnet manager that fails keeps the
job from starting, or keeps the key quarantined until it answers again; a restarted
controller still removes what a job joined before it."""

import base64
import json
import os
import subprocess
import urllib.request

import pytest

from conftest import Cluster, binary, stop_process, wait_until
from ib_sysfs_tree import CX6_NAME, FABRIC_CONFIG, two_fabric_node

USER, PASSWORD = "corral", "s3cret"


class Ufm:
    """A running corral-ufm-emu and a client for its REST interface."""

    def __init__(self, base, trees):
        cred = base / "ufm-credentials"
        cred.write_text(f"{USER}:{PASSWORD}\n")
        os.chmod(cred, 0o600)
        self.credentials = cred
        port_file = base / "ufm.port"
        self.log = open(base / "ufm.log", "w")
        self.proc = subprocess.Popen([binary("corral-ufm-emu"), "--credentials", str(cred), "--sysfs", str(trees),
                                      "--port-file", str(port_file)], stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(lambda: port_file.exists() and port_file.read_text().strip(), what="the UFM emulator")
        self.url = f"http://127.0.0.1:{port_file.read_text().strip()}"

    def call(self, method, path, body=None):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
        token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"{}")

    def members(self, pkey):
        doc = self.call("GET", f"/ufmRest/resources/pkeys/{pkey}?guids_data=true")
        return sorted(g["guid"] for g in doc.get("guids", [])) if doc else None

    def faults(self, *rules):
        self.call("POST", "/emu/v1/faults", {"faults": list(rules)})

    def stop(self):
        stop_process(self.proc, 15)
        self.log.close()


def build_trees(base, nodes=3):
    trees = base / "sysfs"
    for i in range(nodes):
        two_fabric_node(str(trees / f"node{i}"), index=i)
    return trees


def pf_guid(index, function=1):
    return f"946dae03002a{0xc100 + 16 * index + function:04x}"


@pytest.fixture(scope="module")
def ufm_cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("ibsm")
    trees = build_trees(base)
    ufm = Ufm(base, trees)
    config = base / "corral.toml"
    config.write_text(FABRIC_CONFIG.replace("[infiniband]\n", f"""[infiniband]
subnet-manager = "ufm"
ufm-url = "{ufm.url}"
ufm-credentials = "{ufm.credentials}"
""", 1))
    # One agent hosts all three nodes: their prologs and documents must not collide.
    c = Cluster(size=3, agents=1, config=config, agent_args=["--ib-sysfs", str(trees)])
    c.ufm = ufm
    c.start()
    yield c
    c.stop()
    ufm.stop()


def ib(**kw):
    return ",".join([f'device="{CX6_NAME}"'] + [f"{k}={v}" for k, v in kw.items()])


def job_pkey(c, jobid):
    for ev in c.eventlog(jobid):
        if ev["name"] == "infiniband":
            return ev["context"]["pkey"]
    return None


def wait_started(c, jobid):
    """Until the job's tasks started (RUN begins at the allocation, before the prologs)."""
    c.wait_job(jobid, "RUN")
    wait_until(lambda: "start" in [e["name"] for e in c.eventlog(jobid)], what=f"job {jobid} to start", cluster=c)


def pool(c):
    return json.loads(c.corral("ib", "pool", "--json").stdout)


def test_job_key_is_made_with_the_jobs_ports_and_removed_after(ufm_cluster):
    c = ufm_cluster
    jobid = c.submit("-N2", "-w", "node[0-1]", "--ib", ib(fabric="IbFabric2", partition="job"), "sleep", "60",
                     user=65534)
    wait_started(c, jobid)
    key = f"{job_pkey(c, jobid):#x}"
    # Both nodes' ports are full members before the job's tasks started.
    assert c.ufm.members(key) == [pf_guid(0), pf_guid(1)]
    c.corral("cancel", jobid)
    c.wait_job(jobid)
    wait_until(lambda: c.ufm.members(key) is None, what="the job's key to be deleted from UFM")
    wait_until(lambda: not pool(c)["quarantined"], what="the key to leave quarantine")


def test_named_partition_keeps_the_key_and_loses_the_jobs_ports(ufm_cluster):
    c = ufm_cluster
    c.ufm.call("POST", "/ufmRest/resources/pkeys", {"pkey": "0x100", "guids": ["00000000000000aa"]})
    c.corral("run", "-w", "node2", "--ib", ib(fabric="IbFabric1", partition="storage"), "true", user=65534)
    # The job's port joined (it ran) and left; the site's own member stays.
    wait_until(lambda: c.ufm.members("0x100") == ["00000000000000aa"], what="the job's port to leave 0x100")
    posts = [r for r in c.ufm.call("GET", "/emu/v1/requests") if r["path"] == "/ufmRest/resources/pkeys"
             and r["method"] == "POST" and pf_guid(2, 0) in (r["body"] or {}).get("guids", [])]
    assert posts and posts[-1]["body"]["pkey"] == "0x100" and posts[-1]["body"]["membership"] == "full"


def test_subnet_manager_refusing_the_join_fails_the_job_with_its_reason(ufm_cluster):
    c = ufm_cluster
    c.ufm.faults({"method": "POST", "path": "/ufmRest/resources/pkeys", "status": 400,
                  "message": "GUIDs are not in the fabric"})
    try:
        r = c.corral("run", "-w", "node0", "--ib", ib(fabric="IbFabric2", partition="job"), "true",
                     check=False, user=65534)
    finally:
        c.ufm.faults()
    assert r.returncode != 0
    assert "GUIDs are not in the fabric" in r.stderr, r.stderr
    # What was asked is taken out again and the key comes back to the pool.
    wait_until(lambda: not pool(c)["quarantined"] and not pool(c)["reserved"], what="the key to be freed")


def test_key_stays_quarantined_until_the_subnet_manager_removes_it(ufm_cluster):
    c = ufm_cluster
    c.ufm.faults({"method": "DELETE", "path": "/ufmRest/resources/pkeys/", "status": 503,
                  "message": "UFM is restarting", "times": 2})
    jobid = c.submit("-w", "node1", "--ib", ib(fabric="IbFabric2", partition="job"), "true", user=65534)
    c.wait_job(jobid)
    key = job_pkey(c, jobid)
    doc = pool(c)
    held = [q for q in doc["quarantined"] if q["jobid"] == jobid]
    assert held and held[0]["pkeys"] == [key] and "(subnet manager)" in held[0]["nodes"], doc
    assert "UFM is restarting" in doc.get("subnet_manager_error", ""), doc
    # Retried after 1 s and 2 s: the third try goes through.
    wait_until(lambda: not pool(c)["quarantined"], timeout=20, what="the retried removal")
    assert c.ufm.members(f"{key:#x}") is None


def test_job_key_survives_a_controller_restart(ufm_cluster):
    c = ufm_cluster
    jobid = c.submit("-N2", "-w", "node[1-2]", "--ib", ib(fabric="IbFabric2", partition="job"), "sleep", "60",
                     user=65534)
    wait_started(c, jobid)
    key = job_pkey(c, jobid)
    c.kill_controller()
    c.restart_controller()
    c.wait_nodes_up(3)
    assert [r["pkeys"] for r in pool(c)["reserved"] if r["jobid"] == jobid] == [[key]]
    assert c.ufm.members(f"{key:#x}") == [pf_guid(1), pf_guid(2)]
    c.corral("cancel", jobid)
    c.wait_job(jobid)
    wait_until(lambda: c.ufm.members(f"{key:#x}") is None, what="the key to be removed after the restart")
    wait_until(lambda: key not in [k for q in pool(c)["quarantined"] for k in q["pkeys"]],
               what="the key to return to the pool")


@pytest.fixture(scope="module")
def opensm_cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("opensm")
    trees = build_trees(base, nodes=2)
    partitions = base / "partitions.conf"
    reloads = base / "reloads"
    config = base / "corral.toml"
    config.write_text(FABRIC_CONFIG.replace("[infiniband]\n", f"""[infiniband]
subnet-manager = "opensm"
opensm-partitions = "{partitions}"
opensm-reload = "echo reread >> {reloads}"
""", 1))
    c = Cluster(size=2, config=config, agent_args=["--ib-sysfs", str(trees)])
    c.partitions, c.reloads = partitions, reloads
    c.start()
    yield c
    c.stop()


def test_opensm_partitions_file_has_the_jobs_ports_while_it_runs(opensm_cluster):
    c = opensm_cluster
    jobid = c.submit("-N2", "--ib", ib(fabric="IbFabric2", partition="job"), "--ib",
                     ib(fabric="IbFabric1", partition="storage"), "sleep", "60", user=65534)
    wait_started(c, jobid)
    key = job_pkey(c, jobid)
    text = c.partitions.read_text()
    assert "Default=0x7fff, ipoib : ALL=full ;" in text
    job_line = next(l for l in text.splitlines() if l.startswith(f"corral_{key:04x}=0x{key:04x}"))
    assert f"0x{pf_guid(0)}" in job_line and f"0x{pf_guid(1)}" in job_line
    storage = next(l for l in text.splitlines() if l.startswith("storage=0x0100"))
    assert f"0x{pf_guid(0, 0)}" in storage and f"0x{pf_guid(1, 0)}" in storage
    assert c.reloads.read_text().count("reread") >= 1
    c.corral("cancel", jobid)
    c.wait_job(jobid)
    wait_until(lambda: "corral_" not in c.partitions.read_text() and "storage=" not in c.partitions.read_text(),
               what="the job's lines to leave partitions.conf")
