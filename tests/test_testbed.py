"""The emulated cluster: shaped links measured through MPI, an oversubscribed uplink, every
broadcast bit-exact across hosts, and nothing left behind.  Needs root and iproute2 (CI runs as
root); elsewhere the tests are skipped with the reason.  The error paths that need no root run
everywhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import run_bounded

from colltune import testbed
from colltune.cli import main
from colltune.errors import ColltuneError
from colltune.sim import read_topology, star

HERE = Path(__file__).parent / "mpi"
NAME = "cttest"
ALLOWED = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
CAN = os.geteuid() == 0 and all(shutil.which(tool) is not None for tool in testbed.net.TOOLS)
needs_root = pytest.mark.skipif(not CAN, reason="the testbed needs root, iproute2 (ip, tc) and procps (sysctl)")


def colltune(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``colltune ARGS`` in a child process; the whole group is killed if it hangs."""
    return run_bounded([sys.executable, "-m", "colltune", *args], timeout, f"colltune {' '.join(args)}")


def leftovers() -> list[str]:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout.split()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=False).stdout
    return [n for n in names if n.startswith(f"{NAME}-")] + \
        [line.split(":")[1].strip() for line in links.splitlines() if ": ctb" in line]


@pytest.fixture
def bed():
    """Brings a testbed down after the test, whatever happened."""
    hosts_before = Path("/etc/hosts").read_text()
    allowed_before = ALLOWED.read_text() if CAN else ""
    yield lambda *args: colltune("testbed", "up", "--name", NAME, *args, timeout=120)
    res = colltune("testbed", "down", "--name", NAME, timeout=120)
    assert res.returncode == 0, res.stderr
    assert leftovers() == []
    assert Path("/etc/hosts").read_text() == hosts_before
    assert ALLOWED.read_text() == allowed_before  # the congestion control it allowed is taken back


def bandwidth(*args: str, python: str = sys.executable, run: tuple[str, ...] = ()) -> dict[str, float]:
    res = colltune("testbed", "run", "--name", NAME, *run, "--", python, "-m", "mpi4py",
                   str(HERE / "testbed_bw.py"), *args)
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-3000:]}"
    library, rates = res.stdout.strip().splitlines()[-2:]
    assert ("Open MPI" if "openmpi" in run else "MPICH") in library
    return json.loads(rates)


@needs_root
def test_star_links_carry_their_rate_and_the_topology_file_describes_them(bed):
    assert "bucket must hold one frame" in bed("--hosts", "4", "--burst", "1000").stderr
    res = bed("--hosts", "4", "--topology", "star", "--link", "100Mbit", "--queue", "64KiB")
    assert res.returncode == 0, res.stderr
    topology = read_topology(testbed.topology_file(NAME))
    assert topology.procs == 4 and all(n.up == 12.5e6 for n in topology.nodes if n.parent)
    assert all(n.buffer == 65536 for n in topology.nodes if n.parent)  # the switch ports' queues, as made
    assert all(n.burst == testbed.net.BURST for n in topology.nodes if n.parent)  # and the links' buckets
    assert topology.window == testbed.net.TCP_WINDOW
    assert topology.framing == (testbed.net.SEGMENT, testbed.net.FRAME - testbed.net.SEGMENT)  # tbf counts headers
    assert topology.cores == len(os.sched_getaffinity(0))  # its hosts share this machine's cores
    qdisc = subprocess.run(["ip", "netns", "exec", f"{NAME}-h0", "tc", "-j", "qdisc", "show", "dev", "eth0"],
                           capture_output=True, text=True, check=True).stdout
    tbf = json.loads(qdisc)[0]
    assert tbf["kind"] == "tbf" and tbf["options"]["burst"] == testbed.net.BURST, tbf
    for h in range(4):  # Linux's default congestion control, whatever the machine's own is
        cc = subprocess.run(["ip", "netns", "exec", f"{NAME}-h{h}", "cat", "/proc/sys/net/ipv4/tcp_congestion_control"],
                            capture_output=True, text=True, check=True).stdout.strip()
        assert cc == testbed.net.TCP_CONGESTION == "cubic"
    rates = bandwidth("links")
    assert len(rates) == 4 and all(90 <= r <= 100 for r in rates.values()), rates
    status = json.loads(colltune("testbed", "status", "--name", NAME).stdout)
    assert status["congestion"] == "cubic"
    assert len(status["ports"]) == 8 and sum(p["bytes"] for p in status["ports"].values()) > 4 * 6 * 2**20


@needs_root
def test_open_mpi_runs_across_the_hosts_too(bed, openmpi_venv):
    res = bed("--hosts", "2", "--topology", "star", "--link", "100Mbit", "--tcp", "reno")
    assert res.returncode == 0 and "TCP reno" in res.stdout, res.stderr
    rates = bandwidth("links", python=str(openmpi_venv / "bin" / "python"),
                      run=("--mpi", "openmpi", "--mpiexec", str(openmpi_venv / "bin" / "mpirun")))
    assert len(rates) == 2 and all(88 <= r <= 100 for r in rates.values()), rates


@needs_root
def test_an_oversubscribed_uplink_halves_cross_switch_bandwidth(bed):
    """Binary tree of 4 hosts, 100 Mbit/s host links and 100 Mbit/s uplinks (2:1): two flows
    across the switches share an uplink, two within the switches do not (their total rates, over
    the time the slower of the two took)."""
    res = bed("--hosts", "4", "--topology", "binary", "--link", "100Mbit", "--uplink", "100Mbit")
    assert res.returncode == 0, res.stderr
    across = bandwidth("pairs", "0-2,1-3")
    within = bandwidth("pairs", "0-1,2-3")
    ratio = across["total"] / within["total"]
    assert 0.4 <= ratio <= 0.6, (across, within)


