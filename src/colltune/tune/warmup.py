"""The network warm-up: how long and with which blocks a timing job first exchanges traffic
between every pair of ranks, the same in the tuning job, its fresh jobs
(:func:`colltune.tune.timing.warm_network`) and the C client of ``bench --library``
(:mod:`colltune.tune.library_bench`).  No imports: the command line reads these without MPI.
"""

#: Seconds every run of the client on a network (``colltune bench --testbed``) first exchanges blocks
#: between every pair of ranks, one peer at a time, before it times anything (``bench
#: --network-warmup``; the tuner warms its job and its fresh jobs the same way).  A fresh job's TCP
#: connections leave slow start early (cubic's HyStart sees the queue build at the port and stops
#: at a small congestion window), and cubic then grows the window with the connection's time in
#: flight, over seconds; until it holds the largest message an algorithm sends on a connection,
#: each call waits for acknowledgements.  The pairwise exchange of 256 KiB blocks loses no packet
#: at the switch ports, unlike every rank sending to all at once, and a second of it suffices.
NETWORK_WARMUP = 1.0
#: Bytes each rank sends each other rank in one round of the network warm-up (the C client's
#: ``NETWORK_BLOCK``): 256 KiB, more than the 64 KiB that a binomial scatter of 16 KiB sends on one
#: connection, so that the windows grow past it.
NETWORK_BLOCK = 262144

__all__ = ["NETWORK_BLOCK", "NETWORK_WARMUP"]
