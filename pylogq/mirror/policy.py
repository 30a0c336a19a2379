"""Where mirrored topics go and which topics, groups and topic configs a flow mirrors.

A :class:`ReplicationPolicy` names things, as Kafka's ``ReplicationPolicy`` does:

- :class:`DefaultReplicationPolicy` names the copy of topic ``t`` from cluster ``A``
  ``A.t`` (the separator is ``replication.policy.separator``), so a topic's name says
  where it came from, through any number of hops (``B.A.t``), and a flow can refuse
  to copy a topic back to the cluster it came from;
- :class:`IdentityReplicationPolicy` keeps the name (``t`` stays ``t``), as MirrorMaker 1
  did; it cannot tell where a topic came from (it answers the flow's own source), so it
  does not prevent loops between two clusters mirroring each other. Heartbeats are the
  exception: ``heartbeats`` still becomes ``A.heartbeats``.

The internal topics' names are the policy's too: ``heartbeats``,
``mm2-offset-syncs.<cluster>.internal`` and ``<cluster>.checkpoints.internal`` (with a
custom separator in place of the dots, unless
``replication.policy.internal.topic.separator.enabled`` is false).

The filters are Kafka's defaults: :class:`TopicFilter` (``topics`` and ``topics.exclude``),
:class:`GroupFilter` (``groups`` and ``groups.exclude``) and :class:`ConfigPropertyFilter`
(``config.properties.exclude``, ``use.defaults.from``). A list of regular expressions
matches a name when one of them matches the whole name (Java's ``Pattern.matches``);
an empty list matches nothing. The expressions are Python's ``re`` syntax, which agrees
with Java's for the usual constructs (classes, groups, quantifiers, escapes).

:func:`is_cycle` is the loop prevention a flow applies, and the functions after it are
Kafka's ``MirrorClient`` queries over a cluster's topic names (hops, upstream clusters,
remote topics). Policies and filters are immutable and safe to share between threads.
"""

from __future__ import annotations

import re
from typing import Iterable, List, Optional, Pattern, Sequence, Set, Tuple

from ..errors import ConfigError

__all__ = [
    "CONFIG_PROPERTIES_EXCLUDE_DEFAULT", "ConfigPropertyFilter", "DefaultReplicationPolicy", "GROUPS_DEFAULT",
    "GROUPS_EXCLUDE_DEFAULT", "GroupFilter", "IdentityReplicationPolicy", "ReplicationPolicy", "TOPICS_DEFAULT",
    "TOPICS_EXCLUDE_DEFAULT", "TopicFilter", "checkpoint_topics", "compile_patterns", "count_hops_for_topic",
    "heartbeat_topics", "is_cycle", "is_remote_topic", "remote_topics", "replication_hops", "upstream_clusters",
]

#: Kafka's defaults of the filters' lists (DefaultTopicFilter, DefaultGroupFilter, DefaultConfigPropertyFilter).
TOPICS_DEFAULT: Tuple[str, ...] = (".*",)
TOPICS_EXCLUDE_DEFAULT: Tuple[str, ...] = (r".*[\-\.]internal", r".*\.replica", "__.*")
GROUPS_DEFAULT: Tuple[str, ...] = (".*",)
GROUPS_EXCLUDE_DEFAULT: Tuple[str, ...] = ("console-consumer-.*", "connect-.*", "__.*")
CONFIG_PROPERTIES_EXCLUDE_DEFAULT: Tuple[str, ...] = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)


def _java_split(text: str, separator: str) -> List[str]:
    """``text`` split as Java's ``String.split`` with a literal separator does: empty strings at
    the end dropped (one at the start kept), and ``[text]`` when the separator is absent."""
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts if parts else ([text] if separator not in text else [])


