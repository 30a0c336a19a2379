"""The group coordinator with real threads: joins, syncs, heartbeats, expiry, offsets and storage."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from pylogq.cluster.coordinator.group import coordinator as gc
from pylogq.cluster.coordinator.group import offsets_schema as schema
from pylogq.cluster.coordinator.group.coordinator import GroupCoordinator, JoinResult, raise_for
from pylogq.cluster.coordinator.group.metadata_manager import StoredBatch
from pylogq.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    NonEmptyGroupError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownMemberIdError,
)
from pylogq.records import RecordBatch
from pylogq.records.control import end_txn_marker

RIP = RebalanceInProgressError.code
DEADLINE_S = 10.0


class MemoryStore:
    """``__consumer_offsets`` as lists of (key, value) and of the batches read back, fed by
    real v2 batches (transaction markers too)."""

    def __init__(self) -> None:
        self.partitions: Dict[int, List[Tuple[Optional[bytes], Optional[bytes]]]] = defaultdict(list)
        self.batches: Dict[int, List[StoredBatch]] = defaultdict(list)
        self.raw: Dict[int, List[bytes]] = defaultdict(list)
        self.fail: Optional[BaseException] = None

    def append(self, partition: int, batch: bytes) -> None:
        if self.fail is not None:
            raise self.fail
        self.raw[partition].append(bytes(batch))
        parsed = RecordBatch(batch)
        if parsed.is_control_batch:
            marker = end_txn_marker(batch)
            self.batches[partition].append(StoredBatch((), parsed.producer_id, parsed.is_transactional,
                                                       -1 if marker is None else marker.control_type))
            return
        records = [(r.key, r.value) for r in parsed]
        self.partitions[partition].extend(records)
        self.batches[partition].append(StoredBatch(records, parsed.producer_id, parsed.is_transactional))

    def read_all(self, partition: int) -> Iterator[StoredBatch]:
        return iter(list(self.batches.get(partition, [])))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def wait_until(predicate: Callable[[], bool], timeout: float = DEADLINE_S) -> None:
    """Wait for a state another thread produces, failing at the deadline."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached within %.1f s" % timeout)
        pause.wait(0.002)


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=8) as executor:
        yield executor


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def coord(store: MemoryStore, clock: FakeClock) -> Iterator[GroupCoordinator]:
    """A coordinator on a fake clock, deadlines expired by hand with tick()."""
    c = GroupCoordinator(
        store.append,
        store.read_all,
        initial_rebalance_delay_ms=0,
        clock=clock,
        group_min_session_timeout_ms=1,
        start_timer=False,
    )
    yield c
    c.close()


def join(
    c: GroupCoordinator,
    member_id: str = "",
    group: str = "g",
    protocols: Optional[List[Tuple[str, bytes]]] = None,
    session_ms: int = 10000,
    rebalance_ms: int = 5000,
    protocol_type: str = "consumer",
    client_id: str = "client",
) -> JoinResult:
    return c.join_group(
        group,
        member_id,
        client_id,
        session_ms,
        rebalance_ms,
        protocol_type,
        protocols if protocols is not None else [("range", b"meta-" + client_id.encode())],
        timeout_s=DEADLINE_S,
    )


def result(f: "Future[JoinResult]") -> JoinResult:
    return f.result(timeout=DEADLINE_S)


def members_of(c: GroupCoordinator, group: str = "g") -> int:
    return len(c.describe_group(group).members)


def form_pair(c: GroupCoordinator, pool: ThreadPoolExecutor, **kw) -> Tuple[JoinResult, JoinResult]:  # type: ignore[no-untyped-def]
    """A joins alone (generation 1), B joins, A sees the rebalance and rejoins: generation 2, both synced."""
    a = join(c, client_id="a", **kw)
    assert a.error_code == 0 and a.generation_id == 1 and a.leader_id == a.member_id
    assert c.sync_group("g", 1, a.member_id, {a.member_id: b"all"}).error_code == 0
    fb = pool.submit(join, c, client_id="b", **kw)
    wait_until(lambda: c.describe_group("g").state == gc.PREPARING_REBALANCE)
    assert c.heartbeat("g", 1, a.member_id) == RIP
    a2 = join(c, a.member_id, client_id="a", **kw)
    b = result(fb)
    assert a2.generation_id == b.generation_id == 2
    assert a2.leader_id == a.member_id == b.leader_id
    sync_b = pool.submit(c.sync_group, "g", 2, b.member_id)
    assert c.sync_group("g", 2, a.member_id, {a.member_id: b"for-a", b.member_id: b"for-b"}) == (0, b"for-a")
    assert sync_b.result(timeout=DEADLINE_S) == (0, b"for-b")
    return a2, b


