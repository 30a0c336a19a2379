"""The controller (:mod:`.controller`): elections, ISR changes, topic creation and
deletion and controlled shutdown, driven by the metadata store's watches, deciding on
its view of the cluster (:mod:`.context`) through the partition and replica state
machines (:mod:`.partition_state_machine`, :mod:`.replica_state_machine`), and its
channel of requests to the brokers (:mod:`.request_batch`, :mod:`.channel`)."""

__all__: list[str] = []  # the API is the submodules
