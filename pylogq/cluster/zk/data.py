"""Kafka's ZooKeeper layout: the znodes a cluster keeps its metadata in, and their JSON.

The paths and formats are Kafka's (``kafka.zk.ZkData``), so an operator who knows a
Kafka cluster's ZooKeeper recognises a pylogq cluster's::

    /cluster/id                                   {"version":"1","id":"<cluster id>"}
    /controller                     (ephemeral)   {"version":2,"brokerid":1,"timestamp":"<ms>",
                                                   "kraftControllerEpoch":-1}
    /controller_epoch                             1
    /brokers/ids/<id>               (ephemeral)   {"version":5,"host":..,"port":..,"endpoints":
                                                   ["PLAINTEXT://host:port"],"rack":..,
                                                   "listener_security_protocol_map":{..},
                                                   "jmx_port":-1,"timestamp":"<ms>","features":{}}
    /brokers/topics/<topic>                       {"version":3,"partitions":{"0":[1,2,3]},
                                                   "adding_replicas":{},"removing_replicas":{},
                                                   "topic_id":"<base64url uuid>"}
    /brokers/topics/<topic>/partitions/<p>/state  {"version":1,"leader":1,"leader_epoch":0,
                                                   "controller_epoch":1,"isr":[1,2,3]}
    /config/topics/<topic>                        {"version":1,"config":{"retention.ms":"1000"}}
    /config/brokers/<id> and /config/brokers/<default>
                                                  {"version":1,"config":{"log.retention.ms":"1000"}}
    /config/changes/config_change_<seq>           {"version":2,"entity_path":"topics/<topic>"}
                                                  (or "brokers/<id>", "brokers/<default>")
    /admin/delete_topics/<topic>                  (empty: the topic is being deleted)
    /admin/reassign_partitions                    {"version":1,"partitions":[{"topic":..,"partition":..,
                                                   "replicas":[..]}]} (a tool's reassignments)
    /admin/preferred_replica_election             {"version":1,"partitions":[{"topic":..,"partition":..}]}
    /isr_change_notification/isr_change_<seq>     {"version":1,"partitions":[{"topic":..,"partition":..}]}
    /log_dir_event_notification/log_dir_event_<seq>
                                                  {"version":1,"broker":1,"event":1} (a log dir failed)
    /latest_producer_id_block                     {"version":1,"broker":1,"block_start":"0",
                                                   "block_end":"999"}

A partition state's znode version is its *partition epoch*: every change of leader or
ISR is a conditional write on it, so two writers (the controller and a leader
shrinking its ISR) never overwrite each other.
"""

from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ...errors import CorruptMetadataError
from ..contract import BrokerEndpoint, BrokerRegistration

__all__ = [
    "ADMIN_PATH",
    "BROKER_IDS_PATH",
    "BrokerEndpoint",
    "BrokerRegistration",
    "CLUSTER_ID_PATH",
    "BROKER_CONFIG_PATH",
    "CONFIG_CHANGES_PATH",
    "DEFAULT_BROKER_ENTITY",
    "broker_config_path",
    "decode_broker_config",
    "CONFIG_CHANGE_PREFIX",
    "CONTROLLER_EPOCH_PATH",
    "CONTROLLER_PATH",
    "DELETE_TOPICS_PATH",
    "PREFERRED_ELECTION_PATH",
    "REASSIGN_PARTITIONS_PATH",
    "ISR_CHANGE_PATH",
    "ISR_CHANGE_PREFIX",
    "LOG_DIR_EVENT_PATH",
    "LOG_DIR_EVENT_PREFIX",
    "LOG_DIR_FAILURE_EVENT",
    "NO_LEADER",
    "PERSISTENT_PATHS",
    "PRODUCER_ID_BLOCK_PATH",
    "PartitionState",
    "TOPICS_PATH",
    "TOPIC_CONFIG_PATH",
    "TopicAssignment",
    "broker_path",
    "decode_broker",
    "decode_cluster_id",
    "decode_config_change",
    "decode_entity_config",
    "decode_controller",
    "decode_isr_change",
    "decode_log_dir_event",
    "decode_partition_state",
    "decode_producer_id_block",
    "decode_reassignment",
    "decode_topic_assignment",
    "decode_topic_config",
    "delete_topic_path",
    "encode_broker",
    "encode_cluster_id",
    "encode_config_change",
    "encode_controller",
    "encode_isr_change",
    "encode_log_dir_event",
    "encode_partition_state",
    "encode_producer_id_block",
    "encode_reassignment",
    "encode_topic_assignment",
    "encode_topic_config",
    "partition_state_path",
    "partitions_path",
    "topic_config_path",
    "topic_path",
]

