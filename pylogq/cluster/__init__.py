"""The cluster layer: a broker and what it hosts, after Kafka's core.

Subpackages, each one concept, listed from the bottom up (each imports only the ones
above it in this list, and the shared base; ``tests/test_layers.py`` checks it):

- the shared base, these modules: :mod:`.contract` (the cross-layer contract: what the
  server and the clients may see of a broker), :mod:`.delayed` (the delayed-operation
  purgatory), :mod:`.names` (topic and group name rules), :mod:`.partitioner` (the
  hashes that place keys and groups), :mod:`.replica_assignment` (checks and the
  default placement of replicas) and :mod:`.broker_link` (one broker's connection to
  another);
- :mod:`.zk`: the metadata store (ZooKeeper's data model, on an ensemble through kazoo
  or in memory), Kafka's znode layout and the operations on it, and the session guard;
- :mod:`.state`: a partition's replica state and the producers' state;
- :mod:`.coordinator.group`: the group coordinator, the ``__consumer_offsets`` formats
  and topic;
- :mod:`.controller`: the controller and its channel to the brokers;
- :mod:`.broker`: the broker node (:class:`pylogq.Broker`), its config, its part in a
  cluster (registration, replica manager and fetchers, metadata cache, topic and
  credential stores), its metrics, the in-process transport and ``pylogq.Cluster``.
"""

__all__: list[str] = []  # the API is the subpackages