# -- membership ----------------------------------------------------------------------------


def test_first_member_becomes_leader_with_a_coordinator_assigned_id(coord: GroupCoordinator) -> None:
    r = join(coord, client_id="cli")
    assert r.error_code == 0
    assert r.member_id.startswith("cli-") and len(r.member_id) == len("cli-") + 36
    assert r.leader_id == r.member_id and r.generation_id == 1 and r.protocol_name == "range"
    assert r.members == [(r.member_id, None, b"meta-cli")]
    assert coord.describe_group("g").state == gc.COMPLETING_REBALANCE
    assert coord.sync_group("g", 1, r.member_id, {r.member_id: b"x"}) == (0, b"x")
    assert coord.describe_group("g").state == gc.STABLE


def test_two_members_leader_sees_both_and_follower_gets_its_assignment(
    coord: GroupCoordinator, pool: ThreadPoolExecutor
) -> None:
    a, b = form_pair(coord, pool)
    assert sorted(a.members) == sorted([(a.member_id, None, b"meta-a"), (b.member_id, None, b"meta-b")])
    assert b.members == []
    assert coord.heartbeat("g", 2, a.member_id) == 0
    assert coord.heartbeat("g", 2, b.member_id) == 0
    desc = coord.describe_group("g")
    assert (desc.error, desc.state, desc.protocol_type, desc.protocol) == (0, gc.STABLE, "consumer", "range")
    assert sorted((m.member_id, m.client_id, m.metadata, m.assignment) for m in desc.members) == sorted(
        [(a.member_id, "a", b"meta-a", b"for-a"), (b.member_id, "b", b"meta-b", b"for-b")]
    )


def test_follower_sync_blocks_until_the_leader_syncs(coord: GroupCoordinator, pool: ThreadPoolExecutor) -> None:
    a = join(coord, client_id="a")
    coord.sync_group("g", 1, a.member_id, {})
    fb = pool.submit(join, coord, client_id="b")
    wait_until(lambda: members_of(coord) == 2)
    join(coord, a.member_id, client_id="a")
    b = result(fb)
    started = threading.Event()

    def follower_sync() -> gc.SyncResult:
        started.set()
        return coord.sync_group("g", 2, b.member_id)

    fs = pool.submit(follower_sync)
    assert started.wait(DEADLINE_S)
    assert not fs.done() or fs.result() == (0, b"B")
    coord.sync_group("g", 2, a.member_id, {b.member_id: b"B"})
    assert fs.result(timeout=DEADLINE_S) == (0, b"B")


def test_three_member_threads_converge_on_one_generation(store: MemoryStore) -> None:
    """Three consumers in threads run join/sync/heartbeat loops until all share a generation."""
    c = GroupCoordinator(store.append, store.read_all, initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1)
    stop = threading.Event()
    lock = threading.Condition()
    seen: Dict[str, List[Tuple[int, bytes]]] = defaultdict(list)
    leader_views: List[List[Tuple[str, Optional[str], bytes]]] = []

    def consumer(name: str) -> None:
        member_id = ""
        while not stop.is_set():
            r = c.join_group("g", member_id, name, 30000, 10000, "consumer", [("range", name.encode())], timeout_s=DEADLINE_S)
            if r.error_code:
                member_id = "" if r.error_code == UnknownMemberIdError.code else member_id
                continue
            member_id = r.member_id
            assignments = None
            if r.leader_id == member_id:
                everyone = b",".join(sorted(m[2] for m in r.members))
                assignments = {m[0]: m[2] + b"|" + everyone for m in r.members}
                with lock:
                    leader_views.append(r.members)
            s = c.sync_group("g", r.generation_id, member_id, assignments, timeout_s=DEADLINE_S)
            if s.error_code:
                continue
            with lock:
                seen[name].append((r.generation_id, s.assignment))
                lock.notify_all()
            while not stop.wait(0.01):
                if c.heartbeat("g", r.generation_id, member_id) != 0:
                    break

    threads = [threading.Thread(target=consumer, args=(n,)) for n in ("a", "b", "c")]
    for t in threads:
        t.start()
    try:
        def converged() -> bool:
            last = [seen[n][-1] if seen[n] else None for n in ("a", "b", "c")]
            return all(x is not None and x[0] == last[0][0] and x[1].endswith(b"|a,b,c") for x in last)  # type: ignore[index]

        with lock:
            assert lock.wait_for(converged, timeout=DEADLINE_S)
            final_generation = seen["a"][-1][0]
            for name in ("a", "b", "c"):
                generations = [g for g, _ in seen[name]]
                assert generations == sorted(set(generations)), generations
                assert seen[name][-1][1] == name.encode() + b"|a,b,c"
            assert sorted(m[2] for m in leader_views[-1]) == [b"a", b"b", b"c"]
        assert final_generation >= 2
        assert c.describe_group("g").state == gc.STABLE
    finally:
        stop.set()
        for t in threads:
            t.join(DEADLINE_S)
        c.close()
    assert not any(t.is_alive() for t in threads)


