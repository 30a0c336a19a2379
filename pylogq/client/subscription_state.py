"""The consumer's subscription state (Kafka's ``SubscriptionState``): what it reads and from where.

Holds the subscription (topic names or a pattern, and the rebalance
listener) or the manual assignment, the assigned partitions, each one's
position (the offset of the next record ``poll`` returns; None until it is
looked up) and the paused ones. :class:`~pylogq.client.fetcher.Fetcher` and
:class:`~pylogq.client.consumer_coordinator.ConsumerCoordinator` read and
update it; :class:`~pylogq.client.consumer.Consumer` owns it.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Pattern, Set

from ..cluster.contract import TopicPartition
from ..cluster.names import validate_topic_name
from ..errors import IllegalStateError, InvalidArgumentTypeError

__all__ = ["SubscriptionState", "as_tp"]


def as_tp(tp: Any) -> TopicPartition:
    """``tp`` as a TopicPartition (a ``(topic, partition)`` tuple is accepted); TypeError otherwise."""
    if isinstance(tp, TopicPartition):
        return tp
    if isinstance(tp, tuple) and len(tp) == 2 and isinstance(tp[0], str) and isinstance(tp[1], int):
        return TopicPartition(tp[0], tp[1])
    raise InvalidArgumentTypeError("a partition must be a TopicPartition (topic, partition), not %r" % (tp,))


class SubscriptionState:
    """The subscription or manual assignment, the assigned partitions, their positions and pauses.

    Invariant: ``assigned`` is the set of ``assignment`` (kept in order,
    without duplicates); ``positions`` and ``paused`` hold only assigned
    partitions once :meth:`set_assignment` ran. A subscription (``subscription``
    or ``pattern``) and a manual assignment (``manual``) exclude each other.

    Not thread-safe: touched only by the polling thread (the heartbeat thread
    never reads it; the ``assigned-partitions`` gauge reads ``len(assignment)``).
    """

    def __init__(self) -> None:
        self.assignment: List[TopicPartition] = []
        self.assigned: Set[TopicPartition] = set()
        self.manual = False
        self.positions: Dict[TopicPartition, Optional[int]] = {}
        self.paused: Set[TopicPartition] = set()
        self.subscription: Set[str] = set()
        self.pattern: Optional[Pattern[str]] = None
        self.listener: Any = None

    def subscribe(self, topics: Iterable[str], pattern: Optional[str], listener: Any) -> None:
        """Check and take a subscription to ``topics`` or ``pattern`` (see ``Consumer.subscribe``)."""
        if isinstance(topics, str):
            topics = [topics]
        topic_list = list(topics)
        if self.manual:
            raise IllegalStateError("subscription to topics and manual assignment are mutually exclusive")
        if topic_list and pattern is not None:
            raise IllegalStateError("give topics or a pattern, not both")
        if not topic_list and pattern is None:
            raise IllegalStateError("give topics or a pattern to subscribe to")
        for topic in topic_list:
            if not isinstance(topic, str):
                raise InvalidArgumentTypeError("topic names must be strings, not %r" % (topic,))
            validate_topic_name(topic)
        if listener is not None and not (hasattr(listener, "on_partitions_revoked")
                                         and hasattr(listener, "on_partitions_assigned")):
            raise InvalidArgumentTypeError("listener must have on_partitions_revoked and on_partitions_assigned, not %r"
                                           % (listener,))
        self.pattern = re.compile(pattern) if pattern is not None else None
        self.subscription = set(topic_list)
        self.listener = listener

    def unsubscribe(self) -> None:
        """Drop the subscription and any manual assignment (the partitions stay until reassigned)."""
        self.subscription = set()
        self.pattern = None
        self.listener = None
        self.manual = False

    def subscribed(self) -> bool:
        """Whether topics or a pattern are subscribed to."""
        return bool(self.subscription or self.pattern is not None)

    def group_managed(self) -> bool:
        """Whether the assignment follows the subscription (a group's or the metadata's), not ``assign``."""
        return self.subscribed() and not self.manual

    def set_assignment(self, new: List[TopicPartition]) -> None:
        """Assign ``new`` (distinct partitions): keep the positions and pauses of those still assigned."""
        keep = set(new)
        self.positions = {tp: self.positions.get(tp) for tp in new}
        self.paused &= keep
        self.assignment = new
        self.assigned = keep

    def require_assigned(self, partition: Any) -> TopicPartition:
        """``partition`` as a TopicPartition; IllegalStateError when it is not assigned."""
        tp = as_tp(partition)
        if tp not in self.assigned:
            raise IllegalStateError("partition %s-%d is not assigned to this consumer" % tp)
        return tp

    def all_consumed(self) -> Dict[TopicPartition, int]:
        """The position of every assigned partition that has one: what a commit of everything commits."""
        return {tp: pos for tp, pos in self.positions.items() if pos is not None and tp in self.assigned}
