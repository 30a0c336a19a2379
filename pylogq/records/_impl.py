"""The v2 record kernels in use: compiled ``pylogq._core._records`` or its twin."""

from .._speedups import compiled
from . import default_records

impl = compiled("_records") or default_records