def test_leave_triggers_a_rebalance_and_the_rest_rejoin(coord: GroupCoordinator, pool: ThreadPoolExecutor) -> None:
    a, b = form_pair(coord, pool)
    assert coord.leave_group("g", b.member_id) == 0
    assert coord.describe_group("g").state == gc.PREPARING_REBALANCE
    assert coord.heartbeat("g", 2, a.member_id) == RIP
    a3 = join(coord, a.member_id, client_id="a")
    assert (a3.generation_id, a3.leader_id, [m[0] for m in a3.members]) == (3, a.member_id, [a.member_id])
    assert coord.leave_group("g", b.member_id) == UnknownMemberIdError.code
    assert coord.heartbeat("g", 3, b.member_id) == UnknownMemberIdError.code


def test_leader_leaving_hands_leadership_to_a_remaining_member(
    coord: GroupCoordinator, pool: ThreadPoolExecutor
) -> None:
    a, b = form_pair(coord, pool)
    coord.leave_group("g", a.member_id)
    b3 = join(coord, b.member_id, client_id="b")
    assert b3.leader_id == b.member_id and b3.generation_id == 3
    assert [m[0] for m in b3.members] == [b.member_id]


def test_last_member_leaving_empties_the_group_and_stores_it(coord: GroupCoordinator, store: MemoryStore) -> None:
    a = join(coord)
    coord.sync_group("g", 1, a.member_id, {})
    coord.leave_group("g", a.member_id)
    desc = coord.describe_group("g")
    assert (desc.state, desc.members) == (gc.EMPTY, [])
    records = store.partitions[coord.partition_for("g")]
    key, value = schema.decode_record(*records[-1])
    assert key == schema.GroupMetadataKey("g")
    assert isinstance(value, schema.GroupMetadataValue)
    assert (value.generation, value.protocol, value.leader, value.members) == (2, None, None, [])


def test_session_timeout_removes_a_silent_member(
    coord: GroupCoordinator, pool: ThreadPoolExecutor, clock: FakeClock
) -> None:
    a, b = form_pair(coord, pool, session_ms=300)
    clock.advance(0.2)
    assert coord.heartbeat("g", 2, a.member_id) == 0
    coord.tick()
    assert members_of(coord) == 2
    clock.advance(0.2)  # b is 0.4 s silent, a only 0.2 s
    coord.tick()
    assert coord.describe_group("g").state == gc.PREPARING_REBALANCE
    assert coord.heartbeat("g", 2, a.member_id) == RIP
    a3 = join(coord, a.member_id, client_id="a", session_ms=300)
    assert a3.generation_id == 3 and [m[0] for m in a3.members] == [a.member_id]
    assert coord.heartbeat("g", 3, b.member_id) == UnknownMemberIdError.code


def test_session_timeout_with_the_real_timer_thread(store: MemoryStore) -> None:
    """Real clock and timer: b stops heartbeating and is removed after its 300 ms session."""
    c = GroupCoordinator(store.append, store.read_all, initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1)
    try:
        a = c.join_group("g", "", "a", 300, 5000, "consumer", [("range", b"")])
        c.sync_group("g", 1, a.member_id, {})
        b_joined = threading.Event()
        b_result: List[JoinResult] = []

        def join_b() -> None:
            b_result.append(c.join_group("g", "", "b", 300, 5000, "consumer", [("range", b"")], timeout_s=DEADLINE_S))
            b_joined.set()

        tb = threading.Thread(target=join_b)
        tb.start()
        pause = threading.Event()
        generation = 1
        deadline = time.monotonic() + DEADLINE_S
        history = []
        # a behaves like a consumer (heartbeat every 20 ms, rejoin when told); b never heartbeats.
        while time.monotonic() < deadline:
            code = c.heartbeat("g", generation, a.member_id)
            if code == RIP:
                r = c.join_group("g", a.member_id, "a", 300, 5000, "consumer", [("range", b"")], timeout_s=DEADLINE_S)
                assert r.error_code == 0
                generation = r.generation_id
                history.append([m[0] for m in r.members])
                c.sync_group("g", generation, a.member_id, {})
                if len(history) >= 2:
                    break
            pause.wait(0.02)
        tb.join(DEADLINE_S)
        assert b_joined.is_set() and b_result[0].error_code == 0
        b_id = b_result[0].member_id
        assert history == [[a.member_id, b_id], [a.member_id]]
        assert generation == 3
        assert c.heartbeat("g", 3, b_id) == UnknownMemberIdError.code
    finally:
        c.close()


