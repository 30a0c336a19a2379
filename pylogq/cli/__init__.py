"""Command-line tools: ``pylogq`` (and, with the networked broker, ``pylogq-broker``)."""
