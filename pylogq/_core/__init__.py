"""Compiled kernels (Cython and small C). Import them through pylogq._speedups."""