def test_rebalance_timeout_drops_members_that_do_not_rejoin(
    coord: GroupCoordinator, pool: ThreadPoolExecutor, clock: FakeClock
) -> None:
    a, _ = form_pair(coord, pool, rebalance_ms=1000)
    fa = pool.submit(join, coord, a.member_id, client_id="a", rebalance_ms=1000)  # the leader rejoins: rebalance
    wait_until(lambda: coord.describe_group("g").state == gc.PREPARING_REBALANCE)
    clock.advance(0.5)
    coord.tick()
    assert not fa.done()
    clock.advance(0.6)
    coord.tick()
    a3 = result(fa)
    assert a3.generation_id == 3 and [m[0] for m in a3.members] == [a.member_id]


def test_initial_rebalance_delay_gathers_joiners_into_one_generation(
    store: MemoryStore, pool: ThreadPoolExecutor, clock: FakeClock
) -> None:
    c = GroupCoordinator(store.append, store.read_all, initial_rebalance_delay_ms=3000, clock=clock, start_timer=False)
    try:
        fa = pool.submit(join, c, client_id="a", session_ms=10000, rebalance_ms=10000)
        wait_until(lambda: members_of(c) == 1)
        fb = pool.submit(join, c, client_id="b", session_ms=10000, rebalance_ms=10000)
        wait_until(lambda: members_of(c) == 2)
        clock.advance(3.0)
        c.tick()  # b arrived during the first delay: the delay is extended
        assert not fa.done() and not fb.done()
        clock.advance(3.0)
        c.tick()
        ra, rb = result(fa), result(fb)
        assert ra.generation_id == rb.generation_id == 1
        assert len(ra.members) == 2 and rb.members == []
    finally:
        c.close()


def test_join_and_heartbeat_errors(coord: GroupCoordinator) -> None:
    assert join(coord, group="").error_code == InvalidGroupIdError.code
    assert join(coord, session_ms=0).error_code == InvalidSessionTimeoutError.code
    assert join(coord, session_ms=2_000_000).error_code == InvalidSessionTimeoutError.code
    assert join(coord, member_id="ghost").error_code == UnknownMemberIdError.code
    assert join(coord, protocols=[]).error_code == InconsistentGroupProtocolError.code
    assert join(coord, protocol_type="").error_code == InconsistentGroupProtocolError.code
    a = join(coord)
    assert coord.heartbeat("g", 1, "ghost") == UnknownMemberIdError.code
    assert coord.heartbeat("g", 7, a.member_id) == IllegalGenerationError.code
    assert coord.heartbeat("nope", 1, a.member_id) == UnknownMemberIdError.code
    assert coord.sync_group("g", 7, a.member_id, {}).error_code == IllegalGenerationError.code
    assert coord.sync_group("g", 1, "ghost", {}).error_code == UnknownMemberIdError.code
    assert coord.heartbeat("g", 1, a.member_id) == 0  # CompletingRebalance: the member may heartbeat


def test_a_heartbeat_while_the_groups_partition_loads_is_answered_none(coord: GroupCoordinator) -> None:
    """Kafka answers a heartbeat NONE while the coordinator loads the group (it knows nothing of
    the member yet); the group's other calls answer COORDINATOR_LOAD_IN_PROGRESS. aiokafka's
    heartbeat task fails on that code, which a coordinator move made it meet."""
    a = join(coord)
    assert coord.sync_group("g", 1, a.member_id, {a.member_id: b"all"}).error_code == 0
    coord.serve_partitions([coord.partition_for("g")])
    coord.begin_loading(coord.partition_for("g"))
    assert coord.heartbeat("g", 1, a.member_id) == 0
    assert coord.heartbeat("g", 1, "ghost") == 0
    assert join(coord, a.member_id).error_code == CoordinatorLoadInProgressError.code
    assert coord.sync_group("g", 1, a.member_id, {}).error_code == CoordinatorLoadInProgressError.code