CLUSTER_ID_PATH = "/cluster/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
TOPIC_CONFIG_PATH = "/config/topics"
BROKER_CONFIG_PATH = "/config/brokers"
#: The entity name of the cluster-wide default broker configs (Kafka's ZooKeeperInternals.DEFAULT_STRING).
DEFAULT_BROKER_ENTITY = "<default>"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
#: Reassignments written by a tool (the znode kafka-reassign-partitions.sh wrote before
#: Kafka 2.4): the controller carries them out and removes each partition as it completes.
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
#: Partitions a tool asks to give back to their preferred leaders (the controller deletes it).
PREFERRED_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
#: A broker whose log directory failed says so here (Kafka's LogDirEventNotification).
LOG_DIR_EVENT_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
#: The only log directory event Kafka defines: a directory failed.
LOG_DIR_FAILURE_EVENT = 1

#: Created at a cluster's first start (Kafka's ``ZkData.PersistentZkPaths``).
PERSISTENT_PATHS = (
    "/consumers", BROKER_IDS_PATH, TOPICS_PATH, CONFIG_CHANGES_PATH, TOPIC_CONFIG_PATH, "/config/clients",
    "/config/users", "/config/brokers", "/config/ips", DELETE_TOPICS_PATH, "/brokers/seqid",
    ISR_CHANGE_PATH, "/latest_producer_id_block", LOG_DIR_EVENT_PATH,
)

#: The version of each znode's JSON that pylogq writes.
BROKER_VERSION = 5
TOPIC_VERSION = 3


def broker_path(broker_id: int) -> str:
    return "%s/%d" % (BROKER_IDS_PATH, broker_id)


def topic_path(topic: str) -> str:
    return "%s/%s" % (TOPICS_PATH, topic)


def partitions_path(topic: str) -> str:
    return "%s/%s/partitions" % (TOPICS_PATH, topic)


def partition_state_path(topic: str, partition: int) -> str:
    return "%s/%s/partitions/%d/state" % (TOPICS_PATH, topic, partition)


def broker_config_path(entity: str) -> str:
    """``/config/brokers/<id>`` or ``/config/brokers/<default>``."""
    return "%s/%s" % (BROKER_CONFIG_PATH, entity)


def topic_config_path(topic: str) -> str:
    return "%s/%s" % (TOPIC_CONFIG_PATH, topic)


def delete_topic_path(topic: str) -> str:
    return "%s/%s" % (DELETE_TOPICS_PATH, topic)


def _dumps(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def _loads(path: str, data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptMetadataError(path, "not JSON (%s): %r" % (exc, bytes(data[:80])),
                                   "rewrite or delete the znode with ZooKeeper's shell") from None


def _field(path: str, obj: Any, key: str, kind: Any) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise CorruptMetadataError(path, "no %r field in %r" % (key, obj), "rewrite the znode in Kafka's format")
    value = obj[key]
    if kind is int and isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)  # Kafka writes some numbers as strings ("block_start", "version" of /cluster/id)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CorruptMetadataError(path, "field %r is %r, not a %s" % (key, value, getattr(kind, "__name__", kind)),
                                   "rewrite the znode in Kafka's format")
    return value


# -- brokers ----------------------------------------------------------------------------------


def encode_broker(reg: BrokerRegistration, now_ms: Optional[int] = None) -> bytes:
    """``/brokers/ids/<id>`` (version 5). The top-level host and port are the first PLAINTEXT
    endpoint's, as Kafka writes them for clients that read only those."""
    plain = next((e for e in reg.endpoints if e.security_protocol == "PLAINTEXT"), None)
    body: Dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in reg.endpoints},
        "endpoints": [e.connection_string() for e in reg.endpoints],
        "jmx_port": -1,
        "port": plain.port if plain is not None else -1,
        "host": plain.host if plain is not None else None,
        "version": BROKER_VERSION,
        "timestamp": str(int(time.time() * 1000) if now_ms is None else now_ms),
    }
    if reg.rack is not None:
        body["rack"] = reg.rack
    return _dumps(body)


def _parse_endpoint(path: str, text: str, protocols: Mapping[str, str]) -> BrokerEndpoint:
    listener, sep, rest = text.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or not colon or not port.isdigit():
        raise CorruptMetadataError(path, "endpoint %r is not LISTENER://host:port" % text,
                                   "rewrite the znode in Kafka's format")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return BrokerEndpoint(listener, host, int(port), protocols.get(listener, listener))


