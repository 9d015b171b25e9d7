"""What a program promises about its collective calls that an MPI library's rules file cannot see.

A rules file chooses an algorithm from the communicator size and a message size alone.  Two things
it cannot see decide whether an Open MPI rule is safe:

* whether a reduction's operation is commutative: Open MPI's pipeline, binomial and ring reductions
  combine out of rank order (:data:`colltune.tune.libraries.OPENMPI_ANY_OPERATION`);
* a scatter's send count and type, which MPI reads only at the root, while Open MPI 5's
  ``coll_tuned_decision_dynamic.c`` sizes the call on every rank from that rank's own send count
  and type: a rank that passes 0 there looks up another rule than the root, and ranks that run
  different algorithms hang (:data:`colltune.tune.libraries.OPENMPI_ROOT_SIZED`).

``colltune tune`` takes one flag per promise (:func:`flag`, generated from the fields of
:class:`Promises`); the decision table keeps them (:attr:`colltune.tune.table.DecisionTable.promises`),
and the export and the tuner of Open MPI's own algorithms honour them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Promises(BaseModel):
    """The program's promises, each False (not promised) unless the user says so."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    commutative: bool = Field(
        False, description="Every reduction of the program uses a commutative operation (MPI's predefined ones are): "
                           "an Open MPI rules file may then name reductions that combine out of rank order (pipeline, "
                           "binomial, ring), which it cannot tell from a non-commutative operation.")
    uniform_scatter: bool = Field(
        False, description="Every rank of the program passes MPI_Scatter the root's send count and type (MPI reads "
                           "them only at the root): an Open MPI rules file may then name scatter algorithms, which Open "
                           "MPI looks up from each rank's own send count.")

    def flags(self) -> tuple[str, ...]:
        """The ``colltune tune`` options that make these promises, e.g. ``("--commutative",)``."""
        return tuple(flag(name) for name in type(self).model_fields if getattr(self, name))


def flag(field: str) -> str:
    """The ``colltune tune`` option of promise ``field``: ``--`` and the name with dashes."""
    return "--" + field.replace("_", "-")


__all__ = ["Promises", "flag"]