def test_rejoin_of_a_stable_follower_with_same_metadata_keeps_the_generation(
    coord: GroupCoordinator, pool: ThreadPoolExecutor
) -> None:
    a, b = form_pair(coord, pool)
    again = join(coord, b.member_id, client_id="b")
    assert (again.error_code, again.generation_id, again.leader_id) == (0, 2, a.member_id)
    assert coord.describe_group("g").state == gc.STABLE


def test_protocol_selection_by_vote_and_intersection(
    store: MemoryStore, pool: ThreadPoolExecutor, clock: FakeClock
) -> None:
    def form(specs: List[List[str]]) -> List[JoinResult]:
        c = GroupCoordinator(store.append, store.read_all, initial_rebalance_delay_ms=1000, clock=clock, start_timer=False)
        try:
            futures = []
            for i, names in enumerate(specs):
                futures.append(pool.submit(join, c, client_id="m%d" % i, protocols=[(n, n.encode()) for n in names]))
                wait_until(lambda n=i + 1: members_of(c) == n)
            for _ in range(20):  # the delay, extended per joiner, is bounded by the 5 s rebalance timeout
                if c.describe_group("g").state == gc.COMPLETING_REBALANCE:
                    break
                clock.advance(1.0)
                c.tick()
            return [result(f) for f in futures]
        finally:
            c.close()

    # Every member supports range and roundrobin; two of three prefer range.
    rs = form([["range", "roundrobin"], ["roundrobin", "range"], ["range", "roundrobin"]])
    assert {r.protocol_name for r in rs} == {"range"}
    leader = next(r for r in rs if r.members)
    assert sorted(m[2] for m in leader.members) == [b"range", b"range", b"range"]
    # Only roundrobin is common to all: it wins although most prefer range.
    rs = form([["range", "roundrobin"], ["roundrobin"], ["range", "roundrobin"]])
    assert {r.protocol_name for r in rs} == {"roundrobin"}


def test_inconsistent_group_protocol(coord: GroupCoordinator) -> None:
    a = join(coord, protocols=[("range", b"")])
    assert join(coord, protocols=[("roundrobin", b"")]).error_code == InconsistentGroupProtocolError.code
    assert join(coord, protocol_type="connect").error_code == InconsistentGroupProtocolError.code
    assert members_of(coord) == 1
    assert join(coord, a.member_id, protocols=[("sticky", b"")]).error_code == InconsistentGroupProtocolError.code


def test_close_wakes_blocked_joins_and_stops_the_timer(store: MemoryStore) -> None:
    c = GroupCoordinator(store.append, store.read_all, initial_rebalance_delay_ms=60000, group_min_session_timeout_ms=1)
    timer = c._delay_timer._thread  # no broker's timer given: the coordinator runs its own
    assert timer.is_alive()
    with ThreadPoolExecutor(max_workers=1) as ex:
        f = ex.submit(join, c)
        wait_until(lambda: members_of(c) == 1)
        c.close()
        assert result(f).error_code == CoordinatorNotAvailableError.code
    assert not timer.is_alive()
    assert join(c).error_code == CoordinatorNotAvailableError.code


def test_join_timeout_returns_request_timed_out(store: MemoryStore, clock: FakeClock) -> None:
    c = GroupCoordinator(store.append, store.read_all, initial_rebalance_delay_ms=1000, clock=clock, start_timer=False)
    try:
        r = c.join_group("g", "", "a", 10000, 5000, "consumer", [("range", b"")], timeout_s=0.05)
        assert r.error_code == RequestTimedOutError.code and r.member_id.startswith("a-")
        assert members_of(c) == 1
    finally:
        c.close()


def test_raise_for() -> None:
    raise_for(0)
    with pytest.raises(IllegalGenerationError):
        raise_for(IllegalGenerationError.code)
    with pytest.raises(RebalanceInProgressError):
        raise_for(RIP)


# -- offsets --------------------------------------------------------------------------------


def test_commit_and_fetch_round_trip(coord: GroupCoordinator, pool: ThreadPoolExecutor) -> None:
    a, b = form_pair(coord, pool)
    codes = coord.commit_offsets("g", 2, a.member_id, {("t", 0): (10, "m0"), ("t", 1): (20, None)})
    assert codes == {("t", 0): 0, ("t", 1): 0}
    assert coord.commit_offsets("g", 2, b.member_id, {("u", 3): (5, "")}) == {("u", 3): 0}
    assert coord.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2)]) == {
        ("t", 0): (10, "m0", 0),
        ("t", 1): (20, "", 0),
        ("t", 2): (-1, "", 0),
    }
    assert coord.fetch_offsets("g") == {("t", 0): (10, "m0", 0), ("t", 1): (20, "", 0), ("u", 3): (5, "", 0)}
    assert coord.fetch_offsets("unknown", [("t", 0)]) == {("t", 0): (-1, "", 0)}
    assert coord.commit_offsets("g", 2, a.member_id, {("t", 0): (11, "")}) == {("t", 0): 0}
    assert coord.fetch_offsets("g", [("t", 0)]) == {("t", 0): (11, "", 0)}


