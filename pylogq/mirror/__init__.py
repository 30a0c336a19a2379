"""Mirroring between clusters: MirrorMaker 2's model (``pylogq mirror-maker``).

A *flow* ``A->B`` copies the topics of cluster ``A`` that its filters let through to
cluster ``B`` (as ``A.topic`` under the default replication policy), partition for
partition, with keys, values, headers and timestamps, in order. Beside the copies it
writes offset syncs (which source offset became which target offset), checkpoints (the
source's consumer groups' offsets translated to the target, for a consumer to move
there) and heartbeats.

The package sits above the clients: it reaches clusters only through
:mod:`pylogq.client`, and nothing below imports it. Its modules, one concept each:

- :mod:`~pylogq.mirror.config`: the ``connect-mirror-maker.properties`` file, as flows
  (:func:`~pylogq.mirror.config.load_config`), and MirrorMaker 1's flags as one flow
  (:func:`~pylogq.mirror.config.legacy_config`);
- :mod:`~pylogq.mirror.policy`: remote and internal topics' names (replication policies),
  the topic, group and topic config filters, loop prevention;
- :mod:`~pylogq.mirror.records`: the offset sync, checkpoint and heartbeat records,
  byte for byte Kafka's;
- :mod:`~pylogq.mirror.offsets`: when a sync is emitted, the store that translates
  offsets from the syncs, and a group's offsets read from a checkpoints topic.
"""

__all__: list[str] = []  # the API is the submodules