class ReplicationPolicy:
    """The names of remote and internal topics (Kafka's ``ReplicationPolicy`` and its defaults).

    A subclass defines :meth:`format_remote_topic`, :meth:`topic_source` and
    :meth:`upstream_topic`; the rest follows from them. Immutable.
    """

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        """The name on the target of ``topic`` copied from cluster ``source_cluster_alias``."""
        raise NotImplementedError

    def topic_source(self, topic: str) -> Optional[str]:
        """The alias of the cluster ``topic`` was copied from; None for a topic that is not remote."""
        raise NotImplementedError

    def upstream_topic(self, topic: str) -> Optional[str]:
        """``topic``'s name on the cluster it was copied from (itself remote after several hops);
        None for a topic that is not remote."""
        raise NotImplementedError

    def original_topic(self, topic: str) -> str:
        """The name ``topic`` had where it was first written, however many hops ago."""
        seen: Set[str] = set()
        while topic not in seen:
            seen.add(topic)
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return topic
            topic = upstream
        return topic  # a policy whose names go round in a circle: stop where it began again

    def heartbeats_topic(self) -> str:
        """The heartbeats topic: ``heartbeats``."""
        return "heartbeats"

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        """The offset-syncs topic of the flows to or from ``cluster_alias``."""
        return "mm2-offset-syncs." + cluster_alias + ".internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        """The checkpoints topic, on a target, of the groups of source cluster ``cluster_alias``."""
        return cluster_alias + ".checkpoints.internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        """Whether ``topic`` is a heartbeats topic, copied or not (``heartbeats``, ``A.heartbeats``)."""
        return self.heartbeats_topic() == self.original_topic(topic)

    def is_checkpoints_topic(self, topic: str) -> bool:
        """Whether ``topic`` is a checkpoints topic."""
        return topic.endswith(".checkpoints.internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """Whether ``topic`` is one of MirrorMaker's internal topics (offset syncs, checkpoints)."""
        return topic.endswith(".internal")

    def is_internal_topic(self, topic: str) -> bool:
        """Whether ``topic`` is internal and never mirrored: MirrorMaker's, Kafka's (``__`` or ``.``
        at the start) or Connect's (``.internal`` or ``-internal`` at the end)."""
        kafka_internal = topic.startswith("__") or topic.startswith(".")
        connect_internal = topic.endswith("-internal") or topic.endswith(".internal")
        return self.is_mm2_internal_topic(topic) or kafka_internal or connect_internal


