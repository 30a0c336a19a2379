"""The seam between the clients and a broker: one interface, in-process or over TCP.

``Producer``, ``Consumer`` and ``AdminClient`` talk to a broker only through a
:class:`Transport`. :class:`InProcessTransport` calls a :class:`pylogq.Broker`
in this process directly (no sockets, no encoding);
:class:`~pylogq.client.tcp.TcpTransport`, which speaks the Kafka protocol to
``pylogq-broker`` or any Kafka broker, implements the same methods. Results
and errors are the broker's: per-partition error codes where the Kafka protocol
has them, exceptions from pylogq.errors otherwise.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..errors import ConfigError

TopicPartition = Tuple[str, int]


class Transport:
    """What a client needs from a broker (Kafka's APIs, by name)."""

    # metadata
    def partitions_for(self, topic: str, create: bool = False) -> Optional[int]:
        raise NotImplementedError

    def list_topics(self) -> List[str]:
        raise NotImplementedError

    # produce / consume
    def init_producer_id(self) -> Tuple[int, int]:
        raise NotImplementedError

    def produce(self, topic: str, partition: int, records: Any, acks: int) -> Any:
        raise NotImplementedError

    def fetch(self, requests: Sequence[Tuple[str, int, int, int]], max_wait_ms: int, min_bytes: int,
              max_bytes: int, isolation_level: str) -> Dict[TopicPartition, Any]:
        raise NotImplementedError

    def list_offsets(self, topic: str, partition: int, timestamp: int) -> Tuple[int, int]:
        raise NotImplementedError

    # groups
    def join_group(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def sync_group(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def heartbeat(self, group_id: str, generation_id: int, member_id: str) -> int:
        raise NotImplementedError

    def leave_group(self, group_id: str, member_id: str) -> int:
        raise NotImplementedError

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       offsets: Mapping[TopicPartition, Tuple[int, Optional[str]]]) -> Dict[TopicPartition, int]:
        raise NotImplementedError

    def fetch_offsets(self, group_id: str, partitions: Optional[Iterable[TopicPartition]] = None
                      ) -> Dict[TopicPartition, Tuple[int, Optional[str], int]]:
        raise NotImplementedError

    def list_groups(self) -> List[Tuple[str, str]]:
        raise NotImplementedError

    def describe_group(self, group_id: str) -> Any:
        raise NotImplementedError

    def delete_groups(self, group_ids: Sequence[str]) -> Dict[str, int]:
        raise NotImplementedError

    # admin
    def create_topic(self, name: str, partitions: Optional[int], replication_factor: Optional[int],
                     config: Optional[Mapping[str, Any]]) -> Any:
        raise NotImplementedError

    def delete_topic(self, name: str) -> None:
        raise NotImplementedError

    def create_partitions(self, name: str, total: int) -> Any:
        raise NotImplementedError

    def describe_topic(self, name: str) -> Any:
        raise NotImplementedError

    def describe_configs(self, topic: str) -> Dict[str, Tuple[Optional[str], bool]]:
        raise NotImplementedError

    def alter_configs(self, topic: str, config: Mapping[str, Any], incremental: bool) -> None:
        raise NotImplementedError

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        raise NotImplementedError

    def close(self) -> None:
        """Release the transport's resources (the broker itself stays up)."""


class InProcessTransport(Transport):
    """Calls a :class:`pylogq.Broker` in this process. Thread-safe (the broker is)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.coordinator = broker.group_coordinator

    def partitions_for(self, topic: str, create: bool = False) -> Optional[int]:
        from ..errors import UnknownTopicOrPartitionError

        try:
            return self.broker.partitions_for(topic)
        except UnknownTopicOrPartitionError:
            if not create or not self.broker.config["auto.create.topics.enable"]:
                return None
            try:
                self.broker.create_topic(topic)
            except Exception:  # raced with another creator: it exists now
                pass
            return self.broker.partitions_for(topic)

    def list_topics(self) -> List[str]:
        return self.broker.list_topics()

    def init_producer_id(self) -> Tuple[int, int]:
        return self.broker.init_producer_id()

    def produce(self, topic: str, partition: int, records: Any, acks: int) -> Any:
        return self.broker.produce(topic, partition, records, acks)

    def fetch(self, requests: Sequence[Tuple[str, int, int, int]], max_wait_ms: int, min_bytes: int,
              max_bytes: int, isolation_level: str) -> Dict[TopicPartition, Any]:
        return self.broker.fetch(requests, max_wait_ms, min_bytes, max_bytes, isolation_level)

    def list_offsets(self, topic: str, partition: int, timestamp: int) -> Tuple[int, int]:
        return self.broker.list_offsets(topic, partition, timestamp)

    def join_group(self, *args: Any, **kwargs: Any) -> Any:
        return self.coordinator.join_group(*args, **kwargs)

    def sync_group(self, *args: Any, **kwargs: Any) -> Any:
        return self.coordinator.sync_group(*args, **kwargs)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str) -> int:
        return self.coordinator.heartbeat(group_id, generation_id, member_id)

    def leave_group(self, group_id: str, member_id: str) -> int:
        return self.coordinator.leave_group(group_id, member_id)

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       offsets: Mapping[TopicPartition, Tuple[int, Optional[str]]]) -> Dict[TopicPartition, int]:
        return self.coordinator.commit_offsets(group_id, generation_id, member_id, dict(offsets))

    def fetch_offsets(self, group_id: str, partitions: Optional[Iterable[TopicPartition]] = None
                      ) -> Dict[TopicPartition, Tuple[int, Optional[str], int]]:
        return self.coordinator.fetch_offsets(group_id, None if partitions is None else list(partitions))

    def list_groups(self) -> List[Tuple[str, str]]:
        return self.coordinator.list_groups()

    def describe_group(self, group_id: str) -> Any:
        return self.coordinator.describe_group(group_id)

    def delete_groups(self, group_ids: Sequence[str]) -> Dict[str, int]:
        return self.coordinator.delete_groups(list(group_ids))

    def create_topic(self, name: str, partitions: Optional[int], replication_factor: Optional[int],
                     config: Optional[Mapping[str, Any]]) -> Any:
        return self.broker.create_topic(name, partitions, replication_factor, config)

    def delete_topic(self, name: str) -> None:
        self.broker.delete_topic(name)

    def create_partitions(self, name: str, total: int) -> Any:
        return self.broker.create_partitions(name, total)

    def describe_topic(self, name: str) -> Any:
        return self.broker.describe_topic(name)

    def describe_configs(self, topic: str) -> Dict[str, Tuple[Optional[str], bool]]:
        return self.broker.describe_configs(topic)

    def alter_configs(self, topic: str, config: Mapping[str, Any], incremental: bool) -> None:
        self.broker.alter_configs(topic, config, incremental)

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        return self.broker.delete_records(topic, partition, offset)


#: The keyword arguments of the clients that configure a TCP transport, with their defaults.
TCP_OPTIONS: Dict[str, Any] = {
    "client_id": "pylogq",
    "request_timeout_ms": 30000,
    "security_protocol": "PLAINTEXT",
    "sasl_mechanism": None,
    "sasl_plain_username": None,
    "sasl_plain_password": None,
}


def connect(broker: Any = None, bootstrap_servers: Any = None, **options: Any) -> Transport:
    """The transport for a client's ``broker=`` or ``bootstrap_servers=`` argument.

    ``options`` (the keys of :data:`TCP_OPTIONS`) configure the TCP transport;
    an in-process broker needs none and ignores them.
    """
    if (broker is None) == (bootstrap_servers is None):
        raise ConfigError("give exactly one of broker= (a pylogq.Broker in this process) or bootstrap_servers=")
    unknown = sorted(set(options) - set(TCP_OPTIONS))
    if unknown:
        raise ConfigError("unknown transport option%s: %s" % ("s" if len(unknown) > 1 else "", ", ".join(unknown)))
    if broker is not None:
        if isinstance(broker, Transport):
            return broker
        return InProcessTransport(broker)
    from .tcp import TcpTransport

    return TcpTransport(bootstrap_servers, **{**TCP_OPTIONS, **{k: v for k, v in options.items() if v is not None}})
