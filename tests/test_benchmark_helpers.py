"""The benchmarks' shared A/B timing: warm-up untimed, order alternating, medians and ratios."""

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "_common.py"
_spec = importlib.util.spec_from_file_location("benchmarks_common", _PATH)
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)


def test_alternate_warms_up_untimed_then_reverses_the_order_each_round():
    calls: list[str] = []
    reported: list[tuple[str, int]] = []

    def way(name):
        def run():
            calls.append(name)
            return len(calls)

        return run

    seconds, results = common.alternate(
        {"a": way("a"), "b": way("b"), "c": way("c")},
        rounds=3,
        report=lambda name, elapsed, result: reported.append((name, result)),
    )
    assert calls == ["a", "b", "c", "c", "b", "a", "a", "b", "c", "c", "b", "a"]
    assert {name: len(times) for name, times in seconds.items()} == {"a": 3, "b": 3, "c": 3}
    assert all(t >= 0 for times in seconds.values() for t in times)
    assert results == {"a": 12, "b": 11, "c": 10}  # each way's last result
    assert [name for name, _ in reported] == calls[3:]  # the warm-up round is not reported
    assert [result for _, result in reported] == list(range(4, 13))


def test_alternate_needs_a_timed_round():
    with pytest.raises(ValueError, match="at least one timed round"):
        common.alternate({"a": lambda: None}, rounds=0)


def test_print_medians_gives_each_way_its_speed_up_over_the_base(capsys):
    common.print_medians({"slow": [4.0, 2.0, 9.0], "fast": [1.0, 2.0, 1.0]}, base="slow")
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["slow   4.00 s   1.00x", "fast   1.00 s   4.00x"]
