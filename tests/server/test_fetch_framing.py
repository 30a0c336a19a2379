"""Hand-framed Fetch responses equal the generic codec's bytes.

``frame_fetch_response`` writes FetchResponse v4-v11 around file regions so the
records can go out with ``sendfile``; joined (regions read in place) its parts
must be byte for byte what RESPONSE_HEADER v0 + the FetchResponse table encode,
for any mix of topics, errors, empty, small and large regions, and isolation level.
"""

from __future__ import annotations

import io
import os
import struct
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq.cluster.contract import FetchResult
from pylogq.protocol import RESPONSE_HEADER, RESPONSES, Writer
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
# Regions: None (an error partition), empty, below the copy threshold, or large.
region_spec = st.one_of(
    st.none(),
    st.tuples(st.integers(0, FILE_SIZE), st.just(0)),
    st.integers(1, 4095).flatmap(lambda n: st.tuples(st.integers(0, FILE_SIZE - n), st.just(n))),
    st.integers(4096, FILE_SIZE).flatmap(lambda n: st.tuples(st.integers(0, FILE_SIZE - n), st.just(n))),
)
partition_spec = st.tuples(int32, int16, int64, int64, region_spec)
topic_spec = st.tuples(st.text(max_size=20), st.lists(partition_spec, max_size=4))


def codec_bytes(correlation_id: int, version: int, throttle_time_ms: int, error_code: int, session_id: int,
                topics: Sequence[Tuple[str, Sequence[Tuple[int, FetchResult]]]], read_committed: bool,
                contents: bytes) -> bytes:
    """The same response through the generic codec."""
    responses: List[Dict[str, Any]] = []
    for name, partitions in topics:
        out = []
        for index, result in partitions:
            region = result.records
            records = b"" if region is None else contents[region.position:region.position + len(region)]
            out.append({
                "partition_index": index, "error_code": result.error_code,
                "high_watermark": result.high_watermark, "last_stable_offset": result.high_watermark,
                "log_start_offset": result.log_start_offset,
                "aborted_transactions": [] if read_committed and not result.error_code else None,
                "preferred_read_replica": -1, "records": records,
            })
        responses.append({"topic": name, "partitions": out})
    w = Writer()
    w.int32(0)
    RESPONSE_HEADER.encode_into(w, {"correlation_id": correlation_id}, 0)
    RESPONSES[FETCH].encode_into(w, {"throttle_time_ms": throttle_time_ms, "error_code": error_code,
                                     "session_id": session_id, "responses": responses}, version)
    data = bytearray(w.getvalue())
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def joined(parts: Sequence[Any]) -> bytes:
    return b"".join(part if isinstance(part, bytes) else part.read() for part in parts)


@settings(max_examples=300, deadline=None)
@given(version=st.integers(4, 11), correlation_id=int32, throttle=int32, error_code=int16, session_id=int32,
       specs=st.lists(topic_spec, max_size=4), read_committed=st.booleans())
def test_framed_fetch_response_equals_the_codec(segment_file: Tuple[io.FileIO, bytes], version: int,
                                                correlation_id: int, throttle: int, error_code: int,
                                                session_id: int, specs: List[Any], read_committed: bool) -> None:
    handle, contents = segment_file
    topics: List[Tuple[str, List[Tuple[int, FetchResult]]]] = []
    for name, partitions in specs:
        results = []
        for index, code, hw, start, region in partitions:
            records: Optional[FileRegion] = None
            if region is not None:
                records = FileRegion(handle, region[0], region[1], 0)
            results.append((index, FetchResult(code, hw, start, records)))
        topics.append((name, results))
    parts, total = frame_fetch_response(correlation_id, version, throttle, error_code, session_id, topics,
                                        read_committed=read_committed)
    data = joined(parts)
    assert len(data) == total
    assert data == codec_bytes(correlation_id, version, throttle, error_code, session_id, topics,
                               read_committed, contents)
    # Large regions stay regions (for sendfile); the fields around them are bytes.
    assert all(isinstance(p, bytes) or len(p) >= 4096 for p in parts)
    assert isinstance(parts[0], bytes)


@pytest.mark.parametrize("version", [4, 5, 7, 11])
def test_large_region_is_passed_through_uncopied(segment_file: Tuple[io.FileIO, bytes], version: int) -> None:
    handle, contents = segment_file
    region = FileRegion(handle, 100, 70000, 0)
    parts, total = frame_fetch_response(9, version, 0, 0, 0, [("t", [(0, FetchResult(0, 5, 0, region))])])
    assert region in parts
    assert joined(parts) == codec_bytes(9, version, 0, 0, 0, [("t", [(0, FetchResult(0, 5, 0, region))])],
                                        False, contents)
    assert total == sum(len(p) for p in parts)


@pytest.mark.parametrize("version", [0, 3, 12, 17])
def test_versions_outside_4_to_11_are_refused(version: int) -> None:
    with pytest.raises(ValueError, match="v4-v11"):
        frame_fetch_response(1, version, 0, 0, 0, [])
