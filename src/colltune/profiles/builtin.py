"""Built-in profiles, selected as ``builtin:NAME``: the papers' own numbers, and one present-day network.

Each profile is built here from the paper's table (converted to seconds, bytes and bytes per
second), so the transcription can be read next to the paper; every derivation or assumption is
listed in the profile's ``provenance.notes``.
"""

from __future__ import annotations

from collections.abc import Callable

from colltune.models.cluster import TABLE1
from colltune.models.params import (
    Hockney,
    LatencyMatrix,
    LogGP,
    LogP,
    PLogP,
    PlogPT,
    PLogPTable,
    Tabulated,
    TreeLevels,
)
from colltune.profiles.format import Models, Profile, ProfileError, Provenance

MBIT = 1e6 / 8  # bytes per second in one Mbit/s
US = 1e-6

#: Paper 001 Table II, per height h = 1..5: (unidirectional d(h) us, b(h)/2^(h-1) Mbit/s,
#: bidirectional 2 d(h) us, b(h)/2^(h-1) Mbit/s).
TABLE_II = ((500, 936.4, 502, 580.2), (517, 935.6, 902, 580.1), (535, 936.1, 913, 576.0),
            (527, 934.1, 910, 579.2), (543, 625.0, 909, 485.0))

#: Paper 004 Fig. 1: one-way latency from row to column, in the paper's time units.
FIG1_NAMES = ("A", "B", "C", "D", "E", "F", "G", "H")
FIG1 = ((0, 400, 800, 420, 520, 500, 800, 150),
        (430, 0, 200, 450, 700, 540, 700, 370),
        (700, 250, 0, 500, 870, 850, 700, 600),
        (400, 450, 500, 0, 500, 950, 1300, 780),
        (500, 670, 800, 500, 0, 500, 700, 520),
        (580, 550, 850, 800, 500, 0, 280, 480),
        (920, 700, 700, 1260, 720, 300, 0, 200),
        (300, 520, 600, 800, 550, 320, 200, 0))


def _linear_table(intercept: float, per_byte: float) -> Tabulated:
    """``intercept + per_byte * m`` tabulated at 0 and 1 MiB (it extends linearly beyond)."""
    return Tabulated(sizes=(0, 1 << 20), values=(intercept, intercept + per_byte * (1 << 20)))


def paper000_cluster() -> Profile:
    return Profile(
        name="paper000-cluster", time_unit="s", default_model="cluster",
        description="Paper 000's 16-node Fast Ethernet cluster (200 MHz WinChip PCs, Intel 510T switch, Direct "
                    "Point), its cluster-model parameters (Table 1)",
        provenance=Provenance(source="paper 000 Table 1", procs=16, notes=(
            "Table 1 gives microseconds and bytes; stored as seconds and bytes.",
            ("L(m, p) = 1.556 p + 16.684 + 0.0826 m max(1, p m / (90 gs(m))) us: the 90 is read as 90 bytes per "
            "microsecond (saturation = 9e7 B/s), which makes the max() dimensionless."),
            "BL is 1935 packets; mtu = 1500 bytes (Fast Ethernet).")),
        models=Models(cluster=TABLE1))


def paper001_gige() -> Profile:
    """Paper 001 Table II: b(h) = (b(h)/2^(h-1)) 2^(h-1); bidirectional d(h) is half the table's 2 d(h)."""
    uni = TreeLevels(b=tuple(row[1] * MBIT * 2**h for h, row in enumerate(TABLE_II)),
                     d=tuple(row[0] * US for row in TABLE_II))
    bi = TreeLevels(b=tuple(row[3] * MBIT * 2**h for h, row in enumerate(TABLE_II)),
                    d=tuple(row[2] / 2 * US for row in TABLE_II))
    latency = 50 * US
    g_uni, g_bi = _linear_table(0.0, 1 / uni.b[0]), _linear_table(0.0, 1 / bi.b[0])
    return Profile(
        name="paper001-gige", time_unit="s", default_model="plogpt",
        description="Paper 001's 32-node Gigabit Ethernet cluster (Opteron, Tigon 3, BayStack 5510-48T, YAMPI): "
                    "the PlogPT tree of Table II, unidirectional and bidirectional",
        provenance=Provenance(source="paper 001 Table II", procs=32, notes=(
            "b(h) is the bandwidth of one height-h edge: the table's b(h)/2^(h-1) times 2^(h-1), Mbit/s to B/s.",
            "Bidirectional d(h) is half of the table's 2 d(h) (paper 001 section III-C).",
            ("eps_s = 0.01 makes eq. 5 give P_S(h, h+1) false exactly for h = 2, 3 on the bidirectional tree, "
            "as section IV-B states; eps_t = 50 us is a few times one 1500-byte packet's 12.8 us at b(1)."),
            "g(m) is not tabulated in the paper's text: derived from eq. 6 as m / b(1) (overheads neglected).",
            ("L is not given in the paper's text: 50 us assumed, a typical MPI-over-TCP one-way latency on "
            "Gigabit Ethernet of that period; override it with --set L=SECONDS."))),
        models=Models(
            plogpt=PlogPT(L=latency, g=g_bi, bidirectional=bi, unidirectional=uni, t_rto=0.2, eps_s=0.01,
                          eps_t=50 * US),
            plogp=PLogP(L=latency, unidirectional=PLogPTable(g=g_uni), bidirectional=PLogPTable(g=g_bi))))