@needs_root
def test_every_broadcast_is_bit_exact_across_the_hosts(bed):
    res = bed("--hosts", "4", "--topology", "tree:2", "--link", "1Gbit")
    assert res.returncode == 0, res.stderr
    run = colltune("testbed", "run", "--name", NAME, "--", sys.executable, "-m", "mpi4py",
                   str(HERE / "bcast_check.py"), "0,1,1000,65537", timeout=600)
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr[-3000:]}"
    assert "bcast_check: P=4" in run.stdout


@needs_root
@pytest.mark.parametrize("placement", ["block", "round-robin"])
def test_ranks_of_a_host_share_memory_and_its_link(bed, placement):
    """2 hosts x 2 ranks: the topology file places the ranks by block; the job places them as
    asked; two ranks of one host move data far faster than the 100 Mbit/s link, two of different
    hosts at its rate; colltune finds the hosts (MPI_Comm_split_type) and every hierarchical
    algorithm is bit-exact across them."""
    res = bed("--hosts", "2", "--ranks-per-host", "2", "--link", "100Mbit")
    assert res.returncode == 0, res.stderr
    topology = read_topology(testbed.topology_file(NAME))
    assert topology.hosts == ("h0", "h0", "h1", "h1") and topology.ranks_per_host == 2
    same, other = ("0-1", "0-2") if placement == "block" else ("0-2", "0-1")
    rates = {pair: bandwidth("pairs", pair, run=("--placement", placement))["total"] for pair in (same, other)}
    assert rates[same] > 400 and 85 <= rates[other] <= 100, rates
    run = colltune("testbed", "run", "--name", NAME, "--placement", placement, "--", sys.executable, "-m", "mpi4py",
                   str(HERE / "hosts_check.py"), timeout=600)
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr[-3000:]}"
    assert "hosts_check: P=4 2 hosts" in run.stdout


@needs_root
def test_a_failure_half_way_through_up_leaves_nothing(monkeypatch):
    calls = {"n": 0}
    real = testbed.net._run

    def failing(*cmd: str) -> str:
        calls["n"] += 1
        if calls["n"] == 25:
            raise testbed.TestbedError("injected failure")
        return real(*cmd)

    monkeypatch.setattr(testbed.net, "_run", failing)
    with pytest.raises(testbed.TestbedError, match="injected"):
        testbed.up(star(4, 12.5e6), NAME, 65536)
    assert leftovers() == [] and testbed.net.State.load(NAME) is None
    assert testbed.down(NAME) == []  # idempotent


@needs_root
def test_a_second_testbed_is_refused_while_one_is_up(bed):
    """Every testbed's launcher bridge holds the same address in this machine's namespace: a
    second one would make the first one's jobs hang, so it is one clear error naming the first."""
    assert bed("--hosts", "2").returncode == 0
    res = colltune("testbed", "up", "--name", "ctother", "--hosts", "2", timeout=120)
    assert res.returncode == 2 and "testbed 'cttest' is up" in res.stderr, res.stderr
    assert "colltune testbed down --name cttest" in res.stderr
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert "ctother" not in names and testbed.net.State.load("ctother") is None


@needs_root
def test_a_congestion_control_the_kernel_lacks_is_one_clear_error_and_leaves_nothing(bed):
    res = bed("--hosts", "2", "--tcp", "nosuchcc")
    assert res.returncode == 2 and "'nosuchcc' is not available in this kernel" in res.stderr, res.stderr
    assert leftovers() == []


def test_without_root_there_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    for args in (["up", "--hosts", "2"], ["down"], ["status"], ["run", "--", "true"]):
        out = CliRunner().invoke(main, ["testbed", *args, "--name", NAME] if args[0] != "run"
                                 else ["testbed", "run", "--name", NAME, "--", "true"])
        assert out.exit_code == 2 and "needs root" in out.output, (args, out.output)


def test_a_missing_program_is_named_with_its_package(monkeypatch):
    """``up`` sets each host's congestion control with ``sysctl`` inside its namespace: a machine
    without procps gets one error naming it, not the failing command's."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "sysctl" else f"/usr/bin/{tool}")
    out = CliRunner().invoke(main, ["testbed", "up", "--hosts", "2", "--name", NAME])
    assert out.exit_code == 2 and "needs sysctl (procps)" in out.output, out.output
    assert "iproute2" not in out.output


def test_bad_rates_are_rejected():
    out = CliRunner().invoke(main, ["testbed", "up", "--hosts", "2", "--link", "fast"])
    assert out.exit_code == 2 and "is not a rate" in out.output


def test_ranks_are_placed_on_hosts_by_block_or_round_robin():
    topology = star(3, 1e6)
    block, spread = topology.placed(2), topology.placed(2, "round-robin")
    assert block.hosts == ("h0", "h0", "h1", "h1", "h2", "h2") and block.ranks_per_host == 2
    assert spread.hosts == ("h0", "h1", "h2", "h0", "h1", "h2") and spread.host_names == ("h0", "h1", "h2")
    assert block.placed(1).hosts == topology.hosts
    with pytest.raises(ColltuneError, match="placement 'diagonal'"):
        topology.placed(2, "diagonal")
    with pytest.raises(ColltuneError, match="at least 1"):
        topology.placed(0)
    out = CliRunner().invoke(main, ["testbed", "run", "--placement", "diagonal", "--", "true"])
    assert out.exit_code == 2 and "diagonal" in out.output
