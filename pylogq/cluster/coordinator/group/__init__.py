"""The consumer group coordinator: :mod:`.coordinator` runs the group protocol
(membership, rebalances, commits) over the groups :mod:`.metadata_manager` keeps (the
partitions served, loading them and writing to them); :mod:`.group` is one group's and
one member's state; :mod:`.offsets_schema` the ``__consumer_offsets`` record formats and
:mod:`.offsets_topic` the partition of that topic the coordinator stores through."""

__all__: list[str] = []  # the API is the submodules
