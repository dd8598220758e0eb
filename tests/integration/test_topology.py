"""Topology in a running cluster: tree placement, per-node CORRAL_TOPOLOGY_ADDR, hostlist
functions in -w/-x and drain/resume, --switches waiting then giving up, partitions on
different topologies, `corral topo show`, and bad topology files refused with their line."""
import json
import textwrap
import time

import pytest

from conftest import Cluster

# 8 nodes: leaves s0..s3 of two nodes each, s4 over s0-s1, s5 over s2-s3, s6 at the top.
TREE = textwrap.dedent("""\
    SwitchName=s0 Nodes=node[0-1]
    SwitchName=s1 Nodes=node[2-3]
    SwitchName=s2 Nodes=node[4-5]
    SwitchName=s3 Nodes=node[6-7]
    SwitchName=s4 Switches=s[0-1]
    SwitchName=s5 Switches=s[2-3]
    SwitchName=s6 Switches=s[4-5]
""")

# Two topologies over the same nodes: the default tree and blocks of four nodes.
MULTI = textwrap.dedent("""\
    - topology: fabric
      cluster_default: true
      tree:
        switches:
          - switch: top
            children: leaf[0-1]
          - switch: leaf0
            nodes: node[0-3]
          - switch: leaf1
            nodes: node[4-7]
    - topology: racks
      block:
        block_sizes: [4, 8]
        blocks:
          - block: b0
            nodes: node[0-3]
          - block: b1
            nodes: node[4-7]
""")