def paper001_example() -> Profile:
    return Profile(
        name="paper001-example", time_unit="abstract", default_model="plogpt",
        description="Paper 001's worked example (section III-E, Fig. 9-12): four nodes, b(1) = 3, b(2) = 4, "
                    "g(m) = 8, L = 3, in abstract time units; its sample program takes 26",
        provenance=Provenance(source="paper 001 section III-E", procs=4, notes=(
            "No d(h), T_RTO or eps_T are given: the RTO rule cannot be evaluated on this profile.",)),
        models=Models(
            plogpt=PlogPT(L=3, g=Tabulated.constant(8), bidirectional=TreeLevels(b=(3, 4))),
            plogp=PLogP(L=3, unidirectional=PLogPTable(g=Tabulated.constant(8)))))


def paper004_grid() -> Profile:
    return Profile(
        name="paper004-grid", time_unit="abstract", default_model="latency",
        description="Paper 004's eight virtual organisations A..H (Fig. 1): a one-way latency matrix, row = sender",
        provenance=Provenance(source="paper 004 Fig. 1", procs=8, notes=(
            "Latencies in the paper's time units; overhead and gap are 0, as in its eq. 3-4.",)),
        models=Models(latency=LatencyMatrix(names=FIG1_NAMES, latency=FIG1)))


def ethernet_10g_tcp() -> Profile:
    """A present-day profile from first principles: MPI over kernel TCP on 10 Gbit/s Ethernet."""
    goodput = 10e9 / 8 * 1448 / 1538  # B/s of TCP payload
    G = 1 / goodput
    o, L, g = 2.5 * US, 10 * US, 5 * US
    copy = 1 / 8e9  # s/B: one core copying (or adding) at 8 GB/s
    per_msg = _linear_table(g, G)
    overhead = _linear_table(o, copy)
    return Profile(
        name="ethernet-10g-tcp", time_unit="s", default_model="hockney",
        description="MPI over kernel TCP on 10 Gbit/s Ethernet through one switch (1500-byte MTU), from first "
                    "principles",
        provenance=Provenance(source="colltune: derived from link rate, frame overheads and typical host costs",
                              date="2026-11-20", notes=(
            ("Bandwidth: 10 Gbit/s carries 1448 bytes of TCP payload (IPv4 + TCP with timestamps: 52 bytes) per "
            "1538 bytes on the wire (Ethernet header, FCS, preamble and inter-frame gap: 38 bytes): "
            "beta = G = 1/(1.177e9 B/s) = 0.85 ns/B."),
            ("Small messages: o = 2.5 us per send or receive (system call and TCP/IP stack), L = 10 us (NIC, PCIe, "
            "serialisation, one switch hop, interrupt moderation); one message costs 2o + L = 15 us = alpha, "
            "the usual MPI-over-TCP latency on 10 GbE without busy polling."),
            "g = 5 us between small messages (about 200k messages per second per connection).",
            ("pLogP: g(m) = g + m G, L = 2o + L - g, so that g(m) + L = alpha + beta m; os(m) = or(m) = o + m/8e9 "
            "(one copy through the socket buffer at 8 GB/s)."),
            "S = 65536 bytes: Open MPI's default eager limit for TCP (btl_tcp_eager_limit).",
            "gamma = 1/8e9 s/B: one core combining two streams at memory speed.")),
        models=Models(
            hockney=Hockney(alpha=2 * o + L, beta=G, gamma=copy),
            logp=LogP(L=L, o=o, g=g),
            loggp=LogGP(L=L, o=o, g=g, G=G, S=65536),
            plogp=PLogP(L=2 * o + L - g, unidirectional=PLogPTable(g=per_msg, os=overhead, or_=overhead))))


#: The built-in profiles by name.
BUILTINS: dict[str, Callable[[], Profile]] = {
    "paper000-cluster": paper000_cluster,
    "paper001-gige": paper001_gige,
    "paper001-example": paper001_example,
    "paper004-grid": paper004_grid,
    "ethernet-10g-tcp": ethernet_10g_tcp,
}


def builtin(name: str) -> Profile:
    """The built-in profile ``name``; an unknown name lists the valid ones."""
    try:
        return BUILTINS[name]()
    except KeyError:
        raise ProfileError(f"unknown built-in profile {name!r}; valid: "
                            + ", ".join(f"builtin:{n}" for n in BUILTINS)) from None
