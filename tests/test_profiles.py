"""Profiles: built-ins, the file format and its errors, overrides, and `colltune predict`."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from colltune.cli import main, models_markdown
from colltune.files import write_atomic
from colltune.profiles import (
    BUILTINS,
    ProfileError,
    Provenance,
    builtin,
    load_profile,
    profile_schema,
    read_profile,
    with_overrides,
    write_profile,
)

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("name", list(BUILTINS))
def test_builtin_round_trips_through_a_file(name: str, tmp_path: Path) -> None:
    p = builtin(name)
    write_profile(p, tmp_path / "p.json")
    assert read_profile(tmp_path / "p.json") == p
    assert load_profile(f"builtin:{name}") == p
    assert p.provenance.source


def test_provenance_drops_the_nul_open_mpi_leaves_in_its_version() -> None:
    version = "Open MPI v5.0.11, package: Open MPI user@localhost Distribution, ident: 5.0.11\x00"
    assert Provenance(source="probe", mpi_library=version).mpi_library == version[:-1]
    assert Provenance(source="probe").mpi_library is None


def test_transcriptions() -> None:
    """Spot checks against the papers' tables, in seconds, bytes and bytes per second."""
    c = builtin("paper000-cluster").models.cluster
    assert c.gs(1000) == pytest.approx((0.0796 * 1000 + 3.027) * 1e-6)
    assert c.gs(40) == pytest.approx(6.73e-6) and c.Ur(1) == pytest.approx(9.93e-6) and c.BL == 1935
    assert c.latency(1000, 16) == pytest.approx((1.556 * 16 + 16.684 + 0.0826 * 1000 * 16 * 1000 / (90 * 82.627))
                                                * 1e-6)
    t = builtin("paper001-gige").models.plogpt
    assert t.bidirectional.b[4] == pytest.approx(485.0e6 / 8 * 16) and t.bidirectional.d[1] == pytest.approx(451e-6)
    assert t.unidirectional.d[0] == pytest.approx(500e-6) and t.unidirectional.b[0] == pytest.approx(936.4e6 / 8)
    g = builtin("paper004-grid").models.latency
    assert g.latency[6][3] == 1260 and g.latency[3][6] == 1300


def test_schema_doc_is_current() -> None:
    assert json.loads((DOCS / "profile.schema.json").read_text()) == profile_schema()


def test_models_doc_is_current() -> None:
    assert (DOCS / "models.md").read_text() == models_markdown()


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["models"]["cluster"].update(BL=-1), "models.cluster.BL: Input should be greater than or equal to 0"),
    (lambda d: d.update(version=2), "version: 2 is not supported"),
    (lambda d: d.update(default_model="hockney"), "default_model 'hockney' has no parameters"),
    (lambda d: d.update(default_network="ns3"), "default_network 'ns3' is not a network model"),
    (lambda d: d.update(default_network="plogp-bi"), "default_network 'plogp-bi' needs the profile's plogp"),
    (lambda d: d["models"]["cluster"]["gs"].pop("small"), "models.cluster.gs.small: Field required"),
    (lambda d: d["models"]["cluster"].update(colour="red"), "models.cluster.colour: Extra inputs are not permitted"),
])
def test_bad_profile_names_file_and_field(tmp_path: Path, mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(builtin("paper000-cluster").to_json())
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError) as exc:
        read_profile(path)
    assert str(exc.value).startswith(f"{path}: ") and message in str(exc.value)


