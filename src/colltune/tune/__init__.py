"""Tuning: decision tables built from models, simulation or measurement, and their export.

- :mod:`colltune.tune.table`: the decision table format and its lookup;
- :mod:`colltune.tune.promises`: what a program promises that a library's rules cannot see;
- :mod:`colltune.tune.select`: pricing candidates and bisecting crossovers into a table;
- :mod:`colltune.tune.native`: what ``native`` stands for when it is predicted;
- :mod:`colltune.tune.libraries`: colltune's algorithms in Open MPI's and MPICH's names;
- :mod:`colltune.tune.export`: the table as Open MPI rules and MPICH selection JSON;
- :mod:`colltune.tune.sequence`: the in-order check of a table's choices, timed in the job;
- :mod:`colltune.tune.bench`: what ``colltune bench`` times and its results file;
- :mod:`colltune.tune.measure` (imports MPI, so not re-exported here): timing in the running job.
"""

from colltune.tune.bench import BenchError, BenchResults, bench_runs, read_bench, write_bench
from colltune.tune.native import NATIVE_SOURCE, native_equivalent
from colltune.tune.promises import Promises
from colltune.tune.select import SEARCH, ModelPricer, SimPricer, Tuner, build_table, candidates, grid_sizes
from colltune.tune.sequence import check_in_order
from colltune.tune.table import (
    NATIVE,
    TABLE_ENV,
    Block,
    Candidate,
    DecisionTable,
    Rule,
    Sample,
    TableError,
    fixed_table,
    parse_table,
    read_table,
    write_table,
)

__all__ = [
    "NATIVE", "NATIVE_SOURCE", "SEARCH", "TABLE_ENV", "BenchError", "BenchResults", "Block", "Candidate", "DecisionTable",
    "ModelPricer", "Promises", "Rule", "Sample", "SimPricer", "TableError", "Tuner", "bench_runs", "build_table", "candidates",
    "check_in_order",
    "fixed_table",
    "grid_sizes", "native_equivalent", "parse_table", "read_bench", "read_table", "write_bench", "write_table",
]
