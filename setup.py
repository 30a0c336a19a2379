"""Build the compiled kernels in pylogq/_core.

Environment:
  PYLOGQ_DEBUG=1       build with line tracing, C assertions and -O0 (coverage, gdb)
  PYLOGQ_BUILD_ONLY=a,b  build only the named kernels (a development shortcut)
"""

import os

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("PYLOGQ_DEBUG", "") not in ("", "0")
ONLY = {n for n in os.environ.get("PYLOGQ_BUILD_ONLY", "").split(",") if n}

SRC = "pylogq/_core/src/"
# kernel -> the C sources it links besides its .pyx
KERNELS = {
    "_crc": [SRC + "crc.c"],
    "_records": [SRC + "crc.c"],
    "_index": [],
    "_offset_map": [SRC + "murmur3.c"],
}

compile_args = ["-O0", "-g"] if DEBUG else ["-O3"]
compile_args += ["-std=c11", "-Wno-unused-function"]
macros = [] if DEBUG else [("NDEBUG", "1")]
directives = {"language_level": "3", "embedsignature": True}
if DEBUG:
    directives.update(linetrace=True, profile=True)
    macros.append(("CYTHON_TRACE_NOGIL", "1"))

extensions = [
    Extension(
        "pylogq._core." + name,
        ["pylogq/_core/%s.pyx" % name] + sources,
        include_dirs=[SRC],
        extra_compile_args=compile_args,
        define_macros=macros,
    )
    for name, sources in KERNELS.items()
    if (not ONLY or name in ONLY) and os.path.exists("pylogq/_core/%s.pyx" % name)
]

setup(ext_modules=cythonize(extensions, compiler_directives=directives, quiet=True))