def test_unreadable_profiles(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("{ not json")
    with pytest.raises(ProfileError, match="x.json: not valid JSON: .* line 1"):
        read_profile(tmp_path / "x.json")
    with pytest.raises(ProfileError, match="missing.json: cannot read"):
        read_profile(tmp_path / "missing.json")
    with pytest.raises(ProfileError, match="valid: builtin:paper000-cluster"):
        load_profile("builtin:nope")


def test_write_is_atomic(tmp_path: Path) -> None:
    target = tmp_path / "p.json"
    target.write_text("old")
    with pytest.raises(AttributeError):
        write_profile("not a profile", target)  # type: ignore[arg-type]
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["p.json"]


def test_written_files_get_ordinary_permissions(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "new.json", "x")
        assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640  # 0666 less the umask
        (tmp_path / "old.json").write_text("y")
        (tmp_path / "old.json").chmod(0o604)
        write_atomic(tmp_path / "old.json", "z")
        assert stat.S_IMODE((tmp_path / "old.json").stat().st_mode) == 0o604  # kept
    finally:
        os.umask(old)


def test_overrides() -> None:
    h = with_overrides(None, "hockney", {"alpha": "50e-6", "beta": "8e-9"})
    assert (h.alpha, h.beta, h.gamma) == (50e-6, 8e-9, None)
    p = with_overrides(builtin("ethernet-10g-tcp").models.plogp, "plogp", {"unidirectional.g": "1e-5"})
    assert p.unidirectional.g(123456) == 1e-5 and p.unidirectional.or_ is not None
    with pytest.raises(ProfileError, match="hockney parameters: beta: Field required"):
        with_overrides(None, "hockney", {"alpha": "1"})
    with pytest.raises(ProfileError, match="no parameter 'alfa'; valid: alpha, beta, gamma"):
        with_overrides(None, "hockney", {"alfa": "1"})
    with pytest.raises(ProfileError, match="alpha: Input should be greater than or equal to 0"):
        with_overrides(None, "hockney", {"alpha": "-1", "beta": "0"})


def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.output


def test_cli_predict() -> None:
    code, out = _run("predict", "--model", "hockney", "--set", "alpha=50e-6", "--set", "beta=8e-9", "-c", "bcast",
                     "-a", "binomial", "-p", "8", "-s", "64KiB", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["predictions"][0]["time"] == pytest.approx(3 * (50e-6 + 8e-9 * 65536))
    code, out = _run("predict", "--profile", "builtin:paper004-grid", "-c", "bcast", "-a", "all", "-p", "8", "-s",
                     "2", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["time_unit"] == "abstract" and doc["predictions"][0]["algorithm"] == "flat_tree"
    assert doc["predictions"][0]["time"] == 800 and "symmetric_async" in doc["unavailable"]
    code, out = _run("predict", "--profile", "builtin:ethernet-10g-tcp", "-c", "bcast", "-a", "all", "-p", "16",
                     "-s", "1MiB")
    assert code == 0 and "segment_size=" in out and "unavailable" in out


@pytest.mark.parametrize("args, message", [
    (("-c", "bcast", "-a", "flat", "-p", "4", "-s", "1"), "give --profile, or --model"),
    (("--model", "hockney", "--set", "alpha=1", "-c", "bcast", "-a", "flat", "-p", "4", "-s", "1"),
     "beta: Field required"),
    (("--profile", "builtin:paper004-grid", "--model", "plogp", "-c", "bcast", "-a", "flat", "-p", "8", "-s", "1"),
     "has no plogp parameters"),
    (("--profile", "builtin:paper004-grid", "-c", "bcast", "-a", "flat", "-p", "8", "-s", "1x"), "size '1x'"),
    (("--profile", "builtin:paper004-grid", "-c", "bcast", "-a", "flat", "-p", "8", "-s", "1", "-r", "8"),
     "--root 8"),
])
def test_cli_predict_errors(args: tuple[str, ...], message: str) -> None:
    code, out = _run("predict", *args)
    assert code == 2 and message in out


def test_cli_predict_unavailable_exits_1() -> None:
    code, out = _run("predict", "--profile", "builtin:paper004-grid", "-c", "bcast", "-a", "symmetric", "-p", "8",
                     "-s", "1")
    assert code == 1 and "no latency formula for bcast/symmetric_async" in out


def test_cli_profiles() -> None:
    code, out = _run("profiles", "--json")
    assert code == 0 and [r["name"] for r in json.loads(out)] == [f"builtin:{n}" for n in BUILTINS]
    code, out = _run("profiles", "--show", "builtin:paper001-example")
    assert code == 0 and json.loads(out)["time_unit"] == "abstract"
