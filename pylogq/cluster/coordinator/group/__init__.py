"""The consumer group coordinator: :mod:`.coordinator` runs the group protocol (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup) over the groups :mod:`.metadata_manager` keeps (the
partitions served, loading them and writing to them); :mod:`.rebalance` makes the groups'
transitions and expires their deadlines, :mod:`.offsets` commits, fetches and deletes
their offsets and :mod:`.admin` lists, describes and deletes them; :mod:`.group` is one
group's and one member's state; :mod:`.offsets_schema` the ``__consumer_offsets`` record
formats and :mod:`.offsets_topic` the partition of that topic the coordinator stores through."""

__all__: list[str] = []  # the API is the submodules
