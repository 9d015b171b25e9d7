"""Test helpers: rebuilding a schedule with mutations."""

from __future__ import annotations

from colltune.schedule import REDUCTION_DTYPES, REDUCTION_OPS, Buf, Kind, Region, Schedule, ScheduleBuilder


def rebuild(s: Schedule, drop_op: int | None = None, forget: int | None = None,
            retag: int | None = None) -> Schedule:
    """Copy ``s`` op by op, optionally dropping one op, removing one op from every
    dependency list (``forget``), or changing the tag of one op (all by global index)."""
    b = ScheduleBuilder(s.procs, s.buffer_sizes[:, Buf.SEND].tolist(), s.buffer_sizes[:, Buf.RECV].tolist())
    for r in range(s.procs):
        b.need_scratch(r, int(s.buffer_sizes[r, Buf.SCRATCH]))
    c = s.columns
    new: dict[int, int] = {}
    for i in range(len(s)):
        if i == drop_op:
            continue
        idx, start = s.deps(i)
        keep = [(int(d), bool(st)) for d, st in zip(idx, start) if int(d) in new and int(d) != forget]
        req = [new[d] for d, st in keep if not st]
        ireq = [new[d] for d, st in keep if st]
        rank, kind = int(c["rank"][i]), int(c["kind"][i])
        region = Region(Buf(int(c["buf"][i])), int(c["offset"][i]), int(c["length"][i]))
        tag = int(c["tag"][i]) + (1 if i == retag else 0)
        if kind == Kind.SEND:
            new[i] = b.send(rank, int(c["peer"][i]), region, tag, req, ireq)
        elif kind == Kind.RECV:
            new[i] = b.recv(rank, int(c["peer"][i]), region, tag, req, ireq)
        elif kind in (Kind.COPY, Kind.REDUCE):
            src = Region(Buf(int(c["src_buf"][i])), int(c["src_offset"][i]), int(c["length"][i]))
            if kind == Kind.COPY:
                new[i] = b.copy(rank, src, region, req, ireq)
            else:
                new[i] = b.reduce(rank, src, region, REDUCTION_OPS[int(c["redop"][i])],
                                  REDUCTION_DTYPES[int(c["dtype"][i])], req, ireq)
        else:
            new[i] = b.delay(rank, float(c["delay"][i]), req, ireq)
    return b.build(s.meta)
