"""The broker node and what it hosts.

:mod:`.broker` is :class:`pylogq.Broker`, which opens and closes the rest, made of
:mod:`.data_path` (produce, fetch, offsets, the replicas' requests, the groups' offsets),
:mod:`.admin` (topics, configs, credentials) and :mod:`.lifecycle` (the state they share,
cluster membership, identity, hosted partitions, metrics);
:mod:`.config` and :mod:`.dynamic_config` its static and dynamic configs;
:mod:`.cluster_node` its part in a replicated cluster (registration, the controller,
topic administration through the metadata store) with :mod:`.replica_manager`,
:mod:`.replica_fetcher`, :mod:`.metadata_cache`, :mod:`.topic_store` and
:mod:`.user_credentials`; :mod:`.metrics` what a scrape reads; :mod:`.in_process` the
clients' transport to a broker in this process; :mod:`.local_cluster`
``pylogq.Cluster``, replicating brokers in one process.
"""

__all__: list[str] = []  # the API is the submodules
