"""The cluster layer: topics, partitions, producer state, partitioning and consumer groups."""

__all__: list[str] = []  # the API is the submodules
