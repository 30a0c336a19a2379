"""The metadata store and Kafka's layout in it.

:mod:`.store` is ZooKeeper's data model, the one interface the controller and the
brokers use; :mod:`.kazoo_store` implements it on a ZooKeeper ensemble and
:mod:`.memory_store` in one process. :mod:`.data` is Kafka's znode layout and JSON,
:mod:`.client` every read and write of cluster metadata on a store (Kafka's
KafkaZkClient), and :mod:`.session_guard` whether this broker's session still vouches
for the leaderships it holds.
"""

__all__: list[str] = []  # the API is the submodules
