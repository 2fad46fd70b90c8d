"""The monitor's fixtures (registries on 127.0.0.1, monitors with quick fetching), for witnesses."""

from ..monitor.conftest import make_monitor, registry, second_registry, trusted

__all__ = ["make_monitor", "registry", "second_registry", "trusted"]
