"""Under mpiexec: both executors run COPY, DELAY and REDUCE ops and scratch buffers, not only messages.

1. A hand-built broadcast: each non-root rank receives into SCRATCH, then copies into RECV
   (requiring the receive), after a short DELAY that irequires the receive.  The schedule is
   verified, then run twice by each executor and compared with the root's data.
2. Every reduction operation over every dtype it is defined for, on edge values (extremes of the
   integers, NaN, infinities, signed zeros, complex values, bools): a schedule of local ops only
   copies ``b`` into RECV and reduces ``a`` into it; both executors must give numpy's
   ``ufunc(a, b)`` bit for bit (the compiled one computes in C++), except complex products:
   numpy computes them with fused multiply-adds where the CPU has them, so those may differ in
   the last bit of each part (checked to within 2 ulp of the larger part).
3. Copies of 4 KiB to 256 KiB whose destination lies 0, 16, 64 or 2048 bytes past the source
   modulo 4096 arrive whole on both executors (the compiled one copies some backwards on machines
   where memmove suffers 4K aliasing).
4. A schedule with a wildcard receive (GOAL's ``from -1``) is refused by both executors.
"""

import warnings

import numpy as np
from mpi4py import MPI

from colltune.collectives import _UNDEFINED_OPS
from colltune.errors import ColltuneError
from colltune.runtime import ScheduleExecutor, _exec, compiled
from colltune.runtime.executor import NUMPY_OPS
from colltune.schedule import ANY_SOURCE, REDUCTION_DTYPES, REDUCTION_OPS, Buf, Region, ScheduleBuilder, verify

comm = MPI.COMM_WORLD
P, me = comm.Get_size(), comm.Get_rank()
private = comm.Dup()
assert compiled.ENGINE is not None, compiled.UNAVAILABLE


EXECUTORS = ("python", "compiled")


def runner(executor, schedule, send, recv):
    """(run, release) of this rank's part of ``schedule`` on one executor and these buffers."""
    if executor == "python":
        python = ScheduleExecutor(schedule, private, {Buf.SEND: send, Buf.RECV: recv})
        return python.run, python.free
    program = compiled.program(schedule, me)
    scratch = np.zeros(program.scratch_bytes, dtype=np.uint8)
    bound = compiled.ENGINE.bind(program, private.handle, compiled.address(send), compiled.address(recv),
                                 compiled.address(scratch))
    return bound.run, (lambda: (bound.release(), scratch))


# 1. copies, delays, scratch
n = 1237
b = ScheduleBuilder(P, recv_bytes=n)
for r in range(1, P):
    b.need_scratch(r, n)
    got = b.recv(r, 0, Region(Buf.SCRATCH, 0, n))
    b.delay(r, 1e-4, irequires=[got])
    b.copy(r, Region(Buf.SCRATCH, 0, n), Region(Buf.RECV, 0, n), requires=[got])
    b.send(0, r, Region(Buf.RECV, 0, n))
schedule = b.build({"collective": "bcast", "root": 0, "size": n})
verify(schedule)
message = np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8)
buf = message.copy() if me == 0 else np.zeros(n, dtype=np.uint8)
empty = np.zeros(0, dtype=np.uint8)
for name in EXECUTORS:
    run, release = runner(name, schedule, empty, buf)
    for _ in range(2):
        if me:
            buf[:] = 0
        run()
        assert np.array_equal(buf, message), f"rank {me}: {name}: copy/delay schedule delivered wrong bytes"
    release()


# 2. reductions on edge values
def values(dtype: np.dtype, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, me])
    if dtype.kind == "b":
        return rng.integers(0, 2, count).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        edge = np.array([info.min, info.max, 0, 1, info.max // 2 + 1], dtype=dtype)
        return np.concatenate([edge, rng.integers(info.min, info.max, count - len(edge), dtype=dtype,
                                                  endpoint=True)])
    real = np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype
    edge = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.25, np.finfo(real).tiny / 4], dtype=real)
    pick = rng.permutation(np.concatenate([edge, rng.normal(0, 1e3, count - len(edge)).astype(real)]))
    if dtype.kind == "c":
        return (pick + 1j * rng.permutation(pick)).astype(dtype)
    return pick


