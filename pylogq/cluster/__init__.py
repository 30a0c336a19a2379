"""The cluster layer: topics, partitions, producer state, partitioning and consumer groups."""
