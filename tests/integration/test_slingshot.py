"""Slingshot end to end on a local cluster with simulated CXI NICs: the cray-slingshot
controller hook reserves VNIs, `corral-slingshot prolog` creates one CXI service per NIC
on every node, the tasks see SLINGSHOT_VNIS/DEVICES/SVC_IDS/TCS, and at CLEANUP the
services are destroyed before the VNIs go back to the pool (docs/admin.md, "Slingshot")."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import binary, job_until, read_env, wait_until

ENABLED = ("slingshot.enabled=true",)
SLINGSHOT_VARS = ("SLINGSHOT_VNIS", "SLINGSHOT_DEVICES", "SLINGSHOT_SVC_IDS", "SLINGSHOT_TCS")


def sim_cluster(make_cluster, tmp_path, sim_config="nics = 2\n", sets=(), **kw):
    """A cluster whose agents simulate the NICs that `sim_config` (TOML) describes."""
    path = tmp_path / "cxi-sim.toml"
    path.write_text(sim_config)
    kw.setdefault("size", 4)
    kw.setdefault("agents", 2)
    c = make_cluster(sets=ENABLED + tuple(sets),
                     agent_args=("--cxi", "sim", "--cxi-sim-config", str(path)), **kw)
    # A copy other users can read (tmp_path is private), for corral-slingshot run as them.
    c.sim_config = Path(c.dir) / "cxi-sim.toml"
    c.sim_config.write_text(sim_config)
    c.sim_config.chmod(0o644)
    return c


def cxi_spec(cluster, node):
    """The CXI backend spec the agent hosting `node` hands to corral-slingshot."""
    for i, nodes in enumerate(cluster.node_sets):
        if node in expand(nodes):
            return f"sim:{cluster.dir}/agent-{i}/cxi:{cluster.sim_config}"
    raise AssertionError(f"no agent hosts {node}")


def expand(hostlist):
    if "[" not in hostlist:
        return [hostlist]
    prefix, rng = hostlist[:-1].split("[")
    first, _, last = rng.partition("-")
    return [f"{prefix}{i}" for i in range(int(first), int(last or first) + 1)]


def slingshot_tool(cluster, node, *args, user=None):
    cmd = [binary("corral-slingshot"), "--cxi", cxi_spec(cluster, node), "--node", node, *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def nics(cluster, node):
    proc = slingshot_tool(cluster, node, "list", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["nics"]


def job_services(cluster, node, vnis):
    """{nic: service} of the non-system services with exactly these VNIs on `node`."""
    return {nic["name"]: s for nic in nics(cluster, node) for s in nic["services"]
            if not s["system"] and sorted(s["vnis"]) == sorted(vnis)}


def pool(cluster):
    return json.loads(cluster.corral("slingshot", "pool", "--json").stdout)


def reservation(cluster, jobid, timeout=20):
    """The VNIs of the job's cray-slingshot event, once it is allocated (None: it has none)."""
    def look():
        evs = cluster.eventlog(jobid)
        for ev in evs:
            if ev["name"] == "cray-slingshot":
                return {"vnis": ev["context"]["reservation"]["vnis"]}
        names = {ev["name"] for ev in evs}
        return {"vnis": None} if names & {"start", "exception", "clean"} else None
    return wait_until(look, timeout=timeout, what=f"job {jobid}'s VNI reservation",
                      cluster=cluster)["vnis"]


def env_job(cluster, out, *opts, nodes="node[0-1]", nnodes=2, sleep=60):
    """A job whose tasks write their environment to out/env-JOBID-NODE, then sleep."""
    script = f'env > {out}/env-$CORRAL_JOBID-$CORRAL_NODENAME; sleep {sleep}'
    return cluster.submit("-N", str(nnodes), "-w", nodes, "-o", f"{out}/out-%j", *opts,
                          "sh", "-c", script)


def wait_env(cluster, out, jobid, node):
    path = out / f"env-{jobid}-{node}"
    wait_until(lambda: path.exists() and path.stat().st_size > 0, timeout=30,
               what=f"job {jobid}'s task on {node} to start", cluster=cluster)
    time.sleep(0.1)
    return read_env(path)


def wait_free(cluster, vnis, timeout=30):
    """Waits until none of `vnis` is reserved or quarantined."""
    def check():
        p = pool(cluster)
        held = {v for r in p["reserved"] + p["quarantined"] for v in r["vnis"]}
        return p if not held & set(vnis) else None
    return wait_until(check, timeout=timeout, what=f"VNIs {vnis} to be free", cluster=cluster)


