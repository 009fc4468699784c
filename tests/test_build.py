"""The kernels are compiled extension modules, never Python fallbacks."""
import importlib
import importlib.machinery
import subprocess
import sys

import pytest

import ube_stream
from ube_stream import KERNEL_MODULES as KERNEL_NAMES


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_kernel_is_compiled_extension(name):
    module = importlib.import_module(f"ube_stream.{name}")
    assert module.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), module.__file__
    assert not hasattr(module, "__cached__") or module.__cached__ is None


def test_version_is_literal():
    assert ube_stream.__version__.count(".") == 2


def test_import_is_light():
    code = ("import sys, ube_stream; heavy = [m for m in ('torch', 'ray', 'matplotlib', 'datasets', 'pyarrow') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_cli_version():
    out = subprocess.run([sys.executable, "-m", "ube_stream", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"ube-stream {ube_stream.__version__}"
