"""Hand-framed Fetch responses equal the generic codec's bytes.

``frame_fetch_response`` writes FetchResponse v0-v17 around file regions so the
records can go out with ``sendfile``; joined (regions read in place) its parts
must be byte for byte what the response header (v0, or v1 from the flexible v12)
+ the FetchResponse table encode, for any mix of topics (by name below v13, by id
from v13), errors, empty, small and large regions, in-memory (down-converted)
records, preferred read replicas (v11+), and isolation level.
"""

from __future__ import annotations

import io
import os
import struct
import tempfile
import uuid
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq.cluster.contract import FetchResult
from pylogq.protocol import RESPONSE_HEADER, RESPONSES, Writer, header_versions
from pylogq.cluster.contract import RecordBytes
from pylogq.server.fetch import frame_fetch_response
from pylogq.storage.segment import FileRegion

FETCH = 1
FILE_SIZE = 96 * 1024  # large enough for regions past the sendfile threshold


@pytest.fixture(scope="module")
def segment_file() -> Iterator[Tuple[io.FileIO, bytes]]:
    """A file of random bytes standing in for a segment, with its contents."""
    data = os.urandom(FILE_SIZE)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "00000000000000000000.log")
        with open(path, "wb") as f:
            f.write(data)
        handle = io.FileIO(path, "r")
        try:
            yield handle, data
        finally:
            handle.close()


int16 = st.integers(-(1 << 15), (1 << 15) - 1)
int32 = st.integers(-(1 << 31), (1 << 31) - 1)
int64 = st.integers(-(1 << 63), (1 << 63) - 1)
# Regions: None (an error partition), empty, below the copy threshold, or large; each a
# file region or (the flag) the same bytes held in memory, as down-conversion returns them.
region_spec = st.one_of(
    st.none(),
    st.tuples(st.integers(0, FILE_SIZE), st.just(0), st.booleans()),
    st.integers(1, 4095).flatmap(lambda n: st.tuples(st.integers(0, FILE_SIZE - n), st.just(n), st.booleans())),
    st.integers(4096, FILE_SIZE).flatmap(
        lambda n: st.tuples(st.integers(0, FILE_SIZE - n), st.just(n), st.booleans())),
)
# (index, error code, high watermark, log start, records, preferred read replica: -1 or a broker id)
partition_spec = st.tuples(int32, int16, int64, int64, region_spec, st.integers(-1, (1 << 31) - 1))
topic_spec = st.tuples(st.text(max_size=20), st.uuids(), st.lists(partition_spec, max_size=4))
# Long enough for a compact length of two varint bytes, and a count of partitions as well.
many_partitions = st.lists(partition_spec, min_size=130, max_size=140)


def codec_bytes(correlation_id: int, version: int, throttle_time_ms: int, error_code: int, session_id: int,
                topics: Sequence[Tuple[Any, Sequence[Tuple[int, FetchResult]]]], read_committed: bool,
                contents: bytes) -> bytes:
    """The same response through the generic codec."""
    responses: List[Dict[str, Any]] = []
    for key, partitions in topics:
        out: List[Dict[str, Any]] = []
        for index, result in partitions:
            region = result.records
            if region is None:
                records = b""
            elif isinstance(region, RecordBytes):
                records = region.data
            else:
                assert isinstance(region, FileRegion)
                records = contents[region.position:region.position + len(region)]
            out.append({
                "partition_index": index, "error_code": result.error_code,
                "high_watermark": result.high_watermark, "last_stable_offset": result.high_watermark,
                "log_start_offset": result.log_start_offset,
                "aborted_transactions": [] if read_committed and not result.error_code else None,
                "preferred_read_replica": result.preferred_read_replica, "records": records,
            })
        if version >= 13:
            responses.append({"topic_id": key, "partitions": out})
        else:
            responses.append({"topic": key, "partitions": out})
    w = Writer()
    w.int32(0)
    RESPONSE_HEADER.encode_into(w, {"correlation_id": correlation_id}, header_versions(FETCH, version)[1])
    RESPONSES[FETCH].encode_into(w, {"throttle_time_ms": throttle_time_ms, "error_code": error_code,
                                     "session_id": session_id, "responses": responses}, version)
    data = bytearray(w.getvalue())
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def joined(parts: Sequence[Any]) -> bytes:
    return b"".join(part if isinstance(part, bytes) else part.read() for part in parts)


def build_topics(handle: io.FileIO, contents: bytes, version: int,
                 specs: List[Any]) -> List[Tuple[Any, List[Tuple[int, FetchResult]]]]:
    topics: List[Tuple[Any, List[Tuple[int, FetchResult]]]] = []
    for name, topic_id, partitions in specs:
        results = []
        for index, code, hw, start, region, preferred in partitions:
            records: Any = None
            if region is not None:
                position, length, in_memory = region
                if in_memory:
                    records = RecordBytes(contents[position:position + length])
                else:
                    records = FileRegion(handle, position, length, 0)
            results.append((index, FetchResult(code, hw, start, records, preferred)))
        topics.append((topic_id if version >= 13 else name, results))
    return topics