def test_tasks_see_their_services_on_every_node(make_cluster, tmp_path):
    cluster = sim_cluster(make_cluster, tmp_path)
    out = cluster.shared_dir()
    jobid = env_job(cluster, out)
    vnis = reservation(cluster, jobid)
    assert vnis and len(vnis) == 1 and 1024 <= vnis[0] <= 65535, vnis
    for node in ("node0", "node1"):
        env = wait_env(cluster, out, jobid, node)
        assert env["SLINGSHOT_VNIS"] == ",".join(map(str, vnis)), env
        services = job_services(cluster, node, vnis)
        assert sorted(services) == ["cxi0", "cxi1"], services
        assert env["SLINGSHOT_DEVICES"] == "cxi0,cxi1", env
        assert env["SLINGSHOT_SVC_IDS"] == ",".join(str(services[n]["id"])
                                                  for n in ("cxi0", "cxi1")), env
        assert env["SLINGSHOT_TCS"] == "0x0a", env
        for s in services.values():
            assert s["members"] == [0], s  # the job's owner (tests run as root)
            assert sorted(s["tcs"]) == ["BEST_EFFORT", "LOW_LATENCY"], s
    p = pool(cluster)
    assert {"jobid": jobid, "vnis": vnis} in p["reserved"], p
    assert p["free"] == p["size"] - 1, p

    cluster.corral("cancel", jobid)
    cluster.wait_job(jobid)
    wait_free(cluster, vnis)
    for node in ("node0", "node1"):
        wait_until(lambda: not job_services(cluster, node, vnis), timeout=20,
                   what=f"the services on {node} to be destroyed", cluster=cluster)
    human = cluster.corral("slingshot", "pool").stdout
    assert "free" in human and "1024-65535" in human, human


def test_concurrent_jobs_get_different_vnis_round_robin(make_cluster, tmp_path):
    cluster = sim_cluster(make_cluster, tmp_path)
    out = cluster.shared_dir()
    a = env_job(cluster, out, nodes="node0", nnodes=1)
    b = env_job(cluster, out, nodes="node0", nnodes=1)
    va, vb = reservation(cluster, a), reservation(cluster, b)
    assert va != vb and not set(va) & set(vb), (va, vb)
    ea, eb = wait_env(cluster, out, a, "node0"), wait_env(cluster, out, b, "node0")
    assert ea["SLINGSHOT_SVC_IDS"] != eb["SLINGSHOT_SVC_IDS"], (ea, eb)
    cluster.corral("cancel", a)
    cluster.wait_job(a)
    wait_free(cluster, va)
    # Round-robin: a freed VNI is not the next one handed out.
    c = env_job(cluster, out, nodes="node1", nnodes=1)
    assert reservation(cluster, c) not in (va, vb)
    cluster.corral("cancel", b, c)


def test_another_user_cannot_use_the_jobs_service(make_cluster, tmp_path):
    cluster = sim_cluster(make_cluster, tmp_path)
    out = cluster.shared_dir()
    jobid = env_job(cluster, out, nodes="node2", nnodes=1)
    env = wait_env(cluster, out, jobid, "node2")
    vni = env["SLINGSHOT_VNIS"].split(",")[0]
    svc = env["SLINGSHOT_SVC_IDS"].split(",")[0]
    base = ["use", "--device", "cxi0", "--svc", svc, "--vni", vni]
    ok = slingshot_tool(cluster, "node2", *base, "--tc", "BEST_EFFORT")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # Another user (a real process running as uid 1234) is refused by the membership
    # check, as the driver refuses a process outside the service's members.
    other = slingshot_tool(cluster, "node2", *base, "--tc", "BEST_EFFORT", user=1234)
    assert other.returncode == 1, other.stdout + other.stderr
    assert "permission denied: uid 1234 is not a member" in other.stdout + other.stderr
    other = slingshot_tool(cluster, "node2", *base, "--tc", "BEST_EFFORT", "--uid", "1234")
    assert other.returncode == 1, other.stdout + other.stderr
    assert "permission denied: uid 1234 is not a member" in other.stdout + other.stderr
    # The job's own user is limited to its VNIs and traffic classes.
    assert slingshot_tool(cluster, "node2", *base, "--tc", "BULK_DATA").returncode == 1
    wrong = ["use", "--device", "cxi0", "--svc", svc, "--vni", "1", "--tc", "BEST_EFFORT"]
    assert slingshot_tool(cluster, "node2", *wrong).returncode == 1
    cluster.corral("cancel", jobid)