def test_commit_errors(coord: GroupCoordinator, pool: ThreadPoolExecutor) -> None:
    a, b = form_pair(coord, pool)
    tp = {("t", 0): (1, "")}
    assert coord.commit_offsets("g", 1, a.member_id, tp) == {("t", 0): IllegalGenerationError.code}
    assert coord.commit_offsets("g", 2, "ghost", tp) == {("t", 0): UnknownMemberIdError.code}
    # A standalone commit is refused while the group has members.
    assert coord.commit_offsets("g", -1, "", tp) == {("t", 0): UnknownMemberIdError.code}
    assert coord.commit_offsets("", -1, "", tp) == {("t", 0): InvalidGroupIdError.code}
    assert coord.commit_offsets("fresh", 3, "m", tp) == {("t", 0): IllegalGenerationError.code}
    big = {("t", 0): (1, "x" * 5000), ("t", 1): (2, "ok")}
    assert coord.commit_offsets("g", 2, a.member_id, big) == {("t", 0): OffsetMetadataTooLargeError.code, ("t", 1): 0}
    assert coord.fetch_offsets("g", [("t", 0)]) == {("t", 0): (-1, "", 0)}
    coord.heartbeat("g", 2, a.member_id)
    join_b = pool.submit(join, coord, b.member_id, client_id="b", protocols=[("range", b"new")])
    wait_until(lambda: coord.describe_group("g").state == gc.PREPARING_REBALANCE)
    # During PreparingRebalance the current generation may still commit (Kafka allows it).
    assert coord.commit_offsets("g", 2, a.member_id, tp) == {("t", 0): 0}
    join(coord, a.member_id, client_id="a")
    result(join_b)
    assert coord.commit_offsets("g", 3, a.member_id, tp) == {("t", 0): RIP}


def test_standalone_commit_creates_an_offsets_only_group(coord: GroupCoordinator) -> None:
    assert coord.commit_offsets("simple", -1, "", {("t", 0): (42, "meta")}) == {("t", 0): 0}
    assert coord.fetch_offsets("simple", [("t", 0)]) == {("t", 0): (42, "meta", 0)}
    assert coord.list_groups() == [("simple", "")]
    desc = coord.describe_group("simple")
    assert (desc.state, desc.protocol_type, desc.members) == (gc.EMPTY, "", [])
    # An empty group that once had members also takes standalone commits.
    a = join(coord)
    coord.sync_group("g", 1, a.member_id, {})
    coord.leave_group("g", a.member_id)
    assert coord.commit_offsets("g", -1, "", {("t", 0): (7, "")}) == {("t", 0): 0}


def test_commits_are_stored_in_kafkas_format_on_the_groups_partition(
    coord: GroupCoordinator, store: MemoryStore
) -> None:
    coord.commit_offsets("my-group", -1, "", {("topic", 4): (99, "hello")})
    p = schema.partition_for_group("my-group", 50)
    assert coord.partition_for("my-group") == p
    assert list(store.partitions) == [p]
    [(key, value)] = store.partitions[p]
    assert key == schema.encode_offset_commit_key("my-group", "topic", 4)
    assert value is not None and value[:2] == b"\x00\x03"
    decoded = schema.decode_offset_commit_value(value)
    assert (decoded.offset, decoded.metadata, decoded.leader_epoch) == (99, "hello", -1)
    assert abs(decoded.commit_timestamp - time.time() * 1000) < 60_000


def test_append_failures_become_error_codes(coord: GroupCoordinator, store: MemoryStore) -> None:
    store.fail = OSError("disk gone")
    assert coord.commit_offsets("g", -1, "", {("t", 0): (1, "")}) == {("t", 0): CoordinatorNotAvailableError.code}
    assert coord.fetch_offsets("g", [("t", 0)]) == {("t", 0): (-1, "", 0)}
    assert coord.list_groups() == []
    store.fail = NotLeaderOrFollowerError()
    assert coord.commit_offsets("g", -1, "", {("t", 0): (1, "")}) == {("t", 0): NotCoordinatorError.code}


