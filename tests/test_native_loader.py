"""The C kernels cannot be fed bad input, and a bad build or cache is a fallback, never a crash
(engine/native.py): shape checks before every call, the cached library checked by its digest and
rebuilt when damaged, a private absolute cache folder, $CC with its arguments, a hung compiler
killed with its children, interrupted builds cleaned up, clang."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
import time
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slca_grpo.engine import native


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A fresh once-per-process build into its own cache folder (all restored afterwards)."""
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setattr(native, "_library", None)
    monkeypatch.setenv("SLCA_GRPO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SLCA_NATIVE_CFLAGS", raising=False)
    monkeypatch.delenv("CC", raising=False)
    return tmp_path / "cache" / "native"


def _again(monkeypatch) -> None:
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setattr(native, "_library", None)


def _unavailable(match: str):
    return pytest.warns(RuntimeWarning, match=f"C decode kernels are unavailable.*{match}")


def _inputs(rows=2, kv_heads=1, group=2, dim=8, prompts=1, prefix=4, own=3):
    query = torch.randn(rows, kv_heads, group, dim)
    prefix_keys = torch.randn(prompts, kv_heads, prefix, dim)
    keys = torch.randn(rows, kv_heads, own, dim)
    return [query, prefix_keys, prefix_keys.clone(), torch.zeros(rows, dtype=torch.long), keys, keys.clone()]


MISMATCHES = {
    "prefix values longer": lambda t: t.__setitem__(2, torch.randn(1, 1, 2_000, 8)),
    "prefix values one": lambda t: t.__setitem__(2, torch.randn(1, 1, 1, 8)),
    "prefix dim 16": lambda t: (t.__setitem__(1, torch.randn(1, 1, 4, 16)), t.__setitem__(2, torch.randn(1, 1, 4, 16))),
    "prefix heads 2": lambda t: (t.__setitem__(1, torch.randn(1, 2, 4, 8)), t.__setitem__(2, torch.randn(1, 2, 4, 8))),
    "keys rows 1": lambda t: (t.__setitem__(4, torch.randn(1, 1, 3, 8)), t.__setitem__(5, torch.randn(1, 1, 3, 8))),
    "values shorter": lambda t: t.__setitem__(5, torch.randn(2, 1, 2, 8)),
    "row_prompt short": lambda t: t.__setitem__(3, torch.zeros(1, dtype=torch.long)),
    "row_prompt out of range": lambda t: t.__setitem__(3, torch.tensor([0, 5])),
    "row_prompt negative": lambda t: t.__setitem__(3, torch.tensor([-1, 0])),
    "row_prompt float": lambda t: t.__setitem__(3, torch.zeros(2)),
    "query 3-D": lambda t: t.__setitem__(0, torch.randn(2, 2, 8)),
}


@settings(max_examples=len(MISMATCHES) * 2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(MISMATCHES)), masked=st.booleans())
def test_inputs_that_do_not_fit_together_are_a_value_error_never_a_crash(kind, masked) -> None:
    tensors = _inputs()
    MISMATCHES[kind](tensors)
    width = tensors[1].shape[2] + tensors[4].shape[2] if tensors[1].dim() == 4 and tensors[4].dim() == 4 else 7
    mask = torch.ones(2, 1, 1, width, dtype=torch.bool) if masked else None
    with pytest.raises(ValueError, match="prefix_decode_attention"):
        native.prefix_decode_attention(*tensors, mask, 1.0)


def test_a_mask_of_the_wrong_width_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"mask must be \[2, 1, 1, 7\]"):
        native.prefix_decode_attention(*_inputs(), torch.ones(2, 1, 1, 9, dtype=torch.bool), 1.0)


def test_inputs_that_fit_still_run() -> None:
    if native.library() is None:
        pytest.skip("the C kernels could not be built here")
    assert native.prefix_decode_attention(*_inputs(), None, 1.0) is not None


