"""Command-line tools: ``pylogq`` (and, with the networked broker, ``pylogq-broker``)."""

__all__: list[str] = []  # the API is the submodules
