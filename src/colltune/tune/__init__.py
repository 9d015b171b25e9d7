"""Tuning: decision tables built from models, simulation or measurement, and their export.

- :mod:`colltune.tune.table`: the decision table format and its lookup;
- :mod:`colltune.tune.promises`: what a program promises that a library's rules cannot see;
- :mod:`colltune.tune.select`: pricing candidates and bisecting crossovers into a table;
- :mod:`colltune.tune.ties`: how a prediction's near-ties are broken (the lighter network load);
- :mod:`colltune.tune.native`: what ``native`` stands for when it is predicted;
- :mod:`colltune.tune.libraries`: colltune's algorithms in Open MPI's and MPICH's names;
- :mod:`colltune.tune.export`: the table as Open MPI rules and MPICH selection JSON;
- :mod:`colltune.tune.sequence`: the in-order check of a table's choices, timed in the job;
- :mod:`colltune.tune.bench`: what ``colltune bench`` times and its results file;
- :mod:`colltune.tune.measure` (imports MPI, so not re-exported here): timing in the running job;
- :mod:`colltune.tune.timing`, :mod:`colltune.tune.mpit` and :mod:`colltune.tune.spawn` (MPI too):
  the timing loop and the library's own call, its control variables, the fresh jobs.

Every name here is imported on first use (:mod:`colltune.lazy`), so that the jobs of
:mod:`colltune.tune.spawn` import only what they run.
"""

from __future__ import annotations

from colltune.lazy import exports

__getattr__, __all__ = exports(__name__, {
    "colltune.tune.bench": ("BenchError", "BenchResults", "bench_runs", "read_bench", "write_bench"),
    "colltune.tune.native": ("NATIVE_SOURCE", "native_equivalent"),
    "colltune.tune.promises": ("Promises",),
    "colltune.tune.search": ("SEARCH",),
    "colltune.tune.select": ("ModelPricer", "SimPricer", "Tuner", "build_table", "candidates",
                             "grid_sizes"),
    "colltune.tune.sequence": ("check_in_order",),
    "colltune.tune.ties": ("PREDICTED_TIE", "lightest_first", "load", "predicted_choice"),
    "colltune.tune.table": ("NATIVE", "TABLE_ENV", "Block", "Candidate", "DecisionTable", "Rule", "Sample",
                            "TableError", "fixed_table", "parse_table", "read_table", "write_table"),
})