def test_off_vnicount_and_the_limit(make_cluster, tmp_path):
    cluster = sim_cluster(make_cluster, tmp_path)
    out = cluster.shared_dir()
    off = env_job(cluster, out, "--setopt", "cray-slingshot=off", nodes="node0", nnodes=1,
                  sleep=0)
    env = wait_env(cluster, out, off, "node0")
    assert not any(v in env for v in SLINGSHOT_VARS), env
    assert reservation(cluster, off) is None

    four = env_job(cluster, out, "--setopt", "cray-slingshot.vnicount=4", nodes="node1",
                   nnodes=1)
    vnis = reservation(cluster, four)
    assert len(vnis) == 4, vnis
    env = wait_env(cluster, out, four, "node1")
    assert env["SLINGSHOT_VNIS"] == ",".join(map(str, vnis)), env
    assert sorted(job_services(cluster, "node1", vnis)) == ["cxi0", "cxi1"]

    five = cluster.corral("submit", "--setopt", "cray-slingshot.vnicount=5", "true",
                          check=False)
    assert five.returncode != 0
    assert "at most 4 VNIs fit one CXI service" in five.stderr, five.stderr
    bad = cluster.corral("submit", "--setopt", "cray-slingshot=sometimes", "true", check=False)
    assert bad.returncode != 0 and "on or off" in bad.stderr, bad.stderr
    cluster.corral("cancel", four)


def test_short_nic_scales_back_with_a_warning(make_cluster, tmp_path):
    # 8 list entries per NIC: a job holding one core asks for 16 reserved.
    cluster = sim_cluster(make_cluster, tmp_path, sim_config="nics = 1\n[capacity]\nles = 8\n",
                          size=2, agents=1)
    out = cluster.shared_dir()
    jobid = cluster.submit("-N1", "-w", "node0", "-o", f"{out}/out-%j", "sh", "-c",
                           "echo task ran; printenv SLINGSHOT_SVC_IDS")
    info = cluster.wait_job(jobid)
    assert info["result"] == "COMPLETED", info
    warnings = [e["context"] for e in cluster.eventlog(jobid) if e["name"] == "warning"]
    assert warnings, cluster.eventlog(jobid)
    w = warnings[0]
    assert w["source"] == "cray-slingshot" and w["node"] == "node0", w
    assert "les" in w["message"] and "cxi0" in w["message"], w
    text = (out / f"out-{jobid}").read_text()
    assert "corral: cray-slingshot: node0:" in text and "les" in text, text
    assert "task ran" in text, text


def test_busy_service_drains_the_node_and_keeps_its_vni(make_cluster, tmp_path):
    # node1's services stay busy forever; node2's for 4 s (past the epilog's 1 s retry,
    # within housekeeping's), so only node1 is drained.
    sim = ("nics = 1\n"
           "[[fault]]\nkind = \"busy\"\nnodes = \"node1\"\n"
           "[[fault]]\nkind = \"busy\"\nnodes = \"node2\"\nseconds = 4\n")
    cluster = sim_cluster(make_cluster, tmp_path, sim_config=sim,
                          sets=("slingshot.epilog-retry=1s",
                                "slingshot.housekeeping-timeout=8s"))
    out = cluster.shared_dir()
    stuck = env_job(cluster, out, nodes="node1", nnodes=1)
    slow = env_job(cluster, out, nodes="node2", nnodes=1)
    vs, vw = reservation(cluster, stuck), reservation(cluster, slow)
    wait_env(cluster, out, stuck, "node1")
    wait_env(cluster, out, slow, "node2")
    cluster.corral("cancel", stuck, slow)
    cluster.wait_job(stuck)
    cluster.wait_job(slow)

    # Both are quarantined while housekeeping retries; node2's clears on its own.
    p = pool(cluster)
    held = {q["jobid"]: q for q in p["quarantined"]}
    assert held[stuck]["nodes"] == ["node1"], p
    wait_free(cluster, vw, timeout=30)

    node = cluster.wait_node("node1", lambda n: "drain" in n["state"], timeout=40,
                             what="node1 to be drained by housekeeping")
    assert "cray-slingshot" in node["reason"] and "still busy after 8s" in node["reason"], node
    assert f"VNIs {vs[0]}" in node["reason"], node
    assert "drain" not in cluster.node("node2")["state"]
    p = pool(cluster)
    assert [q["nodes"] for q in p["quarantined"] if q["jobid"] == stuck] == [["node1"]], p
    assert "waiting for cleanup" in cluster.corral("slingshot", "pool").stdout

    # Cleaning is for admins.
    denied = cluster.corral("slingshot", "clean", "node1", user=1234, check=False)
    assert denied.returncode != 0 and "permission denied" in denied.stderr, denied.stderr

    cluster.corral("resume", "node1")
    wait_free(cluster, vs, timeout=10)


