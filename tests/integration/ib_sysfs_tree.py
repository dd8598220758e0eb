"""Builds sysfs trees of Infiniband devices as plain files, laid out as the kernel does
(class/infiniband/<dev> -> the PCI function's directory), for corral-node --ib-sysfs."""

import os

CX6 = "0x101b"      # MT28908 Family [ConnectX-6] in Debian's pci.ids
CX6_VF = "0x101c"   # its virtual function
CX6_NAME = "MT28908 Family [ConnectX-6]"
FABRIC1 = "fe80:0000:0000:0001"
FABRIC2 = "fe80:0000:0000:0002"


def _put(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def pci(root, slot):
    return os.path.join(root, "devices", "pci0000:00", slot)


def device(root, name, slot, prefix, active=True, dev_id=CX6, sriov=0, guid="946d:ae03:002a:c100"):
    p = pci(root, slot)
    _put(os.path.join(p, "vendor"), "0x15b3")
    _put(os.path.join(p, "device"), dev_id)
    _put(os.path.join(p, "numa_node"), "0")
    _put(os.path.join(p, "sriov_totalvfs"), str(sriov))
    _put(os.path.join(p, "sriov_numvfs"), "0")
    ib = os.path.join(root, "class", "infiniband", name)
    os.makedirs(ib, exist_ok=True)
    os.symlink(os.path.relpath(p, ib), os.path.join(ib, "device"))
    _put(os.path.join(ib, "node_guid"), guid)
    _put(os.path.join(ib, "sys_image_guid"), guid)
    _put(os.path.join(ib, "fw_ver"), "20.31.1014")
    port = os.path.join(ib, "ports", "1")
    _put(os.path.join(port, "state"), "4: ACTIVE" if active else "1: DOWN")
    _put(os.path.join(port, "phys_state"), "5: LinkUp" if active else "2: Polling")
    _put(os.path.join(port, "rate"), "200 Gb/sec (4X HDR)")
    _put(os.path.join(port, "link_layer"), "InfiniBand")
    _put(os.path.join(port, "lid"), "0x12")
    _put(os.path.join(port, "gids", "0"), prefix + ":0002:c903:0031:7891")
    for vf in range(sriov):
        _put(os.path.join(p, "sriov", str(vf), "node"), "00:00:00:00:00:00:00:00")
        _put(os.path.join(p, "sriov", str(vf), "port"), "00:00:00:00:00:00:00:00")
        _put(os.path.join(p, "sriov", str(vf), "policy"), "Down")


def virtual_function(root, name, slot, pf_slot, vf, prefix):
    """A VF as the kernel shows it once enabled: its own function, linked both ways."""
    device(root, name, slot, prefix, dev_id=CX6_VF, guid="0000:0000:0000:0000")
    os.symlink(os.path.relpath(pci(root, pf_slot), pci(root, slot)), os.path.join(pci(root, slot), "physfn"))
    os.symlink(os.path.relpath(pci(root, slot), pci(root, pf_slot)),
               os.path.join(pci(root, pf_slot), f"virtfn{vf}"))


def node_guid(index, function):
    """The node GUID of a node's PCI function: unique across the cluster, as on a fabric."""
    value = 0xc100 + 16 * index + function
    return f"946d:ae03:002a:{value:04x}"


def two_fabric_node(root, fabric2_up=True, index=0):
    """mlx5_0 on IbFabric1, mlx5_1 (SR-IOV, two VFs present) on IbFabric2; `index` makes
    the GUIDs the node's own."""
    device(root, "mlx5_0", "0000:ca:00.0", FABRIC1, guid=node_guid(index, 0))
    device(root, "mlx5_1", "0000:ca:00.1", FABRIC2, active=fabric2_up, sriov=4, guid=node_guid(index, 1))
    virtual_function(root, "mlx5_2", "0000:ca:00.2", "0000:ca:00.1", 0, FABRIC2)
    virtual_function(root, "mlx5_3", "0000:ca:00.3", "0000:ca:00.1", 1, FABRIC2)


FABRIC_CONFIG = f"""
[infiniband]
enabled = true
pkey-pool = "0x2000-0x2003"
guid-pool = "0x0002c90300a00000-0x0002c90300a000ff"

[[infiniband.fabric]]
name = "IbFabric1"
subnet-prefix = "{FABRIC1}"

[[infiniband.fabric]]
name = "IbFabric2"
subnet-prefix = "{FABRIC2}"

[[infiniband.partition]]
name = "storage"
pkey = "0x0100"
"""


def main():
    """For the demo: `ib_sysfs_tree.py DIR NODES [--down N]...` builds DIR/node0..: a
    two-fabric node each (node N with its IbFabric2 port down), and prints the fabric
    configuration for corrald."""
    import argparse
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("dir")
    parser.add_argument("nodes", type=int)
    parser.add_argument("--down", type=int, action="append", default=[],
                        help="a node whose IbFabric2 port is down")
    args = parser.parse_args()
    for i in range(args.nodes):
        two_fabric_node(os.path.join(args.dir, f"node{i}"), fabric2_up=i not in args.down, index=i)
    print(FABRIC_CONFIG)


if __name__ == "__main__":
    main()
