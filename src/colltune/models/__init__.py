"""Analytic performance models: parameter sets and the cost formulas the papers give.

:mod:`~colltune.models.params` holds the parameter sets; each formula module registers its costs
with :func:`~colltune.models.costs.formula`; :func:`predict` and :func:`predict_all` price an
algorithm, searching the segment size of segmented ones.
"""

# The registry first: its algorithms import paper 000's Table 1 (colltune.models.cluster), whose
# formulas need the registry complete (colltune.models.costs).
import colltune.algorithms  # noqa: F401
from colltune.models import hockney as _hockney  # noqa: F401  (each module registers its formulas)
from colltune.models import latency as _latency  # noqa: F401
from colltune.models import logp as _logp  # noqa: F401
from colltune.models import plogp as _plogp  # noqa: F401
from colltune.models import plogpt as _plogpt  # noqa: F401
from colltune.models.cluster import TABLE1, coordinated_window, gather_bounds, transfer_ratio
from colltune.models.costs import (
    Case,
    Formula,
    Prediction,
    Unavailable,
    best_segment,
    formula,
    formulas,
    get_formula,
    predict,
    predict_all,
)
from colltune.models.latency import arrival_times, broadcast_time
from colltune.models.params import (
    MODELS,
    ClusterLatency,
    ClusterModel,
    Hockney,
    LatencyMatrix,
    Linear,
    LogGP,
    LogP,
    ParamSet,
    Piecewise,
    PLogP,
    PlogPT,
    PLogPTable,
    Postal,
    Tabulated,
    TreeLevels,
)
from colltune.models.plogp import alltoall_bounds, fit_contention_ratio
from colltune.models.plogpt import buffer_filled, flow_bandwidth, rto_count, switch_between

__all__ = [
    "MODELS", "TABLE1", "Case", "ClusterLatency", "ClusterModel", "Formula", "Hockney", "LatencyMatrix", "Linear",
    "LogGP", "LogP", "PLogP", "PLogPTable", "ParamSet", "Piecewise", "PlogPT", "Postal", "Prediction", "Tabulated",
    "TreeLevels", "Unavailable", "alltoall_bounds", "arrival_times", "best_segment", "broadcast_time",
    "buffer_filled", "coordinated_window", "fit_contention_ratio", "flow_bandwidth", "formula", "formulas",
    "gather_bounds", "get_formula", "predict", "predict_all", "rto_count", "switch_between", "transfer_ratio",
]