def test_clean_frees_a_quarantine(make_cluster, tmp_path):
    sim = "nics = 1\n[[fault]]\nkind = \"busy\"\nnodes = \"node1\"\nseconds = 5\n"
    cluster = sim_cluster(make_cluster, tmp_path, sim_config=sim,
                          sets=("slingshot.epilog-retry=1s",
                                "slingshot.housekeeping-timeout=1s"))
    out = cluster.shared_dir()
    jobid = env_job(cluster, out, nodes="node1", nnodes=1)
    vnis = reservation(cluster, jobid)
    wait_env(cluster, out, jobid, "node1")
    cluster.corral("cancel", jobid)
    cluster.wait_node("node1", lambda n: "drain" in n["state"], timeout=40,
                      what="node1 to be drained by housekeeping")
    assert any(q["jobid"] == jobid for q in pool(cluster)["quarantined"])
    time.sleep(5)  # the fault's busy time is over: clean can destroy the service
    proc = cluster.corral("slingshot", "clean", "node1", "--timeout", "30")
    assert proc.returncode == 0, proc.stderr
    wait_free(cluster, vnis, timeout=5)
    assert not job_services(cluster, "node1", vnis)


def test_reservations_survive_kill_9_of_the_controller(make_cluster, tmp_path):
    cluster = sim_cluster(make_cluster, tmp_path)
    out = cluster.shared_dir()
    held = env_job(cluster, out, "--setopt", "cray-slingshot.vnicount=2", nodes="node[0-1]")
    vnis = reservation(cluster, held)
    wait_env(cluster, out, held, "node0")
    before = pool(cluster)

    cluster.kill_controller(signal.SIGKILL)
    cluster.restart_controller()
    cluster.wait_nodes_up(cluster.size)
    after = pool(cluster)
    assert {"jobid": held, "vnis": vnis} in after["reserved"], after
    assert after["free"] == before["free"], (before, after)

    new = env_job(cluster, out, nodes="node2", nnodes=1)
    nv = reservation(cluster, new)
    assert nv and not set(nv) & set(vnis), (nv, vnis)
    assert job_until(cluster, held, lambda j: j["state"] == "RUN")
    cluster.corral("cancel", held, new)
    wait_free(cluster, vnis + nv)


def test_nodes_show_the_nics_the_agents_found(make_cluster, tmp_path):
    """The node half of the hook reports the node's NICs at registration (`hardware` in
    `corral nodes --json`); an agent whose hooks report too much is refused, naming the node."""
    c = sim_cluster(make_cluster, tmp_path, size=2, agents=1)
    listed = json.loads(c.corral("nodes", "--json").stdout)
    assert [n["hardware"] for n in listed] == [{"cray-slingshot": "cxi0,cxi1 (simulated)"}] * 2, listed
    probe = binary("corral-rpc-probe")
    many = subprocess.run([probe, "--register", c.uri, "greedy", "17", "8"], capture_output=True, text=True,
                          timeout=30)
    assert many.returncode == 1 and "'greedy' reports more than 16 hardware entries" in many.stdout, many.stdout
    long = subprocess.run([probe, "--register", c.uri, "wordy", "1", "9000"], capture_output=True, text=True,
                          timeout=30)
    assert long.returncode == 1 and "node 'wordy'" in long.stdout and "8192" in long.stdout, long.stdout
    assert {n["name"] for n in json.loads(c.corral("nodes", "--json").stdout)} == {"node0", "node1"}
    fine = subprocess.run([probe, "--register", c.uri, "modest", "2", "16"], capture_output=True, text=True,
                          timeout=30)
    assert fine.returncode == 0, fine.stdout
    shown = {n["name"]: n["hardware"] for n in json.loads(c.corral("nodes", "--json").stdout)}
    assert shown["modest"] == {"hook0": "x" * 16, "hook1": "x" * 16}, shown
