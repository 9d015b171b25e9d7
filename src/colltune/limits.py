"""The largest inputs colltune takes, checked where input enters (the command line, the API, every
file reader), so that what exceeds them fails at once with one line instead of exhausting memory
or time.

- :data:`MAX_PROCS`: the largest process count (verify, simulate, predict, tune, GOAL files): the
  simulator's matching keys hold a (receiver, sender) pair of ranks in 32 bits.
- :data:`MAX_OPS`: the most operations a schedule may have: 2^25 holds the direct all-to-all of
  4096 ranks (2 x 4096 x 4095 sends and receives), and takes about 8 GiB to build (about 250 B
  an op at the builder's peak).  A larger schedule (the all-to-all of 65535 ranks has 2^33 ops)
  fails as it grows past it.
- :data:`MAX_BYTES`: the largest size in bytes, MPI's 64-bit count (``MPI_Count``).
- :data:`MAX_TAG`: the largest message tag: a C ``int``, as MPI's (a schedule keeps tags in 32 bits).
- :data:`MAX_TIME` and :data:`MAX_PER_BYTE`: the largest time parameter of a network model (a
  latency, an overhead, a gap: 10^9 s, three decades) and the largest cost per byte (1 s/B, a
  link of 8 bit/s, slower than any modem).  Within them a model's times for messages up to a
  few GiB stay far from overflowing, and a microsecond of latency still shows against the
  time per byte in double precision; past them ties of rounding make the tuner's search for
  crossovers endless.
- :data:`MAX_FILE_BYTES`: the largest file a reader reads (a GOAL file of a million messages is
  about 50 MB).
"""

from __future__ import annotations

MAX_PROCS = (1 << 16) - 1
MAX_OPS = 1 << 25
MAX_BYTES = (1 << 63) - 1
MAX_TAG = (1 << 31) - 1
MAX_FILE_BYTES = 1 << 30
MAX_TIME = 1e9
MAX_PER_BYTE = 1.0

__all__ = ["MAX_BYTES", "MAX_FILE_BYTES", "MAX_OPS", "MAX_PER_BYTE", "MAX_PROCS", "MAX_TAG", "MAX_TIME"]