@pytest.fixture
def tree_cluster(make_cluster, tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text(TREE)
    return make_cluster(size=8, agents=2, cores=2, sets=[f"topology.file={path}"])


def nodes_of(cluster, jobid):
    job = cluster.wait_job(jobid, ("RUN", "CLEANUP", "INACTIVE"))
    out = cluster.corral("hostlist", "expand", job["nodelist"]).stdout
    return out.split()


def test_job_fills_the_lowest_switch_and_sees_its_address(tree_cluster, tmp_path):
    c = tree_cluster
    out = c.shared_dir() / "addr.%N"
    jobid = c.submit("-N", "2", "-o", str(out), "sh", "-c",
                     "echo $CORRAL_TOPOLOGY_ADDR $CORRAL_TOPOLOGY_ADDR_PATTERN")
    c.wait_job(jobid)
    assert c.job(jobid)["result"] == "COMPLETED"
    nodes = nodes_of(c, jobid)
    assert nodes == ["node0", "node1"]  # one leaf switch holds both
    for n in nodes:
        text = (c.shared_dir() / f"addr.{n}").read_text().split()
        assert text == [f"s6.s4.s0.{n}", "switch.switch.switch.node"]


def test_job_spanning_leaves_stays_under_one_parent(tree_cluster):
    c = tree_cluster
    hold = c.submit("-w", "node0", "sleep", "60")  # node0 busy: s0 cannot take 2 nodes
    c.wait_job(hold, "RUN")
    jobid = c.submit("-N", "3", "--exclusive", "sleep", "60")
    nodes = nodes_of(c, jobid)
    assert len(nodes) == 3
    # s1 (node2-3) plus node1 of s0: both under s4, never reaching into s5.
    assert set(nodes) <= {"node1", "node2", "node3"}
    c.corral("cancel", str(hold), str(jobid))


def test_hostlist_functions_in_nodelist_exclude_and_drain(tree_cluster):
    c = tree_cluster
    jobid = c.submit("-w", "switch{s3}", "true")
    c.wait_job(jobid)
    assert nodes_of(c, jobid) == ["node6", "node7"]
    jobid = c.submit("-N", "6", "-x", "switchwith{node0}", "true")
    c.wait_job(jobid)
    assert "node0" not in nodes_of(c, jobid) and "node1" not in nodes_of(c, jobid)
    c.corral("drain", "switch{s5}", "--reason", "maintenance")
    drained = {n["name"] for n in c.nodes() if n["state"].startswith("drain")}
    assert drained == {"node4", "node5", "node6", "node7"}
    c.corral("resume", "switch{s5}")
    listed = json.loads(c.corral("nodes", "--json", "switch{s5}").stdout)
    assert sorted(n["name"] for n in listed) == ["node4", "node5", "node6", "node7"], listed
    proc = c.corral("nodes", "switch{nope}", check=False)
    assert proc.returncode != 0 and "nope" in proc.stderr, proc.stderr
    proc = c.corral("submit", "-w", "switch{nope}", "true", check=False)
    assert proc.returncode != 0 and "nope" in proc.stderr
    proc = c.corral("submit", "-w", "block{b1}", "true", check=False)
    assert proc.returncode != 0 and "block" in proc.stderr


def test_switches_waits_then_gives_up(tree_cluster, tmp_path):
    c = tree_cluster
    # One whole node busy on every leaf: no leaf switch has two free nodes.
    holds = [c.submit("-w", n, "--exclusive", "sleep", "60")
             for n in ("node0", "node2", "node4", "node6")]
    for h in holds:
        c.wait_job(h, "RUN")
    jobid = c.submit("-N", "2", "--switches=1@3", "sleep", "30")
    time.sleep(1)
    pending = c.job(jobid)
    assert pending["state"] in ("SCHED", "PRIORITY"), pending
    assert pending["reason"] == "Switches"
    queue = c.corral("queue").stdout
    assert "(Switches)" in queue
    job = c.wait_job(jobid, ("RUN",), timeout=15)  # the wait ran out: any placement
    assert len(nodes_of(c, jobid)) == 2 and job["reason"] == ""
    c.corral("cancel", *map(str, holds + [jobid]))


def test_topo_show_counts_nodes_per_switch(tree_cluster):
    c = tree_cluster
    hold = c.submit("-w", "node0", "-n", "2", "sleep", "60")
    c.wait_job(hold, "RUN")
    data = json.loads(c.corral("topo", "show", "--json").stdout)
    [topo] = data["topologies"]
    assert topo["kind"] == "tree" and topo["default"] is True
    units = {u["name"]: u for u in topo["units"]}
    assert units["s0"]["total"] == 2 and units["s0"]["allocated"] == 1
    assert units["s0"]["idle"] == 1
    assert units["s6"]["total"] == 8 and units["s6"]["level"] == 2
    assert units["s0"]["parent"] == "s4"
    table = c.corral("topo", "show").stdout
    assert "s0" in table and "s6" in table
    c.corral("cancel", str(hold))


def test_partitions_place_on_their_own_topology(make_cluster, tmp_path):
    path = tmp_path / "topology.yaml"
    path.write_text(MULTI)
    config = tmp_path / "corral.toml"
    config.write_text(textwrap.dedent(f"""\
        [topology]
        file = "{path}"
        [[partition]]
        name = "main"
        default = true
        [[partition]]
        name = "racked"
        topology = "racks"
        nodes = "block{{b1}}"
    """))
    c = make_cluster(size=8, agents=2, cores=2, config=config)
    jobid = c.submit("-p", "racked", "-N", "2", "-o", str(c.shared_dir() / "r.%N"), "sh", "-c",
                     "echo $CORRAL_TOPOLOGY_ADDR")
    c.wait_job(jobid)
    nodes = nodes_of(c, jobid)
    assert set(nodes) <= {"node4", "node5", "node6", "node7"}
    assert (c.shared_dir() / f"r.{nodes[0]}").read_text().strip() == f"b1.{nodes[0]}"
    proc = c.corral("submit", "-p", "racked", "-w", "node4", "true", check=False)
    assert proc.returncode != 0 and "-w" in proc.stderr and "block" in proc.stderr
    jobid = c.submit("-N", "2", "-o", str(c.shared_dir() / "m.%N"), "sh", "-c",
                     "echo $CORRAL_TOPOLOGY_ADDR")
    c.wait_job(jobid)
    n = nodes_of(c, jobid)[0]
    assert (c.shared_dir() / f"m.{n}").read_text().strip().startswith("top.leaf")


def test_bad_topology_file_stops_corrald_with_its_line(tmp_path, corral):
    bad = tmp_path / "topology.conf"
    bad.write_text("SwitchName=s0 Nodes=node[0-1]\nSwitchName=s1 Switches=s[0-7]\n")
    proc = corral("topo", "check", str(bad))
    assert proc.returncode == 2
    assert f"{bad}:2" in proc.stderr
    c = Cluster(size=2, sets=[f"topology.file={bad}"])
    try:
        ctld = c.start_controller()
        ctld.wait(timeout=30)
        assert ctld.returncode != 0
        assert f"{bad}:2" in c.logs()
    finally:
        c.stop()
