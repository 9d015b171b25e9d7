"""The network warm-up: how long and with which blocks a timing job first exchanges traffic
between every pair of ranks, the same in the tuning job, its fresh jobs
(:func:`colltune.tune.timing.warm_network`) and the C client of ``bench --library``
(:mod:`colltune.tune.library_bench`).  No imports: the command line reads these without MPI.
"""

#: Seconds every run of the client on a network (``colltune bench --testbed``) first exchanges blocks
#: between every pair of ranks, one peer at a time, before it times anything (``bench
#: --network-warmup``; the tuner warms its job and its fresh jobs the same way).  A fresh job's TCP
#: connections leave slow start early: cubic's HyStart sees the queue build at the 100 Mbit/s port
#: and stops at a congestion window of about 16 segments (``ss -ti``: cwnd 16, ssthresh 16, no
#: loss), and cubic then grows it with the connection's time in flight, over seconds.  Until it
#: holds the largest message an algorithm sends on a connection, each call waits for
#: acknowledgements: on the 8-host testbed (2026-11-27, Open MPI, ``benchmarks/call_regimes.py
#: --library openmpi --collective scatter --size 8KiB --algorithms binomial,basic_linear --calls 100
#: --rounds 2 --jobs 5``) the binomial scatter of 8 KiB (32 KiB from the root to rank 4) took
#: 6.4-6.5 ms a call in 9 of 10 rounds of fresh jobs, the linear one (8 KiB a connection) 4.7-4.8,
#: and the tuning job, warm from its probe, had timed them at 4.78 and 4.72.  A warm-up in which
#: every rank sent 64 KiB to all others at once (until 2026-11-27, 16:00) lost packets at the switch
#: ports and left each window to chance (4.8-5.6 ms; at 16 KiB 9.7-15 ms from job to job); the
#: pairwise exchange of 256 KiB blocks loses none and gave 4.8 ms at 8 KiB and 9.6 at 16 KiB in
#: every fresh job (docs/tune.md, "Why ``--network-warmup``").  One second does as well (2026-11-28,
#: the same command with ``--network-warmup 1 --jobs 3``: 4.7-4.8 ms at 8 KiB and 9.6-9.7 at 16 KiB
#: from the first call in every job) and costs each fresh job of the tuner 2 s less than the 3 s
#: used until then.
NETWORK_WARMUP = 1.0
#: Bytes each rank sends each other rank in one round of the network warm-up (the C client's
#: ``NETWORK_BLOCK``): 256 KiB, more than the 64 KiB that a binomial scatter of 16 KiB sends on one
#: connection, so that the windows grow past it.
NETWORK_BLOCK = 262144

__all__ = ["NETWORK_BLOCK", "NETWORK_WARMUP"]
