"""Shared test settings: hypothesis profiles sized for the 2-core CI machine."""

from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, max_examples=25,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")
