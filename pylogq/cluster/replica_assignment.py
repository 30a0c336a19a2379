"""Where a new topic's replicas go: Kafka's replica assignment (AdminUtils.assignReplicasToBrokers).

Two goals, as the seeds describe them: spread the replicas evenly over the brokers,
and put each partition's replicas on different brokers (and racks, when brokers have
``broker.rack``). The first replica of each partition, its preferred leader, goes
round-robin over the brokers from a random start; the others follow it with a shift
that grows every time the partitions wrap around the broker list, so the followers
of one broker's leaders do not all sit on the same next broker. With racks, the
brokers are first listed alternating between racks, and a replica skips a broker
whose rack already has one of the partition's replicas while some rack has none.

An explicit assignment (CreateTopics' or CreatePartitions' ``assignments``) is placed
as given once it passes Kafka's checks (AdminZkClient.validateTopicCreate and
validateReplicaAssignment, ZkAdminManager.createPartitions), with Kafka's messages:
every partition has the same number of replicas, none names a broker twice, the
partitions of a new topic are numbered 0, 1, 2, ... and every broker named is
registered (live). Kafka's ZooKeeper-mode CreateTopics leaves that last check out
and its KRaft controller makes it; it is made here so that a topic is never
created with a partition that no broker can lead.
"""

from __future__ import annotations

import random
from typing import AbstractSet, Dict, List, Mapping, Optional, Sequence

from ..errors import InvalidReplicationAssignmentError, InvalidReplicationFactorError

__all__ = ["assign_replicas", "check_added_assignment", "check_new_assignment", "rack_alternated"]


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


def _unknown_brokers(replica_lists: Sequence[Sequence[int]], live: AbstractSet[int]) -> None:
    unknown = sorted({b for replicas in replica_lists for b in replicas} - set(live))
    if unknown:
        raise InvalidReplicationAssignmentError(
            "Unknown broker(s) in replica assignment: %s." % ", ".join(map(str, unknown)))


def check_new_assignment(assignment: Mapping[int, Sequence[int]], live: AbstractSet[int]) -> Dict[int, List[int]]:
    """A new topic's explicit assignment (partition -> broker ids), checked; -> a copy to place.

    ``live`` holds the ids of the registered brokers.
    """
    if not assignment:
        raise InvalidReplicationAssignmentError("the replica assignment names no partition")
    out = {int(p): [int(b) for b in replicas] for p, replicas in assignment.items()}
    if len({len(replicas) for replicas in out.values()}) != 1:
        raise InvalidReplicationAssignmentError("All partitions should have the same number of replicas")
    for p, replicas in sorted(out.items()):
        if not replicas:
            raise InvalidReplicationAssignmentError("Cannot have replication factor of 0 for partition id %d." % p)
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicationAssignmentError(
                "Duplicate replica assignment found: %s" % {q: out[q] for q in sorted(out)})
    if sorted(out) != list(range(len(out))):
        raise InvalidReplicationAssignmentError("partitions should be a consecutive 0-based integer sequence")
    _unknown_brokers(list(out.values()), live)
    return out


def check_added_assignment(existing: Mapping[int, Sequence[int]], total: int, added: Sequence[Sequence[int]],
                           live: AbstractSet[int]) -> Dict[int, List[int]]:
    """CreatePartitions' assignment of the partitions added to a topic, checked; -> the new
    partitions (numbered on from the existing ones) and their replicas.

    The checks and their order are Kafka's: unknown brokers, the number of lists, then
    each list (not empty, no broker twice) and the replication factor of partition 0.
    """
    lists = [[int(b) for b in replicas] for replicas in added]
    _unknown_brokers(lists, live)
    increment = total - len(existing)
    if len(lists) != increment:
        raise InvalidReplicationAssignmentError(
            "Increasing the number of partitions by %d but %d assignments provided." % (increment, len(lists)))
    out = {len(existing) + i: replicas for i, replicas in enumerate(lists)}
    for p, replicas in out.items():
        if not replicas:
            raise InvalidReplicationAssignmentError("Cannot have replication factor of 0 for partition id %d." % p)
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicationAssignmentError(
                "Duplicate brokers not allowed in replica assignment: %s for partition id %d."
                % (", ".join(map(str, replicas)), p))
    factor = len(existing[0]) if 0 in existing else len(next(iter(out.values())))
    bad = [(p, len(replicas)) for p, replicas in sorted(out.items()) if len(replicas) != factor]
    if bad:
        raise InvalidReplicationAssignmentError(
            "Inconsistent replication factor between partitions, partition 0 has %d while partitions [%s] have "
            "replication factors [%s], respectively." % (factor, ", ".join(str(p) for p, _ in bad),
                                                        ", ".join(str(n) for _, n in bad)))
    return out