def test_failed_group_store_at_sync_restarts_the_rebalance(coord: GroupCoordinator, store: MemoryStore) -> None:
    a = join(coord)
    store.fail = OSError("disk gone")
    assert coord.sync_group("g", 1, a.member_id, {a.member_id: b"x"}).error_code == CoordinatorNotAvailableError.code
    assert coord.describe_group("g").state == gc.PREPARING_REBALANCE
    store.fail = None
    r = join(coord, a.member_id)
    assert r.generation_id == 2
    assert coord.sync_group("g", 2, a.member_id, {a.member_id: b"x"}) == (0, b"x")


def test_restart_reloads_offsets_and_group_metadata(
    coord: GroupCoordinator, store: MemoryStore, pool: ThreadPoolExecutor, clock: FakeClock
) -> None:
    a, b = form_pair(coord, pool)
    coord.commit_offsets("g", 2, a.member_id, {("t", 0): (10, "x"), ("t", 1): (20, "")})
    coord.commit_offsets("g", 2, a.member_id, {("t", 0): (15, "y")})
    coord.commit_offsets("simple", -1, "", {("s", 0): (3, "")})
    coord.close()

    c2 = GroupCoordinator(store.append, store.read_all, clock=clock, group_min_session_timeout_ms=1, start_timer=False)
    try:
        c2.load()
        assert c2.fetch_offsets("g") == {("t", 0): (15, "y", 0), ("t", 1): (20, "", 0)}
        assert c2.fetch_offsets("simple") == {("s", 0): (3, "", 0)}
        assert c2.list_groups() == [("g", "consumer"), ("simple", "")]
        desc = c2.describe_group("g")
        assert (desc.state, desc.protocol) == (gc.STABLE, "range")
        assert sorted((m.member_id, m.metadata, m.assignment) for m in desc.members) == sorted(
            [(a.member_id, b"meta-a", b"for-a"), (b.member_id, b"meta-b", b"for-b")]
        )
        # The members carry on in their generation; a silent one expires after its session.
        assert c2.heartbeat("g", 2, a.member_id) == 0
        assert c2.commit_offsets("g", 2, b.member_id, {("t", 1): (21, "")}) == {("t", 1): 0}
        clock.advance(6.0)
        assert c2.heartbeat("g", 2, a.member_id) == 0
        clock.advance(4.5)
        c2.tick()
        assert c2.describe_group("g").state == gc.PREPARING_REBALANCE
        assert [m.member_id for m in c2.describe_group("g").members] == [a.member_id]
    finally:
        c2.close()


def test_delete_writes_tombstones_that_survive_a_restart(
    coord: GroupCoordinator, store: MemoryStore, pool: ThreadPoolExecutor
) -> None:
    a, b = form_pair(coord, pool)
    coord.commit_offsets("g", 2, a.member_id, {("t", 0): (10, "")})
    coord.commit_offsets("keep", -1, "", {("t", 0): (1, "")})
    assert coord.delete_groups(["g", "missing", ""]) == {
        "g": NonEmptyGroupError.code,
        "missing": GroupIdNotFoundError.code,
        "": InvalidGroupIdError.code,
    }
    coord.leave_group("g", a.member_id)
    coord.leave_group("g", b.member_id)
    assert coord.describe_group("g").state == gc.EMPTY
    assert coord.delete_groups(["g"]) == {"g": 0}
    assert coord.describe_group("g").state == gc.DEAD
    assert coord.fetch_offsets("g") == {}
    assert coord.delete_groups(["g"]) == {"g": GroupIdNotFoundError.code}
    tail = store.partitions[coord.partition_for("g")][-2:]
    assert tail == [(schema.encode_offset_commit_key("g", "t", 0), None), (schema.encode_group_metadata_key("g"), None)]

    c2 = GroupCoordinator(store.append, store.read_all, start_timer=False)
    try:
        c2.load()
        assert c2.list_groups() == [("keep", "")]
        assert c2.fetch_offsets("g", [("t", 0)]) == {("t", 0): (-1, "", 0)}
    finally:
        c2.close()


def test_list_groups(coord: GroupCoordinator) -> None:
    assert coord.list_groups() == []
    join(coord, group="g1")
    join(coord, group="g2", protocol_type="connect")
    assert coord.list_groups() == [("g1", "consumer"), ("g2", "connect")]
    assert coord.describe_group("nope") == gc.GroupDescription(0, gc.DEAD, "", "", [])


# -- protocol versions: member ids, static members, commit timestamps ---------------------------------


def _join_async(c: GroupCoordinator, member_id: str = "", instance: Optional[str] = None,
                require: bool = True, skip: bool = False) -> "Future[JoinResult]":
    future: "Future[JoinResult]" = Future()
    c.join_group_async("g", member_id, "client", 10000, 5000, "consumer", [("range", b"m")],
                       group_instance_id=instance, deliver=future.set_result,
                       require_known_member_id=require, supports_skip_assignment=skip)
    return future