def check_framing(segment_file: Tuple[io.FileIO, bytes], version: int, correlation_id: int, throttle: int,
                  error_code: int, session_id: int, specs: List[Any], read_committed: bool) -> None:
    handle, contents = segment_file
    topics = build_topics(handle, contents, version, specs)
    parts, total = frame_fetch_response(correlation_id, version, throttle, error_code, session_id, topics,
                                        read_committed=read_committed)
    data = joined(parts)
    assert len(data) == total
    assert data == codec_bytes(correlation_id, version, throttle, error_code, session_id, topics,
                               read_committed, contents)
    # Large file regions stay regions (for sendfile); the fields around them, and records
    # held in memory, are bytes.
    assert all(isinstance(p, (bytes, FileRegion)) for p in parts)
    assert all(isinstance(p, bytes) or len(p) >= 4096 for p in parts)
    assert isinstance(parts[0], bytes)


@settings(max_examples=600, deadline=None)
@given(version=st.integers(0, 17), correlation_id=int32, throttle=int32, error_code=int16, session_id=int32,
       specs=st.lists(topic_spec, max_size=4), read_committed=st.booleans())
def test_framed_fetch_response_equals_the_codec(segment_file: Tuple[io.FileIO, bytes], version: int,
                                                correlation_id: int, throttle: int, error_code: int,
                                                session_id: int, specs: List[Any], read_committed: bool) -> None:
    check_framing(segment_file, version, correlation_id, throttle, error_code, session_id, specs, read_committed)


@settings(max_examples=20, deadline=None)
@given(version=st.sampled_from([3, 11, 12, 13, 17]), name=st.text(min_size=128, max_size=200),
       topic_id=st.uuids(), partitions=many_partitions, read_committed=st.booleans())
def test_long_names_and_many_partitions_take_two_byte_compact_lengths(
        segment_file: Tuple[io.FileIO, bytes], version: int, name: str, topic_id: uuid.UUID,
        partitions: List[Any], read_committed: bool) -> None:
    check_framing(segment_file, version, 7, 0, 0, 0, [(name, topic_id, partitions)], read_committed)


@pytest.mark.parametrize("version", range(18))
def test_large_region_is_passed_through_uncopied(segment_file: Tuple[io.FileIO, bytes], version: int) -> None:
    handle, contents = segment_file
    region = FileRegion(handle, 100, 70000, 0)
    key: Any = uuid.uuid4() if version >= 13 else "t"
    topics = [(key, [(0, FetchResult(0, 5, 0, region))])]
    parts, total = frame_fetch_response(9, version, 0, 0, 0, topics)
    assert any(p is region for p in parts)
    assert joined(parts) == codec_bytes(9, version, 0, 0, 0, topics, False, contents)
    assert total == sum(len(p) for p in parts)


class _FailingRegion(FileRegion):
    """A small region whose disk fails when the answer is framed (EIO)."""

    def read(self) -> bytes:
        raise OSError(5, "Input/output error")


@pytest.mark.parametrize("version", [4, 12, 13, 17])
def test_a_region_that_cannot_be_read_answers_kafka_storage_error(segment_file: Tuple[io.FileIO, bytes],
                                                                    version: int) -> None:
    """The disk failing between the read and the answer: that partition answers
    KAFKA_STORAGE_ERROR with no records (as Kafka answers a read that hit a storage error),
    the others are answered whole, and no exception escapes to the connection."""
    handle, contents = segment_file
    key: Any = uuid.uuid4() if version >= 13 else "t"
    good = FileRegion(handle, 0, 100, 0)
    topics = [(key, [(0, FetchResult(0, 5, 0, _FailingRegion(handle, 100, 200, 0))), (1, FetchResult(0, 7, 0, good))])]
    parts, total = frame_fetch_response(9, version, 0, 0, 0, topics)
    expected = [(key, [(0, FetchResult(56, 5, 0, None)), (1, FetchResult(0, 7, 0, good))])]
    assert joined(parts) == codec_bytes(9, version, 0, 0, 0, expected, False, contents)
    assert total == sum(len(p) for p in parts)


@pytest.mark.parametrize("version", [-1, 18])
def test_versions_outside_0_to_17_are_refused(version: int) -> None:
    with pytest.raises(ValueError, match="v0-v17"):
        frame_fetch_response(1, version, 0, 0, 0, [])


@pytest.mark.parametrize("version, key", [(12, uuid.UUID(int=1)), (13, "t")])
def test_a_topic_named_the_other_way_is_refused(version: int, key: Any) -> None:
    with pytest.raises(TypeError):
        frame_fetch_response(1, version, 0, 0, 0, [(key, [])])
