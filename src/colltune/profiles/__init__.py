"""Profiles: the versioned JSON record of a network's model parameters, and the built-in ones."""

from colltune.profiles.builtin import BUILTINS, builtin
from colltune.profiles.format import (
    FORMAT,
    VERSION,
    Fit,
    Models,
    Profile,
    ProfileError,
    Provenance,
    Series,
    Spread,
    load_profile,
    parse_profile,
    profile_schema,
    read_profile,
    with_overrides,
    write_profile,
)

__all__ = ["BUILTINS", "FORMAT", "VERSION", "Fit", "Models", "Profile", "ProfileError", "Provenance", "Series",
           "Spread", "builtin", "load_profile", "parse_profile", "profile_schema", "read_profile", "with_overrides", "write_profile"]