def test_a_pending_member_holds_the_join_phase_until_it_expires(coord: GroupCoordinator, clock: FakeClock) -> None:
    from pylogq.errors import MemberIdRequiredError

    a = join(coord)
    assert coord.sync_group("g", 1, a.member_id, {a.member_id: b""}).error_code == 0
    pending = _join_async(coord).result(timeout=DEADLINE_S)
    assert pending.error_code == MemberIdRequiredError.code and pending.member_id.startswith("client-")
    assert coord.describe_group("g").state == gc.STABLE  # no rebalance for a pending member
    # A rebalance now waits for the pending member's second join too.
    a_again = _join_async(coord, a.member_id)
    assert coord.describe_group("g").state == gc.PREPARING_REBALANCE and not a_again.done()
    clock.advance(10.0)  # the pending member's session timeout
    coord.tick()
    assert a_again.result(timeout=DEADLINE_S).generation_id == 2
    assert join(coord, pending.member_id).error_code == UnknownMemberIdError.code


def test_a_static_member_replacing_itself_fences_a_blocked_sync(coord: GroupCoordinator) -> None:
    from pylogq.errors import FencedInstanceIdError

    leader = join(coord, client_id="other")
    assert coord.sync_group("g", 1, leader.member_id, {leader.member_id: b""}).error_code == 0
    static = _join_async(coord, instance="i")  # static: no second join, and a rebalance
    assert join(coord, leader.member_id).generation_id == 2
    first = static.result(timeout=DEADLINE_S)
    assert first.error_code == 0 and first.member_id.startswith("i-") and first.leader_id == leader.member_id
    blocked: "Future[int]" = Future()
    coord.sync_group_async("g", 2, first.member_id, group_instance_id="i",
                           deliver=lambda r: blocked.set_result(r.error_code))
    assert not blocked.done()  # a follower waits for the leader's assignment
    replaced = _join_async(coord, instance="i")  # the same instance, restarted
    assert blocked.result(timeout=DEADLINE_S) == FencedInstanceIdError.code
    assert coord.describe_group("g").state == gc.PREPARING_REBALANCE
    assert join(coord, leader.member_id).generation_id == 3
    result = replaced.result(timeout=DEADLINE_S)
    assert result.error_code == 0 and result.member_id not in (first.member_id, "")
    assert coord.heartbeat("g", 3, first.member_id, "i") == FencedInstanceIdError.code
    assert coord.heartbeat("g", 3, result.member_id, "i") == 0


def test_commit_timestamps_and_group_not_found(coord: GroupCoordinator) -> None:
    codes = coord.commit_offsets("g", -1, "", {("t", 0): (5, None), ("t", 1): (6, "x")}, {("t", 0): 3},
                                 commit_timestamps={("t", 0): 1234, ("t", 1): -1})
    assert codes == {("t", 0): 0, ("t", 1): 0}
    code, found = coord.fetch_committed("g", [("t", 0), ("t", 1), ("t", 2)])
    assert code == 0
    assert [tuple(found[("t", p)]) for p in range(3)] == [(5, 3, "", 0), (6, -1, "x", 0), (-1, -1, "", 0)]
    group = coord._groups["g"]
    assert group.offsets[("t", 0)].commit_timestamp == 1234
    assert abs(group.offsets[("t", 1)].commit_timestamp - time.time() * 1000) < 60_000
    assert coord.commit_offsets("other", 1, "m", {("t", 0): (1, None)}) == {("t", 0): IllegalGenerationError.code}
    assert coord.commit_offsets("other", 1, "m", {("t", 0): (1, None)}, unknown_group_not_found=True) == {
        ("t", 0): GroupIdNotFoundError.code}


def test_listed_groups_filter_by_state_and_type(coord: GroupCoordinator) -> None:
    a = join(coord)
    coord.sync_group("g", 1, a.member_id, {a.member_id: b""})
    coord.commit_offsets("simple", -1, "", {("t", 0): (1, None)})
    assert [(g.group_id, g.state, g.group_type) for g in coord.listed_groups()] == [
        ("g", gc.STABLE, "classic"), ("simple", gc.EMPTY, "classic")]
    assert [g.group_id for g in coord.listed_groups(states=["STABLE"])] == ["g"]
    assert [g.group_id for g in coord.listed_groups(types=["consumer"])] == []
    assert coord.list_groups() == [("g", "consumer"), ("simple", "")]
