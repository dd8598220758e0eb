"""The infiniband hooks end to end: nodes discover devices from sysfs trees built as files,
the controller groups them in classes and places --ib jobs only where the asked devices are
active, the prolog configures VFs and writes the job's document, the epilog undoes it."""

import json
import os
import re
import subprocess

import pytest

from conftest import SOURCE_DIR, Cluster, wait_until
from ib_sysfs_tree import CX6_NAME, FABRIC_CONFIG, pci, two_fabric_node


@pytest.fixture(scope="module")
def ib_cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("ib")
    trees = base / "sysfs"
    two_fabric_node(str(trees / "node0"))
    two_fabric_node(str(trees / "node1"))
    two_fabric_node(str(trees / "node2"), fabric2_up=False)
    os.makedirs(trees / "node3" / "class")  # no Infiniband at all
    config = base / "corral.toml"
    config.write_text(FABRIC_CONFIG)
    c = Cluster(size=4, config=config, agent_args=["--ib-sysfs", str(trees)])
    c.trees = trees
    c.start()
    yield c
    c.stop()


def ib(device=CX6_NAME, **kw):
    return ",".join([f'device="{device}"'] + [f"{k}={v}" for k, v in kw.items()])


def run_job(c, *args):
    out = c.corral("run", *args, "sh", "-c",
                   'echo "$CORRAL_NODENAME $CORRAL_IB_DEVICES $UCX_NET_DEVICES $NCCL_IB_HCA"; cat "$CORRAL_IB_CONFIG"')
    return out.stdout


def test_classes_group_identical_nodes_and_flag_a_dead_port(ib_cluster):
    doc = json.loads(ib_cluster.corral("ib", "classes", "--json").stdout)
    assert len(doc["classes"]) == 1, doc
    cls = doc["classes"][0]
    assert cls["nodes"] == ["node0", "node1", "node2"]
    assert "node2" in cls["degraded"] and "IbFabric2" in cls["degraded"]["node2"]
    fabrics = {cap["fabric"]: cap["count"] for cap in cls["capabilities"] if cap["name"] == CX6_NAME}
    assert fabrics == {"IbFabric1": 1, "IbFabric2": 1}
    text = ib_cluster.corral("ib", "classes").stdout
    assert "degraded: node2" in text
    # The same through `corral nodes --capabilities`, which asks every hook.
    caps = json.loads(ib_cluster.corral("nodes", "--capabilities", "--json", user=65534).stdout)
    assert set(caps) == {"node0", "node1", "node2", "node3"}
    assert caps["node3"] == {}
    assert caps["node0"]["infiniband"]["class"] == caps["node2"]["infiniband"]["class"] == "ib-1"
    assert "differs" not in caps["node0"]["infiniband"] and "IbFabric2" in caps["node2"]["infiniband"]["differs"]
    table = ib_cluster.corral("nodes", "--capabilities", "node[0-2]").stdout.splitlines()
    assert table[0].split() == ["NODE", "HOOK", "CLASS", "CAPABILITIES", "DIFFERS"]
    assert "1x MT28908 Family [ConnectX-6] on IbFabric1" in table[1] and table[3].startswith("node2")
    assert "(1 inactive)" in table[3], table


def test_job_lands_only_where_its_device_is_active_and_sees_it(ib_cluster):
    out = run_job(ib_cluster, "-N2", "--ib", ib(fabric="IbFabric2", instance=0, partition="job"))
    lines = out.splitlines()
    first = [l for l in lines if l.startswith("node")]
    assert sorted(l.split()[0] for l in first) == ["node0", "node1"], out
    assert all(l.split()[1:] == ["mlx5_1", "mlx5_1:1", "mlx5_1:1"] for l in first), out
    # Two nodes' documents interleave: check their fields line by line.
    assert re.search(r'"pkey": "0x200[0-3]"', out), out
    assert '"partition": "job"' in out and '"fabric": "IbFabric2"' in out
    assert '"pf_guid": "946dae03002ac101"' in out


def test_named_partition_and_user_override(ib_cluster):
    out = ib_cluster.corral("run", "--ib", ib(fabric="IbFabric1", partition="storage"), "sh", "-c",
                            'echo "$UCX_NET_DEVICES"; cat "$CORRAL_IB_CONFIG"',
                            env=dict(ib_cluster.env, UCX_NET_DEVICES="mine")).stdout
    assert out.splitlines()[0] == "mine"
    assert '"pkey": "0x0100"' in out


