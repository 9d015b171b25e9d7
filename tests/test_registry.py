"""The registry: lookups, aliases, parameter validation, and the generated docs."""

from pathlib import Path

import pytest

from colltune.algorithms import REGISTRY, Param, Registry
from colltune.cli import algorithms_markdown
from colltune.errors import ParameterError, UnknownAlgorithmError


def test_unknown_algorithm_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownAlgorithmError) as e:
        REGISTRY.get("bcast", "fastest")
    message = str(e.value)
    assert "unknown bcast algorithm 'fastest'" in message
    for name in REGISTRY.names("bcast"):
        assert name in message


def test_unknown_collective() -> None:
    with pytest.raises(ParameterError, match="unknown collective 'bcst'; known: bcast"):
        REGISTRY.get("bcst", "chain")


def test_aliases_resolve() -> None:
    assert REGISTRY.get("bcast", "binomial").name == "binomial_tree"
    assert REGISTRY.get("bcast", "linear").name == "flat_tree"
    assert REGISTRY.get("bcast", "pipeline").name == "chain_segmented"


def test_every_algorithm_documents_its_rounds_and_source() -> None:
    for alg in REGISTRY:
        assert alg.doc and alg.summary and alg.source
        assert "\n\n" in alg.doc, f"{alg.name}: docstring needs a paragraph on its rounds or cost"


def test_parameters_are_typed_and_checked() -> None:
    alg = REGISTRY.get("bcast", "chain_segmented")
    assert alg.validate_params({}) == {"segment_size": 8192}
    assert alg.validate_params({"segment_size": "4096"}) == {"segment_size": 4096}
    with pytest.raises(ParameterError, match="chain_segmented: parameter segment_size=0"):
        alg.validate_params({"segment_size": 0})
    with pytest.raises(ParameterError, match="parameter segment_size=big"):
        alg.validate_params({"segment_size": "big"})
    with pytest.raises(ParameterError, match="unknown parameter 'segsize'; valid parameters: segment_size"):
        alg.validate_params({"segsize": 10})


def test_bad_problem_is_a_parameter_error() -> None:
    alg = REGISTRY.get("bcast", "chain")
    with pytest.raises(ParameterError, match="root must be a rank in 0..3, got 4"):
        alg.schedule(4, 4, 10)
    with pytest.raises(ParameterError, match="size must be a whole number of bytes >= 0, got -1"):
        alg.schedule(4, 0, -1)
    with pytest.raises(ParameterError, match="procs must be an integer >= 1, got 0"):
        alg.schedule(0, 0, 10)


def test_registration_rules() -> None:
    reg = Registry()

    @reg.register("bcast", "demo", source="test", params=(Param("k", int, 2, "a knob", minimum=1),),
                  aliases=("d",))
    def demo(b, problem, k):
        """Demo.

        Nothing at all."""

    assert reg.get("bcast", "d").params[0].name == "k"
    with pytest.raises(ValueError, match="registered twice"):
        reg.register("bcast", "other", source="test", aliases=("demo",))(demo)
    with pytest.raises(ValueError, match="no docstring"):
        reg.register("bcast", "nodoc", source="test")(lambda b, problem: None)


def test_docs_table_is_generated_from_the_registry() -> None:
    docs = Path(__file__).parent.parent / "docs" / "algorithms.md"
    assert docs.read_text() == algorithms_markdown(REGISTRY.select()), (
        "docs/algorithms.md is stale: run `colltune algorithms --markdown > docs/algorithms.md`")
