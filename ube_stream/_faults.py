"""The one fault-injection point of ube-stream (used by the crash tests).  Internal.

Code that commits work unit by unit calls :func:`kill_point` once per unit,
at the moment a crash hurts most (the shard writer after a batch, the remote
writer before its commit PUT, the trainer before a unit's count table is
kept).  In normal use it costs one environment lookup and does nothing.

A test sets ``UBE_TEST_KILL_UNIT="<scope>|<unit_id>|<marker>[|group]"``:
the process that reaches the point with a matching ``scope`` (an output
directory or URL; shell-style wildcards allowed, e.g. ``/x/tok.json.ube-work/*``)
and ``unit_id`` creates ``<marker>`` and SIGKILLs itself, once (when the
marker exists already, the point does nothing, so the retry or rerun runs
normally).  With ``group`` it kills its whole process group instead: the
driver too, as when a whole run is killed.
"""
from __future__ import annotations

import os

__all__ = ["kill_point", "ENV"]

ENV = "UBE_TEST_KILL_UNIT"


def kill_point(scope: str, unit_id: str) -> None:
    """SIGKILL this process (or its group) here when ``$UBE_TEST_KILL_UNIT`` names this point."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    fields = spec.split("|")
    if len(fields) < 3 or fields[1] != unit_id:
        return
    import fnmatch

    if fields[0] != scope and not fnmatch.fnmatchcase(scope, fields[0]):
        return
    try:
        os.close(os.open(fields[2], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    import signal

    if fields[3:] == ["group"]:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