class DefaultReplicationPolicy(ReplicationPolicy):
    """Remote topics named ``<source><separator><topic>`` (Kafka's ``DefaultReplicationPolicy``).

    ``separator`` is ``replication.policy.separator`` (``.``); with
    ``internal_topic_separator_enabled`` (``replication.policy.internal.topic.separator.enabled``,
    true) the offset-syncs and checkpoints topics use it too, else dots, as MirrorMaker
    did before the separator could be chosen. Immutable.
    """

    def __init__(self, separator: str = ".", internal_topic_separator_enabled: bool = True) -> None:
        if not isinstance(separator, str) or not separator:
            raise ConfigError("Invalid value %r for configuration replication.policy.separator: "
                              "the separator must be a non-empty string" % (separator,))
        self.separator = separator
        self.internal_topic_separator_enabled = internal_topic_separator_enabled

    def __eq__(self, other: object) -> bool:
        return (type(other) is type(self) and isinstance(other, DefaultReplicationPolicy)
                and vars(self) == vars(other))

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(vars(self).items()))))

    def __repr__(self) -> str:
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % item for item in vars(self).items()))

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return source_cluster_alias + self.separator + topic

    def topic_source(self, topic: str) -> Optional[str]:
        parts = _java_split(topic, self.separator)
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> Optional[str]:
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator):]

    def _internal_separator(self) -> str:
        return self.separator if self.internal_topic_separator_enabled else "."

    def _internal_suffix(self) -> str:
        return self._internal_separator() + "internal"

    def _checkpoints_suffix(self) -> str:
        return self._internal_separator() + "checkpoints" + self._internal_suffix()

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return "mm2-offset-syncs" + self._internal_separator() + cluster_alias + self._internal_suffix()

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return cluster_alias + self._checkpoints_suffix()

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._checkpoints_suffix())

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(self._internal_suffix())


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Remote topics keep their names (Kafka's ``IdentityReplicationPolicy``); heartbeats
    topics are named as by :class:`DefaultReplicationPolicy`.

    ``source_cluster_alias`` is what :meth:`topic_source` answers for every other topic
    (a flow's policy is given the flow's source); None if not given. Immutable.
    """

    def __init__(self, source_cluster_alias: Optional[str] = None, separator: str = ".",
                 internal_topic_separator_enabled: bool = True) -> None:
        super().__init__(separator, internal_topic_separator_enabled)
        self.source_cluster_alias = source_cluster_alias

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_cluster_alias, topic)
        return topic

    def topic_source(self, topic: str) -> Optional[str]:
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_cluster_alias

    def upstream_topic(self, topic: str) -> Optional[str]:
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic


# -- filters ----------------------------------------------------------------------


def compile_patterns(patterns: Iterable[str], key: str) -> Tuple[Pattern[str], ...]:
    """Each regular expression of a list setting compiled; a ConfigError names ``key`` and the
    expression that does not compile."""
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ConfigError("Invalid value %r for configuration %s: %r is not a regular expression (%s)"
                              % (", ".join(patterns), key, pattern, exc)) from None
    return tuple(compiled)


def _matches(patterns: Sequence[Pattern[str]], name: str) -> bool:
    return any(p.fullmatch(name) is not None for p in patterns)


class _IncludeExclude:
    """A name passes when an include expression matches it whole and no exclude expression does."""

    def __init__(self, include: Sequence[str], exclude: Sequence[str], include_key: str, exclude_key: str) -> None:
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self._include = compile_patterns(self.include, include_key)
        self._exclude = compile_patterns(self.exclude, exclude_key)

    def _passes(self, name: str) -> bool:
        return _matches(self._include, name) and not _matches(self._exclude, name)

    def __eq__(self, other: object) -> bool:
        return (type(other) is type(self) and isinstance(other, _IncludeExclude)
                and (self.include, self.exclude) == (other.include, other.exclude))

    def __hash__(self) -> int:
        return hash((type(self), self.include, self.exclude))

    def __repr__(self) -> str:
        return "%s(include=%r, exclude=%r)" % (type(self).__name__, self.include, self.exclude)


class TopicFilter(_IncludeExclude):
    """``topics`` and ``topics.exclude`` (Kafka's ``DefaultTopicFilter``). Immutable."""

    def __init__(self, include: Sequence[str] = TOPICS_DEFAULT, exclude: Sequence[str] = TOPICS_EXCLUDE_DEFAULT,
                 *, include_key: str = "topics", exclude_key: str = "topics.exclude") -> None:
        super().__init__(include, exclude, include_key, exclude_key)

    def should_replicate_topic(self, topic: str) -> bool:
        """Whether the lists let ``topic`` through (excludes win over includes)."""
        return self._passes(topic)


class GroupFilter(_IncludeExclude):
    """``groups`` and ``groups.exclude`` (Kafka's ``DefaultGroupFilter``). Immutable."""

    def __init__(self, include: Sequence[str] = GROUPS_DEFAULT, exclude: Sequence[str] = GROUPS_EXCLUDE_DEFAULT,
                 *, include_key: str = "groups", exclude_key: str = "groups.exclude") -> None:
        super().__init__(include, exclude, include_key, exclude_key)

    def should_replicate_group(self, group: str) -> bool:
        """Whether the lists let consumer group ``group`` through (excludes win over includes)."""
        return self._passes(group)


class ConfigPropertyFilter:
    """Which topic configs are copied to remote topics (Kafka's ``DefaultConfigPropertyFilter``).

    ``exclude`` is ``config.properties.exclude`` (by default the throttled replica lists,
    the timestamp type and difference, unclean leader election and min.insync.replicas:
    settings about the source cluster's brokers, not the data); ``use_defaults_from``
    (``use.defaults.from``, ``source`` or ``target``) says whose defaults a remote topic
    gets for the settings the source topic leaves at their defaults. Immutable.
    """

    def __init__(self, exclude: Sequence[str] = CONFIG_PROPERTIES_EXCLUDE_DEFAULT, use_defaults_from: str = "target",
                 *, exclude_key: str = "config.properties.exclude") -> None:
        self.exclude = tuple(exclude)
        self.use_defaults_from = use_defaults_from
        self._exclude = compile_patterns(self.exclude, exclude_key)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ConfigPropertyFilter)
                and (self.exclude, self.use_defaults_from) == (other.exclude, other.use_defaults_from))

    def __hash__(self) -> int:
        return hash((self.exclude, self.use_defaults_from))

    def __repr__(self) -> str:
        return "ConfigPropertyFilter(exclude=%r, use_defaults_from=%r)" % (self.exclude, self.use_defaults_from)

    def should_replicate_config_property(self, prop: str) -> bool:
        """Whether topic config ``prop`` is copied."""
        return not _matches(self._exclude, prop)

    def should_replicate_source_default(self, prop: str) -> bool:
        """Whether a source topic's default value of ``prop`` is copied too (``use.defaults.from=source``)."""
        return self.use_defaults_from == "source"