def decode_broker(broker_id: int, data: bytes, epoch: int = -1) -> BrokerRegistration:
    """A broker's registration, from any version Kafka wrote (1-5)."""
    path = broker_path(broker_id)
    obj = _loads(path, data)
    version = _field(path, obj, "version", int)
    if version < 1:
        raise CorruptMetadataError(path, "unsupported registration version %d" % version,
                                   "restart the broker so that it registers again")
    if version == 1:
        endpoints: Tuple[BrokerEndpoint, ...] = (
            BrokerEndpoint("PLAINTEXT", _field(path, obj, "host", str), _field(path, obj, "port", int)),)
    else:
        protocols = obj.get("listener_security_protocol_map") or {}
        if not isinstance(protocols, dict):
            raise CorruptMetadataError(path, "listener_security_protocol_map is %r" % (protocols,),
                                       "rewrite the znode in Kafka's format")
        endpoints = tuple(_parse_endpoint(path, str(e), protocols) for e in _field(path, obj, "endpoints", list))
    rack = obj.get("rack")
    return BrokerRegistration(broker_id, endpoints, rack if isinstance(rack, str) else None, epoch)


# -- controller -------------------------------------------------------------------------------


def encode_controller(broker_id: int, now_ms: Optional[int] = None) -> bytes:
    return _dumps({"version": 2, "brokerid": broker_id,
                   "timestamp": str(int(time.time() * 1000) if now_ms is None else now_ms),
                   "kraftControllerEpoch": -1})


def decode_controller(data: bytes) -> int:
    """The controller's broker id from ``/controller``."""
    return int(_field(CONTROLLER_PATH, _loads(CONTROLLER_PATH, data), "brokerid", int))


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_field(CLUSTER_ID_PATH, _loads(CLUSTER_ID_PATH, data), "id", str))


# -- topics -----------------------------------------------------------------------------------


class TopicAssignment(NamedTuple):
    """A topic's replica assignment (``/brokers/topics/<topic>``): partition -> broker ids,
    the preferred leader first; its topic id (Kafka's base64url form); and, for partitions
    being reassigned (KIP-455), the replicas being added and those being removed (the
    partition's replicas are then the target's and the original's together)."""

    partitions: Dict[int, List[int]]
    topic_id: Optional[str] = None
    adding: Dict[int, List[int]] = {}
    removing: Dict[int, List[int]] = {}


def encode_topic_assignment(assignment: TopicAssignment) -> bytes:
    body: Dict[str, Any] = {
        "version": TOPIC_VERSION,
        "partitions": {str(p): list(r) for p, r in sorted(assignment.partitions.items())},
        "adding_replicas": {str(p): list(r) for p, r in sorted(assignment.adding.items()) if r},
        "removing_replicas": {str(p): list(r) for p, r in sorted(assignment.removing.items()) if r},
    }
    if assignment.topic_id is not None:
        body["topic_id"] = assignment.topic_id
    return _dumps(body)


def decode_topic_assignment(topic: str, data: bytes) -> TopicAssignment:
    path = topic_path(topic)
    obj = _loads(path, data)
    partitions = _replica_map(path, _field(path, obj, "partitions", dict), "replicas")
    # Absent before Kafka 2.4 (znode version 1): no reassignment is under way.
    adding = _replica_map(path, obj.get("adding_replicas") or {}, "adding replicas")
    removing = _replica_map(path, obj.get("removing_replicas") or {}, "removing replicas")
    topic_id = obj.get("topic_id")
    return TopicAssignment(partitions, topic_id if isinstance(topic_id, str) else None,
                           {p: r for p, r in adding.items() if r}, {p: r for p, r in removing.items() if r})


def _replica_map(path: str, raw: Any, what: str) -> Dict[int, List[int]]:
    """``{"<partition>": [broker ids]}`` -> partition -> broker ids."""
    if not isinstance(raw, dict):
        raise CorruptMetadataError(path, "%s are %r, not an object" % (what, raw), "rewrite the znode in Kafka's format")
    out: Dict[int, List[int]] = {}
    for key, replicas in raw.items():
        if not str(key).isdigit() or not isinstance(replicas, list) or \
                not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas):
            raise CorruptMetadataError(path, "partition %r has %s %r" % (key, what, replicas),
                                       "rewrite the znode in Kafka's format")
        out[int(key)] = list(replicas)
    return out


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(sorted(config.items()))})


def decode_entity_config(path: str, data: bytes) -> Dict[str, str]:
    """The ``config`` of a topic's, a broker's or a user's config znode at ``path``; a znode
    without data (a parent made for ``/config/users/<user>/clients/<id>``) has none, as in Kafka."""
    if not data:
        return {}
    config = _field(path, _loads(path, data), "config", dict)
    return {str(k): str(v) for k, v in config.items()}


def decode_topic_config(topic: str, data: bytes) -> Dict[str, str]:
    return decode_entity_config(topic_config_path(topic), data)


def decode_broker_config(entity: str, data: bytes) -> Dict[str, str]:
    return decode_entity_config(broker_config_path(entity), data)


