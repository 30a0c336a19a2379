"""The log on disk: segments, their offset and time indexes, compaction."""
