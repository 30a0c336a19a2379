"""Client side of the protocol: consumer group partition assignment."""

__all__: list[str] = []  # the API is the submodules
