"""Hosts on separate network stacks on one machine, for corral's multi-host tests.

Every host is a holder process (`sleep`) with its own network, UTS and mount namespaces:
its own interfaces and address, its own hostname, its own /run (where its munged puts
/run/munge/munge.socket.2, libmunge's default, so nothing on the host names a socket),
and a private bind mount of one /etc/hosts naming every host (so names resolve the same
everywhere, as a site's DNS would). Each host has a veth pair to a router that lives in a namespace of its own (the
switch: one port per host, proxy ARP, so the hosts see one subnet), so nothing is added
to the machine's own network stack, and killing the holders removes every interface. A command runs on a host through nsenter.

Cutting a host off sets its switch port down: packets are dropped both ways, as when a
cable or a switch port fails, and TCP connections hang rather than reset. A host can also
be cut from some hosts only (cut_from), as when the link between two switches fails.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time

SUBNET = "10.66.0"


def can_make_hosts():
    """Root with unshare, nsenter and ip: what the harness needs."""
    return os.geteuid() == 0 and all(shutil.which(t) for t in ("unshare", "nsenter", "ip"))


class _Holder:
    """A `sleep` in new namespaces, started by a setup script that touches READY last."""

    def __init__(self, unshare_flags, setup, dir, name):
        ready = os.path.join(dir, f"{name}.ready")
        script = f"set -e; {setup}; touch {ready}; exec sleep infinity"
        self.proc = subprocess.Popen(["unshare", *unshare_flags, "--", "sh", "-c", script],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(dir, f"{name}.holder.err"), "wb"),
                                     start_new_session=True)
        deadline = time.monotonic() + 10
        while not os.path.exists(ready):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = open(os.path.join(dir, f"{name}.holder.err")).read()
                raise RuntimeError(f"host {name}: namespace setup failed: {err}")
            time.sleep(0.02)
        self.pid = self.proc.pid

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Host:
    def __init__(self, net, name, addr, index):
        self.net, self.name, self.addr = net, name, addr
        self.port = f"p{index}"  # its switch port, in the switch's namespace
        # Its own /run, with /run/munge from a directory of the test's, where this host's
        # munged makes its socket under libmunge's default name.
        self.munge_dir = os.path.join(net.dir, f"{name}-munge")
        os.mkdir(self.munge_dir)
        setup = (f"mount --bind {net.hosts_file} /etc/hosts; mount -t tmpfs -o mode=0755 tmpfs /run; "
                 f"mkdir /run/munge; mount --bind {self.munge_dir} /run/munge; hostname {name}; "
                 "ip link set lo up")
        self.holder = _Holder(["--net", "--uts", "--mount", "--propagation", "private"], setup,
                              net.dir, name)
        net.switch_cmd("ip", "link", "add", self.port, "type", "veth", "peer", "name", "eth0",
                       "netns", str(self.holder.pid))
        net.switch_cmd("ip", "link", "set", self.port, "up")
        # Proxy ARP answers after proxy_delay (0.8 s by default): every first contact
        # between two hosts would wait that long, which no switch does.
        net.switch_cmd("sysctl", "-qw", f"net.ipv4.conf.{self.port}.proxy_arp=1",
                       f"net.ipv4.neigh.{self.port}.proxy_delay=0")
        net.switch_cmd("ip", "route", "add", f"{addr}/32", "dev", self.port)
        self.run(["ip", "addr", "add", f"{addr}/24", "dev", "eth0"], check=True)
        self.run(["ip", "link", "set", "eth0", "up"], check=True)
        self.procs = []

    def prefix(self):
        """The command prefix that runs what follows on this host."""
        return ["nsenter", "-t", str(self.holder.pid), "-n", "-u", "-m", "--"]

    def run(self, args, check=False, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 120)
        return subprocess.run(self.prefix() + [str(a) for a in args], check=check, **kw)

    def spawn(self, args, log, env=None):
        """A long-running process on this host, its output appended to `log`; killed with
        the host."""
        with open(log, "ab") as out:
            p = subprocess.Popen(self.prefix() + [str(a) for a in args], stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)
        self.procs.append(p)
        return p

    def cut(self):
        """Pulls the cable: the switch port goes down."""
        self.net.switch_cmd("ip", "link", "set", self.port, "down")

    def reconnect(self):
        self.net.switch_cmd("ip", "link", "set", self.port, "up")
        # The kernel dropped the switch's route to the port when it went down.
        self.net.switch_cmd("ip", "route", "replace", f"{self.addr}/32", "dev", self.port)

    def cut_from(self, others):
        """Cuts this host off from the `others` only (the rest of the network still
        reaches it): the switch drops what passes between them, both ways, silently."""
        for h in others:
            for a, b in ((self.addr, h.addr), (h.addr, self.addr)):
                self.net.switch_cmd("ip", "rule", "add", "from", a, "to", b, "blackhole")

    def rejoin(self, others):
        for h in others:
            for a, b in ((self.addr, h.addr), (h.addr, self.addr)):
                self.net.switch_cmd("ip", "rule", "del", "from", a, "to", b, "blackhole")

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.holder.stop()


class Network:
    """The switch and the hosts named (each gets SUBNET.<10+i>, in order)."""

    def __init__(self, names):
        self.dir = tempfile.mkdtemp(prefix="corral-net-")
        self.hosts_file = os.path.join(self.dir, "hosts")
        addrs = {n: f"{SUBNET}.{10 + i}" for i, n in enumerate(names)}
        with open(self.hosts_file, "w") as f:
            f.write("127.0.0.1 localhost\n")
            for n, a in addrs.items():
                f.write(f"{a} {n}\n")
        os.chmod(self.hosts_file, 0o644)
        self.hosts = {}
        self.switch = _Holder(["--net"], "ip link set lo up; sysctl -qw net.ipv4.ip_forward=1",
                              self.dir, "switch")
        try:
            for i, n in enumerate(names):
                self.hosts[n] = Host(self, n, addrs[n], i)
        except Exception:
            self.stop()
            raise

    def switch_cmd(self, *args):
        subprocess.run(["nsenter", "-t", str(self.switch.pid), "-n", "--", *args], check=True,
                       capture_output=True, text=True, timeout=30)

    def __getitem__(self, name):
        return self.hosts[name]

    def stop(self):
        for h in self.hosts.values():
            h.stop()
        self.switch.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
