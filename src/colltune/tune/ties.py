"""How a prediction's near-ties are broken: among the candidates predicted within
:data:`PREDICTED_TIE` of the fastest, ``native`` where it is one of them, else the one whose
busiest rank drives the least of the network: moves the fewest bytes to and from other hosts, then
talks to the fewest peers there (:func:`load`).

A prediction cannot tell apart candidates whose predicted times differ by less than its own error,
and where several algorithms move the same bytes over the same links it prices them exactly alike
(four all-to-alls and the ring and direct all-gathers of 4 KiB on a switch, say).  What separates
such candidates on a TCP network is what the busiest rank's process must do to move its part:

- every byte it sends or receives over the network is copied through its sockets and, with
  MPICH's libfabric tcp provider, moves only while that rank is in MPI on a core, so the rank that
  moves the most finishes last, the more so where ranks share cores
  (:meth:`colltune.schedule.Schedule.max_remote_bytes`).  A hierarchical algorithm's leader moves
  its whole host's traffic, K times a flat algorithm's rank on hosts of K ranks: in three fidelity
  runs on 4 hosts of 2 ranks, the hierarchical all-to-all of 512 KiB, predicted 2 % ahead of the
  direct one, ran 711, 779 and 793 ms (the medians of its rounds) where the direct one ran 578-583;
- each rank on another host it exchanges messages with is a connection of its own, with its own
  window, acknowledgements and progress to poll (:meth:`colltune.schedule.Schedule.max_remote_peers`):
  the recursive-doubling barrier ran ahead of the dissemination one, the ring all-gather of the
  direct one, the binomial gather of the synchronised linear one.

Ranks of one host talk through shared memory, queues without windows or acknowledgements, so
neither counts their messages: on hosts of several ranks a chain or a binomial tree placed by
blocks has one peer over the network, as many as a hierarchical one.  Bytes come first, since
their cost grows with the size and a peer's does not; peers decide where the bytes are equal (the
flat all-to-alls, the barriers).

Where ``native`` (the library's own choice) is one of a near-tie, it is the choice
(:func:`keeps_native`): a lead that small says nothing of which is faster, and switching costs
what the prediction leaves out.  colltune's executor runs a schedule call by call over the
library's point-to-point (the interposition library adds its own cost on top), and a prediction
leaves out the processor time each message takes where ranks share cores, which grows with the
number of messages: on the testbed's hosts of several ranks (2 x 4, round-robin), a hierarchical
reduction pipelined in 1 KiB segments, predicted 3 % ahead of MPICH's own at 64 KiB, ran 8 %
behind it, and the scatter-allgather broadcast MPICH runs by default ran 2 % slower through
colltune's executor than in MPICH (``benchmarks/nodes_testbed.py``).  The same cost can exceed the
window: there an all-reduce pipelined in 1 KiB segments, predicted 11 % ahead, ran 21 % behind;
only timing the contenders in the job (the ``hybrid`` method) sees it.

The window is the 5 % by which the fidelity benchmark counts a measured choice as
good as the best: a smaller predicted lead is below the median error of the best predictors on the
testbed, so it says nothing of which is faster.  Measured prices (the
tuner's ``measure`` and ``hybrid`` methods) are not ordered by this rule: their ties are the
tuner's tolerance's (:meth:`colltune.tune.select.Tuner.winner`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from colltune.algorithms import REGISTRY
from colltune.tune.native import NATIVE, native_placed

#: Predicted times within this fraction of the fastest are a tie (see the module docstring).
PREDICTED_TIE = 0.05

#: From this many bytes per rank on, a registered algorithm's peers no longer change with the
#: size (with its parameters fixed): below it some ranks' blocks are empty and send nothing.  On
#: every candidate of the seven collectives with data, every parameter value the tuner tries, at
#: P = 2-64 and sizes above 8 bytes per rank up to 1 MiB, the peers at 8
#: bytes per rank equal those at the size; the largest size at which a peer count still changed
#: was 16 B at P = 33 (Rabenseifner's reductions, 2 float64 elements).  So :func:`load` builds the
#: schedule at no more than this many bytes per rank: building every near-tie at its own size
#: took 58 of the 61 s of ``colltune tune --profile builtin:ethernet-10g-tcp`` (P = 2-64, up to 4
#: MiB; 1.4 s without the rule).  tests/test_ties.py checks it.
SETTLED_BYTES_PER_RANK = 8
#: And from this many bytes in all on, every registered candidate's busiest rank moves bytes to and
#: from other hosts in proportion with the size (its parameters fixed), so that candidates of one
#: size compare by them as at that size: below 2 KiB the symmetric broadcast sends the whole
#: message from the root to every rank (:data:`colltune.algorithms.bcast.SYMMETRIC_MIN_SPLIT`), above
#: it a piece to each.  tests/test_ties.py checks the order at 16 and 256 KiB, P = 3, 8 and 13, one
#: rank per host and hosts of 2 and 4 ranks.
SETTLED_BYTES = 4096

T = TypeVar("T")


def load(collective: str, algorithm: str, procs: int, size: int, params: dict[str, Any],
         hosts: tuple[int, ...] | None = None) -> tuple[int, int]:
    """How much of the network the busiest rank of ``algorithm``'s schedule (root 0, blocks of
    ``size`` bytes, ``procs`` ranks) drives, as a near-tie compares it: the most bytes one rank
    sends to and receives from other hosts, then the most peers on other hosts one rank exchanges
    messages with (:meth:`colltune.schedule.Schedule.max_remote_bytes`,
    :meth:`~colltune.schedule.Schedule.max_remote_peers`), both on its schedule at no more than
    :data:`SETTLED_BYTES_PER_RANK` bytes per rank or :data:`SETTLED_BYTES` in all, whichever is
    more (where the peers are the size's and the bytes in proportion with it).  ``hosts`` labels
    each rank's host (a hierarchical algorithm is built on them); ``None``, every rank is on a host
    of its own and every peer counts.  ``native`` counts as what MPICH runs on those hosts
    (:func:`colltune.tune.native.native_placed`)."""
    if algorithm == NATIVE:
        algorithm, params = native_placed(collective, procs, size, hosts)
    frozen = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in params.items()))
    settled = min(size, max(SETTLED_BYTES_PER_RANK * procs, SETTLED_BYTES))
    return _load_at(collective, algorithm, procs, settled, frozen, hosts)


@functools.lru_cache(maxsize=4096)
def _load_at(collective: str, algorithm: str, procs: int, size: int, params: tuple[tuple[str, Any], ...],
             hosts: tuple[int, ...] | None) -> tuple[int, int]:
    """:func:`load` of one registry schedule (a pure function of its arguments, so remembered: a
    tune asks it of the same choices at every bisected size)."""
    alg = REGISTRY.get(collective, algorithm)
    schedule = alg.schedule(procs, 0, size, hosts=hosts if alg.hierarchical else None, **dict(params))
    return schedule.max_remote_bytes(hosts), schedule.max_remote_peers(hosts)


@runtime_checkable
class Placing(Protocol):
    """A pricer that says where it places the ranks (:meth:`colltune.tune.select.SimPricer.hosts`)."""

    def hosts(self, procs: int) -> tuple[int, ...] | None:
        """The host label of each of ``procs`` ranks (None: each on a host of its own)."""


def placed_hosts(pricer: object, procs: int) -> tuple[int, ...] | None:
    """Where ``pricer`` places ``procs`` ranks, as :func:`load` reads it: its ``hosts(procs)``
    where it has one (:class:`Placing`), else None (an analytic model's ranks, each on a host of
    its own)."""
    return pricer.hosts(procs) if isinstance(pricer, Placing) else None


def lightest_first(items: Sequence[T], time: Callable[[T], float], load_of: Callable[[T], Any],
                   order: Callable[[T], Any]) -> list[T]:
    """``items`` sorted by ``order``, except that the first is, among the items whose ``time`` is
    within :data:`PREDICTED_TIE` of the fastest, the one with the least ``load_of`` (:func:`load`;
    then the first by ``order``); ``load_of`` is asked only of those."""
    ranked = sorted(items, key=order)
    if len(ranked) < 2:
        return ranked
    fastest = min(time(x) for x in ranked)
    near = [x for x in ranked if time(x) <= fastest * (1 + PREDICTED_TIE)]
    if len(near) < 2:
        return ranked
    loads = [load_of(x) for x in near]
    chosen = near[loads.index(min(loads))]
    return [chosen, *(x for x in ranked if x is not chosen)]


def keeps_native(native: float, fastest: float) -> bool:
    """True if ``native``'s predicted time (s) is within :data:`PREDICTED_TIE` of the ``fastest``
    predicted: then no candidate is predicted far enough ahead to replace the library's own choice
    (see the module docstring)."""
    return native <= fastest * (1 + PREDICTED_TIE)


def predicted_choice(items: Sequence[T], time: Callable[[T], float], load_of: Callable[[T], Any],
                     name: Callable[[T], str]) -> T:
    """The choice among priced ``items`` (at least one) that the tuner's predicted methods make:
    ``native`` where it is one of them and :func:`keeps_native`, else, of the items predicted that
    far ahead of it (all, without ``native``), the fastest ``time`` (s), a near-tie going to the
    least ``load_of`` (:func:`lightest_first`), then to the first ``name`` in alphabetical
    order: as :meth:`colltune.tune.select.Tuner.sample` orders a sample.  The probe's check by
    choices and the fidelity benchmark call it too, so that they judge what the tuner chooses."""
    native = next((x for x in items if name(x) == NATIVE), None)
    if native is not None:
        items = [x for x in items if x is not native and not keeps_native(time(native), time(x))]
        if not items:
            return native
    return lightest_first(items, time, load_of, lambda x: (time(x), name(x)))[0]