# -- loops and MirrorClient's queries ---------------------------------------------------


def is_cycle(policy: ReplicationPolicy, topic: str, target: str) -> bool:
    """Whether ``topic`` came, through any number of hops, from cluster ``target``: a flow to
    ``target`` must not copy it (it would go round). Kafka's ``MirrorSourceConnector.isCycle``;
    a policy that cannot tell (the identity policy) never finds a cycle but for heartbeats."""
    seen: Set[str] = set()
    while topic not in seen:
        seen.add(topic)
        source = policy.topic_source(topic)
        if source is None:
            return False
        if source == target:
            return True
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        topic = upstream
    return False


def count_hops_for_topic(policy: ReplicationPolicy, topic: str, source_cluster_alias: str) -> int:
    """How many flows ``topic`` went through since cluster ``source_cluster_alias``; -1 if it did
    not come from there (Kafka's ``MirrorClient.countHopsForTopic``)."""
    hops = 0
    visited: Set[str] = set()
    current: Optional[str] = topic
    while current is not None:
        hops += 1
        source = policy.topic_source(current)
        if source is None:
            return -1
        if source == source_cluster_alias:
            return hops
        if source in visited:  # a policy that cannot prevent cycles (identity): never found
            return -1
        visited.add(source)
        current = policy.upstream_topic(current)
    return -1


def heartbeat_topics(policy: ReplicationPolicy, topics: Iterable[str]) -> Set[str]:
    """The heartbeats topics among a cluster's ``topics``."""
    return {t for t in topics if policy.is_heartbeats_topic(t)}


def checkpoint_topics(policy: ReplicationPolicy, topics: Iterable[str]) -> Set[str]:
    """The checkpoints topics among a cluster's ``topics``."""
    return {t for t in topics if policy.is_checkpoints_topic(t)}


def replication_hops(policy: ReplicationPolicy, topics: Iterable[str], upstream_cluster_alias: str) -> int:
    """The fewest flows between cluster ``upstream_cluster_alias`` and the cluster whose topics
    are ``topics``, read from its heartbeats topics; -1 if none leads there."""
    counts = [count_hops_for_topic(policy, t, upstream_cluster_alias) for t in heartbeat_topics(policy, topics)]
    found = [n for n in counts if n != -1]
    return min(found) if found else -1


def _all_sources(policy: ReplicationPolicy, topic: str) -> Set[str]:
    sources: Set[str] = set()
    source = policy.topic_source(topic)
    current: Optional[str] = topic
    while source is not None and source not in sources and current is not None:
        sources.add(source)
        current = policy.upstream_topic(current)
        source = policy.topic_source(current) if current is not None else None
    return sources


def upstream_clusters(policy: ReplicationPolicy, topics: Iterable[str]) -> Set[str]:
    """Every cluster a cluster's heartbeats topics came from, however many hops away."""
    found: Set[str] = set()
    for topic in heartbeat_topics(policy, topics):
        found |= _all_sources(policy, topic)
    return found


def is_remote_topic(policy: ReplicationPolicy, topic: str) -> bool:
    """Whether ``topic`` is a copy of another cluster's topic (internal topics are not)."""
    return not policy.is_internal_topic(topic) and policy.topic_source(topic) is not None


def remote_topics(policy: ReplicationPolicy, topics: Iterable[str], source: Optional[str] = None) -> Set[str]:
    """The remote topics among a cluster's ``topics``; with ``source``, those copied directly from it."""
    return {t for t in topics if is_remote_topic(policy, t) and (source is None or policy.topic_source(t) == source)}
