"""The pytest-benchmark suites of this folder (``bench_kernels.py``,
``bench_pretokenize.py``) leave their results like every benchmark script:
one record per suite run with ``--benchmark-enable`` (``_record.py``), the
median, fastest and rounds of each test, and its MB/s where it reports one."""
import os

from _record import write_record


def pytest_sessionfinish(session, exitstatus):
    bench = getattr(session.config, "_benchmarksession", None)
    if bench is None or bench.disabled or not bench.benchmarks or exitstatus != 0:
        return
    by_suite = {}
    for b in bench.benchmarks:
        if b.has_error:
            continue
        suite = os.path.splitext(os.path.basename(b.fullname.split("::")[0]))[0]
        by_suite.setdefault(suite, []).append(b)
    for suite, results in by_suite.items():
        rows = [[b.name, b.stats.median * 1e3, b.stats.min * 1e3, b.stats.rounds, b.extra_info.get("MB/s")]
                for b in results]
        write_record(suite, title=f"pytest-benchmark suite {suite}.py", columns=["test", "median (ms)", "min (ms)",
                     "rounds", "MB/s"], rows=rows,
                     argv=["-m", "pytest", f"benchmarks/{suite}.py", "--benchmark-enable"],
                     notes=["run through pytest: the command is `python -m pytest benchmarks/"
                            f"{suite}.py --benchmark-enable`"])
