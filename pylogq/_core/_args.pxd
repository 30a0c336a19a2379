# The argument check the kernels share, compiled into each one that cimports it.

from cpython.number cimport PyNumber_Index


cdef inline object int_arg(object value, str what):
    """``value`` as an int (``operator.index``); InvalidArgumentTypeError naming ``what`` otherwise."""
    if type(value) is int:
        return value
    try:
        return PyNumber_Index(value)
    except TypeError:
        from pylogq.errors import InvalidArgumentTypeError
        raise InvalidArgumentTypeError("%s must be an int, not %r" % (what, value)) from None
