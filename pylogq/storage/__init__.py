"""The log on disk: segments, their offset and time indexes, compaction."""

__all__: list[str] = []  # the API is the submodules
