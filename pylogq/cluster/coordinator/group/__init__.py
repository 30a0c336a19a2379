"""The group coordinator (:mod:`.coordinator`): membership, rebalances and committed
offsets, stored in ``__consumer_offsets`` in Kafka's formats (:mod:`.offsets_schema`)
through a partition of that topic (:mod:`.offsets_topic`)."""

__all__: list[str] = []  # the API is the submodules