cases = 0
with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)  # overflow and NaN in numpy's own reference
    for dtype_name in REDUCTION_DTYPES:
        dtype = np.dtype(dtype_name)
        for op in REDUCTION_OPS:
            if op in _UNDEFINED_OPS.get(dtype.kind, set()):
                continue
            count = 64
            a, bvec = values(dtype, count, 1), values(dtype, count, 2)
            nbytes = a.nbytes
            builder = ScheduleBuilder(P, send_bytes=2 * nbytes, recv_bytes=nbytes)
            for r in range(P):
                copied = builder.copy(r, Region(Buf.SEND, nbytes, nbytes), Region(Buf.RECV, 0, nbytes))
                builder.reduce(r, Region(Buf.SEND, 0, nbytes), Region(Buf.RECV, 0, nbytes), op, dtype_name,
                               requires=[copied])
            local = builder.build({"collective": "test", "op": op, "dtype": dtype_name})
            send = np.concatenate([a.view(np.uint8), bvec.view(np.uint8)])
            want = bvec.copy()
            NUMPY_OPS[op](a, want, out=want)
            for name in EXECUTORS:
                out = np.zeros(count, dtype=dtype)
                run, release = runner(name, local, send, out.view(np.uint8))
                run()
                release()
                if dtype.kind == "c" and op == "prod":
                    ulp = np.spacing(np.maximum(np.abs(want.real), np.abs(want.imag)))
                    close = np.ones(count, dtype=bool)
                    for o, w in ((out.real, want.real), (out.imag, want.imag)):
                        close &= (o == w) | (np.isnan(o) & np.isnan(w)) | (np.abs(o - w) <= 2 * ulp)
                    if not np.all(close):
                        bad = int(np.flatnonzero(~close)[0])
                        raise AssertionError(f"rank {me}: {name}: prod over {dtype_name}: element {bad} is "
                                             f"{out[bad]!r}, numpy gives {want[bad]!r}")
                elif not np.array_equal(out.view(np.uint8), want.view(np.uint8)):
                    bad = int(np.flatnonzero(out.view(np.uint8) != want.view(np.uint8))[0]) // dtype.itemsize
                    raise AssertionError(f"rank {me}: {name}: {op} over {dtype_name}: element {bad} of "
                                         f"{a[bad]!r} op {bvec[bad]!r} is {out[bad]!r}, numpy gives {want[bad]!r}")
                cases += 1

# 3. copies whose destination lies 0, 16, 64 or 2048 bytes past the source modulo 4096 (the
# compiled executor copies some of them backwards where memmove suffers 4K aliasing; whichever
# path this machine takes, every byte must arrive)
aliased = 0
for n in (4096, 65536 + 48, 262144):
    arena = np.zeros(2 * n + 3 * 4096, dtype=np.uint8)
    base = (-compiled.address(arena)) % 4096
    for delta in (0, 16, 64, 2048):
        src = arena[base:base + n]
        src[:] = np.random.default_rng(n + delta).integers(0, 256, n, dtype=np.uint8)
        start = base + n + 4096 - n % 4096 + delta
        dst = arena[start:start + n]
        builder = ScheduleBuilder(P, send_bytes=n, recv_bytes=n)
        for r in range(P):
            builder.copy(r, Region(Buf.SEND, 0, n), Region(Buf.RECV, 0, n))
        for name in EXECUTORS:
            dst[:] = 0
            run, release = runner(name, builder.build({"collective": "test"}), src, dst)
            run()
            release()
            assert np.array_equal(dst, src), f"rank {me}: {name}: a copy of {n} B at page offset {delta} differs"
            aliased += 1

wild = ScheduleBuilder(2, recv_bytes=4)
wild.send(0, 1, Region(Buf.RECV, 0, 4))
wild.recv(1, ANY_SOURCE, Region(Buf.RECV, 0, 4))
for executor in EXECUTORS:
    try:
        runner(executor, wild.build(), np.zeros(0, np.uint8), np.zeros(4, np.uint8))
    except ColltuneError as exc:
        assert "wildcard receives" in str(exc), exc
    else:
        raise AssertionError(f"the {executor} executor accepted a schedule with a wildcard receive")

private.Free()
comm.Barrier()
if me == 0:
    print(f"executor_check: P={P}: copy, delay and scratch ran correctly on both executors; "
          f"{cases // 2} reductions bit for bit as numpy on both; {aliased // 2} copies at page offsets exact on both "
          f"(memmove aliases: {'yes' if _exec.memmove_aliases() else 'no'}); "
          "both refuse wildcard receives")