def encode_config_change(entity_path: str) -> bytes:
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(path: str, data: bytes) -> str:
    """The changed entity (``topics/<name>``) from a ``config_change_`` notification."""
    obj = _loads(path, data)
    if isinstance(obj, dict) and obj.get("version") == 1:  # Kafka's older form
        return "%s/%s" % (_field(path, obj, "entity_type", str), _field(path, obj, "entity_name", str))
    return str(_field(path, obj, "entity_path", str))


# -- partition state --------------------------------------------------------------------------


class PartitionState(NamedTuple):
    """A partition's leader, leader epoch and ISR, and the controller epoch that wrote them.

    ``partition_epoch`` is the state znode's version (Kafka's zkVersion): conditional
    writes name it. -1 when not known (a state not yet read or written). ``zxid`` is the
    zxid of the write that made this state (the znode's mzxid), -1 when not known: a
    broker whose registration is younger (its broker epoch is larger) has restarted since
    the state was decided, and the controller treats it as failed for this partition.
    """

    leader: int
    leader_epoch: int
    isr: List[int]
    controller_epoch: int
    partition_epoch: int = -1
    zxid: int = -1


NO_LEADER = -1


def encode_partition_state(state: PartitionState) -> bytes:
    return _dumps({"controller_epoch": state.controller_epoch, "leader": state.leader, "version": 1,
                   "leader_epoch": state.leader_epoch, "isr": list(state.isr)})


def decode_partition_state(topic: str, partition: int, data: bytes, version: int = -1) -> PartitionState:
    path = partition_state_path(topic, partition)
    obj = _loads(path, data)
    isr = _field(path, obj, "isr", list)
    if not all(isinstance(r, int) and not isinstance(r, bool) for r in isr):
        raise CorruptMetadataError(path, "isr %r is not a list of broker ids" % (isr,),
                                   "rewrite the znode in Kafka's format")
    return PartitionState(_field(path, obj, "leader", int), _field(path, obj, "leader_epoch", int), list(isr),
                          _field(path, obj, "controller_epoch", int), version)


def encode_isr_change(partitions: Sequence[Tuple[str, int]]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_isr_change(path: str, data: bytes) -> List[Tuple[str, int]]:
    entries = _field(path, _loads(path, data), "partitions", list)
    out = []
    for e in entries:
        out.append((str(_field(path, e, "topic", str)), int(_field(path, e, "partition", int))))
    return out


def encode_log_dir_event(broker_id: int) -> bytes:
    return _dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(path: str, data: bytes) -> int:
    """-> the broker whose log directory failed."""
    obj = _loads(path, data)
    event = _field(path, obj, "event", int)
    if event != LOG_DIR_FAILURE_EVENT:
        raise CorruptMetadataError(path, "unknown log directory event %r" % (event,), "delete the znode")
    return int(_field(path, obj, "broker", int))


# -- admin requests ---------------------------------------------------------------------------


def encode_reassignment(targets: Mapping[Tuple[str, int], Sequence[int]]) -> bytes:
    """``/admin/reassign_partitions``: each partition's target replicas (an empty list writes
    none: ``/admin/preferred_replica_election``'s entries)."""
    entries: List[Dict[str, Any]] = []
    for (t, p), r in sorted(targets.items()):
        entries.append({"topic": t, "partition": p, "replicas": list(r)} if r else {"topic": t, "partition": p})
    return _dumps({"version": 1, "partitions": entries})


def decode_reassignment(path: str, data: bytes) -> Dict[Tuple[str, int], List[int]]:
    """``/admin/reassign_partitions`` (or ``/admin/preferred_replica_election``, whose entries
    have no replicas: an empty list each) -> (topic, partition) -> target replicas."""
    out: Dict[Tuple[str, int], List[int]] = {}
    for e in _field(path, _loads(path, data), "partitions", list):
        tp = (str(_field(path, e, "topic", str)), int(_field(path, e, "partition", int)))
        replicas = e.get("replicas", []) if isinstance(e, dict) else []
        if not isinstance(replicas, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas):
            raise CorruptMetadataError(path, "partition %s-%d has replicas %r" % (tp[0], tp[1], replicas),
                                       "rewrite the znode in Kafka's format")
        out[tp] = list(replicas)
    return out


# -- producer ids -----------------------------------------------------------------------------


def encode_producer_id_block(broker_id: int, start: int, end: int) -> bytes:
    return _dumps({"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)})


def decode_producer_id_block(data: bytes) -> Tuple[int, int, int]:
    """(broker, first id, last id) of the latest block handed out."""
    obj = _loads(PRODUCER_ID_BLOCK_PATH, data)
    return (_field(PRODUCER_ID_BLOCK_PATH, obj, "broker", int), _field(PRODUCER_ID_BLOCK_PATH, obj, "block_start", int),
            _field(PRODUCER_ID_BLOCK_PATH, obj, "block_end", int))
