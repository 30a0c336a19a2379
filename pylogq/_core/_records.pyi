"""Type stubs for the compiled v2 record kernels (same names as pylogq.records.default_records)."""

from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

from ..errors import RecordProblem


_Buffer = Union[bytes, bytearray, memoryview, Any]
_Header = Tuple[str, Optional[bytes]]
_HeaderIn = Tuple[Union[str, bytes], Optional[_Buffer]]

DEFAULT_BATCH_SIZE: int
COLUMN_NAMES: Tuple[str, ...]

class Record:
    offset: int
    timestamp: int
    timestamp_type: int
    key: Optional[bytes]
    value: Optional[bytes]
    attributes: int
    is_control: bool
    def __init__(
        self,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: Optional[bytes],
        value: Optional[bytes],
        headers: Sequence[_Header],
        attributes: int = ...,
        is_control: bool = ...,
    ) -> None: ...
    @property
    def headers(self) -> List[_Header]: ...
    @property
    def control_type(self) -> int: ...

class RecordBatch:
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
    check_crc: bool
    def __init__(self, buffer: _Buffer, position: int = ..., check_crc: bool = ...) -> None: ...
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
    def has_delete_horizon(self) -> bool: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def first_timestamp(self) -> int: ...
    @property
    def last_sequence(self) -> int: ...
    def validate_crc(self) -> bool: ...
    def records(self) -> List[Record]: ...
    def validate(self) -> int: ...
    def __iter__(self) -> Iterator[Record]: ...

class RecordBatchBuilder:
    compression_type: int
    base_offset: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    timestamp_type: int
    batch_size: int
    max_record_size: int
    def __init__(
        self,
        compression_type: Union[int, str] = ...,
        *,
        base_offset: int = ...,
        partition_leader_epoch: int = ...,
        producer_id: int = ...,
        producer_epoch: int = ...,
        base_sequence: int = ...,
        is_transactional: bool = ...,
        is_control: bool = ...,
        timestamp_type: int = ...,
        batch_size: int = ...,
    ) -> None: ...
    def append(
        self,
        offset: int,
        timestamp: Optional[int],
        key: Optional[_Buffer],
        value: Optional[_Buffer],
        headers: Optional[Sequence[_HeaderIn]] = ...,
    ) -> int: ...
    def append_next(
        self,
        timestamp: Optional[int],
        key: Optional[_Buffer],
        value: Optional[_Buffer],
        headers: Optional[Sequence[_HeaderIn]] = ...,
    ) -> int: ...
    def size(self) -> int: ...
    @property
    def record_count(self) -> int: ...
    def build(self) -> bytearray: ...

def build_batch(
    values: Sequence[Optional[_Buffer]],
    keys: Optional[Sequence[Optional[_Buffer]]] = ...,
    timestamps: Union[None, int, Sequence[int]] = ...,
    headers: Optional[Sequence[Optional[Sequence[_HeaderIn]]]] = ...,
    compression_type: Union[int, str] = ...,
    **kwargs: int,
) -> bytearray: ...
def decode_headers(data: _Buffer, position: int, count: int) -> List[_Header]: ...
def scan_entries(buffer: _Buffer, position: int = ..., check_crc: bool = ...
                 ) -> Tuple[int, int, Optional[str], Optional[RecordProblem]]: ...
def validate_batches(buffer: _Buffer, require_keys: bool = ...) -> Tuple[List[Tuple[int, ...]], int, int]: ...
def patch_offsets(
    buffer: Union[bytearray, memoryview],
    headers: Sequence[Sequence[int]],
    base_offset: int,
    partition_leader_epoch: int = ...,
    log_append_time: Optional[int] = ...,
) -> List[Tuple[int, ...]]: ...
def assign_offsets(
    buffer: Union[bytearray, memoryview],
    base_offset: int,
    partition_leader_epoch: int = ...,
    log_append_time: Optional[int] = ...,
) -> Tuple[int, int, int, int, int, int]: ...
def decode_columns(
    buffer: _Buffer,
    check_crc: bool = ...,
    skip_control: bool = ...,
    start_offset: Optional[int] = ...,
    end_offset: Optional[int] = ...,
) -> Tuple[Any, ...]: ...
