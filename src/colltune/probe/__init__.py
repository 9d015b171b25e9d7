"""Measuring a network's model parameters under MPI, and fitting them.

- :mod:`colltune.probe.stats`: medians, quartiles and Tukey's outlier rule;
- :mod:`colltune.probe.fit`: from measured medians to parameter sets, with residuals (no MPI);
- :mod:`colltune.probe.choices`: the check's finalists judged by the algorithms they would
  choose (no MPI);
- :mod:`colltune.probe.measure` and :mod:`colltune.probe.run`: the measurements under mpiexec
  and :func:`colltune.probe.run.probe`, which returns a profile.  They import mpi4py, so they are
  not imported here.
"""

from colltune.probe.fit import (
    Incast,
    deepened,
    eager_threshold,
    epsilon_s,
    epsilon_t,
    fit_cluster_latency,
    fit_duplex,
    fit_duplex_depth,
    fit_duplex_streams,
    fit_hockney,
    fit_incast,
    fit_loggp,
    fit_message_cpu,
    fit_piecewise,
    fit_plogp,
    fit_send_hold,
    fit_tree,
    fit_trunk_duplex,
    loaded_latency,
    with_loaded_latency,
)
from colltune.probe.choices import CHOICE_TIE, FINALISTS, choice_scores, choose_by_choices, disputed, model_choices
from colltune.probe.stats import summarise

__all__ = ["CHOICE_TIE", "FINALISTS", "Incast", "choice_scores", "choose_by_choices", "deepened", "disputed",
           "eager_threshold", "epsilon_s", "epsilon_t", "fit_cluster_latency", "fit_duplex", "fit_duplex_depth",
           "fit_duplex_streams", "fit_hockney", "fit_incast", "fit_loggp", "fit_message_cpu", "fit_piecewise",
           "fit_plogp", "fit_send_hold", "fit_tree", "fit_trunk_duplex", "loaded_latency", "model_choices",
           "summarise", "with_loaded_latency"]
