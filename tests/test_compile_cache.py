"""The persistent compilation cache is split by host CPU, so no machine loads another's code."""

from pathlib import Path

from smoothloco.train import compile_cache


def test_each_host_cpu_gets_its_own_cache_folder(monkeypatch, tmp_path: Path):
    here = compile_cache.host_compile_cache(str(tmp_path))
    assert Path(here).parent == tmp_path
    assert compile_cache.host_compile_cache(str(tmp_path)) == here  # stable across calls
    monkeypatch.setattr(compile_cache, "_cpu_description", lambda: "model name\t: another CPU\nflags\t\t: fpu sse2")
    assert compile_cache.host_compile_cache(str(tmp_path)) != here


def test_an_empty_cache_folder_keeps_the_cache_off():
    assert compile_cache.host_compile_cache("") == ""
