"""The shapes both implementations of the v2 record kernels satisfy.

``pylogq._core._records`` (compiled) and ``pylogq.records.default_records``
(pure Python) define the same classes; these protocols are what callers may
rely on, and the test suite checks each twin against them.
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Protocol, Sequence, Tuple, Union, runtime_checkable

__all__ = [
    "BytesLike", "Header", "RecordProtocol", "RecordBatchProtocol", "RecordBatchBuilderProtocol"
]

Header = Tuple[str, Optional[bytes]]
BytesLike = Union[bytes, bytearray, memoryview]


@runtime_checkable
class RecordProtocol(Protocol):
    offset: int
    timestamp: int
    timestamp_type: int
    key: Optional[bytes]
    value: Optional[bytes]
    attributes: int
    is_control: bool

    @property
    def headers(self) -> List[Header]: ...

    @property
    def control_type(self) -> int: ...


@runtime_checkable
class RecordBatchProtocol(Protocol):
    position: int
    end: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int: ...

    @property
    def compression_type(self) -> int: ...

    @property
    def timestamp_type(self) -> int: ...

    @property
    def is_transactional(self) -> bool: ...

    @property
    def is_control_batch(self) -> bool: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def next_offset(self) -> int: ...

    @property
    def last_sequence(self) -> int: ...

    def validate_crc(self) -> bool: ...

    def validate(self) -> int: ...

    def records(self) -> Sequence[RecordProtocol]: ...

    def __iter__(self) -> Iterator[RecordProtocol]: ...


@runtime_checkable
class RecordBatchBuilderProtocol(Protocol):
    compression_type: int
    batch_size: int

    def append(
        self,
        offset: int,
        timestamp: Optional[int],
        key: Optional[BytesLike],
        value: Optional[BytesLike],
        headers: Optional[Sequence[Tuple[Union[str, bytes], Optional[BytesLike]]]] = None,
    ) -> int: ...

    def append_next(
        self,
        timestamp: Optional[int],
        key: Optional[BytesLike],
        value: Optional[BytesLike],
        headers: Optional[Sequence[Tuple[Union[str, bytes], Optional[BytesLike]]]] = None,
    ) -> int: ...

    def size(self) -> int: ...

    @property
    def record_count(self) -> int: ...

    def build(self) -> bytearray: ...