def test_virtual_function_is_enabled_named_and_undone(ib_cluster):
    out = run_job(ib_cluster, "-w", "node0", "--ib", ib(fabric="IbFabric2", vf=1))
    assert out.split()[1] == "mlx5_3", out  # the VF's own device
    doc = json.loads(out[out.index("{"):])
    guid = doc["interfaces"][0]["guid"]
    assert guid.startswith("0002c90300a000"), doc
    pf = pci(str(ib_cluster.trees / "node0"), "0000:ca:00.1")
    # The epilog runs once the job is over: VFs disabled again and the GUID cleared.
    wait_until(lambda: open(os.path.join(pf, "sriov_numvfs")).read().strip() == "0", what="the epilog")
    assert open(os.path.join(pf, "sriov", "1", "port")).read().strip() == "00:00:00:00:00:00:00:00"


@pytest.mark.parametrize("spec, message", [
    (ib(device="MT2910 Family [ConnectX-7]"), "MT2910"),
    (ib(fabric="IbFabric1", instance=1), "instance"),
    (ib(fabric="NoSuchFabric"), "NoSuchFabric"),
    (ib(partition="nope"), "unknown partition 'nope'"),
    (ib(fabric="IbFabric2", vf=9), "9"),
])
def test_impossible_requests_are_refused_at_submit(ib_cluster, spec, message):
    r = ib_cluster.corral("submit", "--ib", spec, "true", check=False, user=65534)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr


def test_pool_shows_keys(ib_cluster):
    doc = json.loads(ib_cluster.corral("ib", "pool", "--json").stdout)
    assert doc["partitions"] == {"storage": "0x0100"}
    assert doc["pkey_pool"] == "0x2000-0x2003"


def test_mpi_job_on_two_nodes_sees_its_selected_devices(ib_cluster):
    prog = ib_cluster.shared_dir("mpi") / "pmi_ring"
    subprocess.run(["mpicc.mpich", "-o", str(prog), str(SOURCE_DIR / "tests" / "data" / "mpi" / "pmi_ring.c")],
                   check=True)
    out = ib_cluster.corral("run", "-N2", "-n4", "--ib", ib(fabric="IbFabric2", instance=0), "--ib",
                            ib(fabric="IbFabric1", instance=0), "sh", "-c",
                            f'echo "env $CORRAL_NODENAME $CORRAL_IB_DEVICES $UCX_NET_DEVICES"; exec {prog}',
                            user=65534, timeout=120).stdout
    lines = out.splitlines()
    envs = sorted(l for l in lines if l.startswith("env "))
    # node2's IbFabric2 port is down: the job lands on node0 and node1 only.
    assert [l.split()[1] for l in envs] == ["node0", "node0", "node1", "node1"], out
    assert all(l.split()[2:] == ["mlx5_1,mlx5_0", "mlx5_1:1,mlx5_0:1"] for l in envs), out
    assert sorted(l for l in lines if l.startswith("rank")) == [f"rank {r} of 4" for r in range(4)], out
    assert "ring and allreduce ok" in lines, out


def hostile_jobspec(c, infiniband):
    """A jobspec written by hand (not by --ib) with `infiniband` as its Infiniband list."""
    spec = json.loads(c.corral("submit", "--dry-run", "true").stdout)
    spec["attributes"]["system"]["infiniband"] = infiniband
    path = c.shared_dir("specs") / f"spec-{len(json.dumps(infiniband)) % 100000}.json"
    path.write_text(json.dumps(spec))
    os.chmod(path, 0o644)
    return path


@pytest.mark.parametrize("infiniband, message", [
    ([{"device": CX6_NAME}] * 65, "64"),                                  # too many interfaces
    ("device=x", "list"),                                                 # not a list
    ([{"device": CX6_NAME, "device_instance": -1}], "'device_instance' must be a string or a number from 0 up"),
    ([{"device": CX6_NAME, "device_instance": 2 ** 40}], "device_instance"),
    ([{"device": CX6_NAME, "virtual_function_id": 1 << 20}], "virtual_function_id"),
    ([{"device": "x" * 100000}], "device"),                               # a long name
    ([{"device": CX6_NAME, "fabric": {"nested": [[[[]]]]}}], "fabric"),   # wrong type
    ([{"device": CX6_NAME, "surprise": 1}], "surprise"),                  # unknown key
    ([7], "object"),
])
def test_hand_written_infiniband_lists_are_refused_with_a_reason(ib_cluster, infiniband, message):
    path = hostile_jobspec(ib_cluster, infiniband)
    r = ib_cluster.corral("submit", "--jobspec", path, check=False, user=65534)
    assert r.returncode != 0, r.stdout
    assert message in r.stderr and "infiniband" in r.stderr.lower(), r.stderr
    # The controller is still there and still places --ib jobs.
    assert ib_cluster.corral("run", "-w", "node0", "--ib", ib(fabric="IbFabric1"), "true", user=65534).returncode == 0
