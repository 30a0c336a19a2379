"""Where a new topic's replicas go: Kafka's replica assignment (AdminUtils.assignReplicasToBrokers).

Two goals, as the seeds describe them: spread the replicas evenly over the brokers,
and put each partition's replicas on different brokers (and racks, when brokers have
``broker.rack``). The first replica of each partition, its preferred leader, goes
round-robin over the brokers from a random start; the others follow it with a shift
that grows every time the partitions wrap around the broker list, so the followers
of one broker's leaders do not all sit on the same next broker. With racks, the
brokers are first listed alternating between racks, and a replica skips a broker
whose rack already has one of the partition's replicas while some rack has none.
"""

from __future__ import annotations

import random
from typing import Dict, List, Mapping, Optional

from ..errors import InvalidReplicationFactorError

__all__ = ["assign_replicas", "rack_alternated"]


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated(racks: Mapping[int, str]) -> List[int]:
    """Broker ids taking one broker from each rack in turn (racks and ids sorted)."""
    by_rack: Dict[str, List[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    order = sorted(by_rack)
    queues = {rack: sorted(brokers) for rack, brokers in by_rack.items()}
    out: List[int] = []
    i = 0
    while len(out) < len(racks):
        queue = queues[order[i]]
        if queue:
            out.append(queue.pop(0))
        i = (i + 1) % len(order)
    return out


def assign_replicas(partitions: int, replication_factor: int, brokers: Mapping[int, Optional[str]],
                    start_partition: int = 0, fixed_start: int = -1,
                    rng: Optional[random.Random] = None) -> Dict[int, List[int]]:
    """Replica lists for ``partitions`` partitions numbered from ``start_partition``.

    ``brokers`` maps each live broker id to its rack (None: no rack). Racks are used
    when every broker has one; when only some have, InvalidReplicationFactorError
    names the problem, as Kafka refuses that case. ``fixed_start`` pins the random
    start (tests, and adding partitions so they continue the existing pattern).
    """
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("replication factor must be larger than 0, got %d" % replication_factor)
    if partitions <= 0:
        raise InvalidReplicationFactorError("number of partitions must be larger than 0, got %d" % partitions)
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            "replication factor: %d larger than available brokers: %d" % (replication_factor, len(brokers)))
    rng = rng or random.Random()
    with_rack = [b for b, r in brokers.items() if r is not None]
    if with_rack and len(with_rack) != len(brokers):
        raise InvalidReplicationFactorError(
            "not all brokers have rack information for replica rack aware assignment (brokers without: %s)"
            % sorted(b for b, r in brokers.items() if r is None))
    racks: Dict[int, str] = {b: r for b, r in brokers.items() if r is not None}
    order = rack_alternated(racks) if with_rack else sorted(brokers)
    n = len(order)
    num_racks = len(set(racks.values())) if with_rack else 0
    start = fixed_start if fixed_start >= 0 else rng.randrange(n)
    shift = fixed_start if fixed_start >= 0 else rng.randrange(n)
    out: Dict[int, List[int]] = {}
    partition = max(0, start_partition)
    for _ in range(partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [order[first]]
        if not with_rack:
            replicas += [order[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)]
        else:
            used_racks = {racks[order[first]]}
            used = {order[first]}
            k = 0
            for _j in range(replication_factor - 1):
                while True:
                    broker = order[_replica_index(first, shift * num_racks, k, n)]
                    k += 1
                    rack = racks[broker]
                    if (rack not in used_racks or len(used_racks) == num_racks) and \
                            (broker not in used or len(used) == n):
                        replicas.append(broker)
                        used_racks.add(rack)
                        used.add(broker)
                        break
        out[partition] = replicas
        partition += 1
    return out
