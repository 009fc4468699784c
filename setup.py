"""Build the Cython kernels of ube-stream.

Every ``cython_src/_name.pyx`` compiles to the private extension module
``ube_stream._name`` (C++, so kernels may use ``libcpp`` containers).
Header-only helpers live in ``cython_src/*.pxd`` and are found through the
include path.  ``UBE_CYTHON_DEBUG=1`` turns bounds checks and wrap-around on
and compiles with ``-O0 -g`` for debugging a kernel.
"""
import glob
import os
import sys

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
DEBUG = os.environ.get("UBE_CYTHON_DEBUG", "") not in ("", "0")


def extensions():
    from Cython.Build import cythonize

    if sys.platform == "win32":
        compile_args = ["/O2", "/std:c++17"]
    elif DEBUG:
        compile_args = ["-O0", "-g", "-std=c++17"]
    else:
        compile_args = ["-O3", "-std=c++17"]
    modules = []
    for pyx in sorted(glob.glob(os.path.join("cython_src", "_*.pyx"))):
        name = os.path.splitext(os.path.basename(pyx))[0]
        modules.append(
            Extension(
                f"ube_stream.{name}",
                [pyx],
                language="c++",
                include_dirs=["cython_src"],
                extra_compile_args=compile_args,
            )
        )
    directives = {
        "language_level": 3,
        "boundscheck": DEBUG,
        "wraparound": DEBUG,
        "initializedcheck": DEBUG,
        "cdivision": True,
        "embedsignature": True,
    }
    return cythonize(
        modules,
        include_path=["cython_src"],
        compiler_directives=directives,
        nthreads=int(os.environ.get("UBE_BUILD_JOBS", "0")) or None,
    )


setup(ext_modules=extensions())