def test_an_input_width_of_zero_gives_the_bias() -> None:
    panels = native.pack_panels(torch.zeros(5, 0))
    if panels is None:
        pytest.skip("the C kernels could not be built here")
    bias = torch.arange(5.0)
    assert torch.equal(native.small_product(torch.zeros(3, 0), panels, bias), bias.expand(3, 5))
    assert torch.equal(native.small_product(torch.zeros(3, 0), panels, None), torch.zeros(3, 5))


def test_a_damaged_cached_library_is_rebuilt_not_loaded(fresh, monkeypatch) -> None:
    # Built without loading it here: a library this process has mapped cannot be damaged under it.
    compiler = native._compiler()
    built = native._build(compiler)
    record = built.with_suffix(".sha256")
    assert record.read_text() == native._digest(built)
    whole = built.read_bytes()
    built.write_bytes(whole[:8192])  # loaded, a truncated library kills the process with SIGBUS
    assert native._build(compiler) == built and built.read_bytes() == whole
    record.unlink()  # a build interrupted between the library and its record: built again
    assert native._build(compiler) == built and record.read_text() == native._digest(built)
    built.write_bytes(b"")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native.library() is not None  # rebuilt, then loaded
    assert built.read_bytes() == whole


def test_the_cache_folder_must_be_absolute_and_private(fresh, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("SLCA_GRPO_CACHE", "relative/cache")
    with _unavailable("not absolute"):
        assert native.library() is None
    monkeypatch.delenv("SLCA_GRPO_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # ignored, as the XDG rules ask
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert native.cache_dir() == tmp_path / "home" / ".cache" / "slca-grpo" / "native"
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("SLCA_GRPO_CACHE", str(shared))
    (shared / "native").mkdir()
    (shared / "native").chmod(0o777)
    _again(monkeypatch)
    with _unavailable("writable by others"):
        assert native.library() is None


def test_loader_errors_are_one_warning_and_a_fallback(fresh, monkeypatch) -> None:
    monkeypatch.setenv("SLCA_NATIVE_CFLAGS", '"x')
    with _unavailable("SLCA_NATIVE_CFLAGS cannot be read"):
        assert native.library() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        assert native.library() is None
    monkeypatch.delenv("SLCA_NATIVE_CFLAGS")
    _again(monkeypatch)
    monkeypatch.setenv("CC", "no-such-compiler-here")
    with _unavailable("no-such-compiler-here not found"):  # not silently replaced by another
        assert native.library() is None


def _script(path, body: str):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_cc_keeps_its_arguments_and_a_library_that_does_not_load_is_refused(fresh, monkeypatch, tmp_path) -> None:
    log = tmp_path / "args"
    wrapper = _script(tmp_path / "wrap", f'echo "$@" >> {log}\nexec gcc "$@"\n')
    monkeypatch.setenv("CC", f"{wrapper} -DSLCA_MARKER=1")
    assert native.library() is not None
    assert "-DSLCA_MARKER=1" in log.read_text()
    # A compiler that writes a library without the kernels' symbols.
    empty = tmp_path / "empty.c"
    empty.write_text("int nothing(void) { return 0; }\n")
    liar = _script(
        tmp_path / "liar",
        'case "$*" in *--version*) gcc --version; exit 0;; esac\n'
        'prev=""; for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done\n'
        f'exec gcc -shared -fPIC -o "$out" {empty}\n',
    )
    monkeypatch.setenv("CC", str(liar))
    _again(monkeypatch)
    with _unavailable("does not load"):
        assert native.library() is None
    assert not list(fresh.glob("tmp*"))


def test_a_hung_compiler_is_killed_with_its_children(fresh, monkeypatch, tmp_path) -> None:
    child = tmp_path / "child.pid"
    hung = _script(
        tmp_path / "hung",
        f'case "$*" in *--version*) echo hung 1.0; exit 0;; esac\nsleep 300 &\necho $! > {child}\nwait\n',
    )
    monkeypatch.setenv("CC", str(hung))
    monkeypatch.setattr(native, "BUILD_SECONDS", 2)
    with _unavailable("ran past 2 s and was stopped"):
        assert native.library() is None
    pid = int(child.read_text())
    for _ in range(50):  # the kill is sent; the kernel reaps the orphan shortly after
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the compiler's child survived its time-out")
    assert not list(fresh.glob("tmp*"))


def test_partial_files_of_an_interrupted_build_are_removed(fresh, monkeypatch) -> None:
    fresh.mkdir(parents=True, mode=0o700)
    stale, recent = fresh / "tmpabc123.so", fresh / "tmpdef456.so"
    for leftover in (stale, recent):
        leftover.write_bytes(b"half a library")
    old = time.time() - 10 * native.STALE_SECONDS
    os.utime(stale, (old, old))
    assert native.library() is not None
    assert not stale.exists() and recent.exists()  # a build in progress elsewhere is left alone


@pytest.mark.skipif(importlib.util.find_spec("ziglang") is None, reason="clang (the ziglang package) is not installed")
def test_clang_builds_both_kernels_and_they_agree_with_pytorch(fresh, monkeypatch) -> None:
    monkeypatch.setenv("CC", f"{sys.executable} -m ziglang cc")
    kernels = native.library()
    assert kernels is not None
    query, prefix_keys, prefix_values, row_prompt, keys, values = _inputs(rows=3, group=2, dim=16, prefix=5, own=2)
    out = native.prefix_decode_attention(query, prefix_keys, prefix_values, row_prompt, keys, values, None, 0.25)
    all_keys = torch.cat([prefix_keys[row_prompt], keys], dim=2)
    all_values = torch.cat([prefix_values[row_prompt], values], dim=2)
    expected = torch.softmax(query @ all_keys.transpose(-1, -2) * 0.25, dim=-1) @ all_values
    assert torch.allclose(out, expected, atol=1e-5)
    cache = [t.bfloat16() for t in (prefix_keys, prefix_values, keys, values)]
    out = native.prefix_decode_attention(query, *cache[:2], row_prompt, *cache[2:], None, 0.25)
    all_keys, all_values = (torch.cat([c[row_prompt], own], dim=2).float() for c, own in zip(cache[:2], cache[2:]))
    scores = query.bfloat16().float() @ all_keys.transpose(-1, -2) * 0.25
    assert torch.allclose(out.float(), torch.softmax(scores, dim=-1) @ all_values, rtol=2**-8, atol=1e-5)
    weight, bias, x = torch.randn(37, 24), torch.randn(37), torch.randn(5, 24)
    assert torch.allclose(native.small_product(x, native.pack_panels(weight), bias), x @ weight.T + bias, atol=1e-5)


def test_switched_off_by_the_run_it_is_not_built(fresh, monkeypatch) -> None:
    monkeypatch.setattr(native, "_switched_off", False)
    native.switch(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native.library() is None
    assert not fresh.exists()


@pytest.mark.parametrize("value", ["n", "disable", "nope", "-1", "2"])
def test_a_switch_that_is_neither_on_nor_off_is_refused_in_one_line(monkeypatch, value) -> None:
    from slca_grpo.config import ConfigError
    from slca_grpo.engine import use_native_kernels

    monkeypatch.setattr(native, "_switched_off", False)  # restored after the test, whatever it sets
    monkeypatch.setenv("SLCA_NATIVE_KERNELS", value)
    with pytest.raises(ConfigError, match=r"SLCA_NATIVE_KERNELS must be 1 or 0 .*got '"):
        native.enabled()
    with pytest.raises(ConfigError, match="SLCA_NATIVE_KERNELS"):
        use_native_kernels(True)  # what a run calls before any work


@pytest.mark.parametrize(("value", "on"), [("1", True), (" Yes ", True), ("", True), ("0", False), ("OFF", False)])
def test_the_switch_reads_on_and_off_words(monkeypatch, value, on) -> None:
    monkeypatch.setattr(native, "_switched_off", False)
    monkeypatch.setenv("SLCA_NATIVE_KERNELS", value)
    assert native.enabled() is on
