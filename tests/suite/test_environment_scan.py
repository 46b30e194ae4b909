"""distval_suite/environment.py's fast search for the names a file reads: exactly what the regex alone finds, on any
bytes, any bounds and across the chunks it searches in (the regex tried only where a family's prefix occurs)."""

from __future__ import annotations

import mmap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distval_suite import environment

# Pieces that make names, near-names and their borders likely: every family, the ones that contain another
# (TORCHELASTIC, PYTORCH, CUDNN), word characters on either side, NUL and punctuation between strings.
PIECES = [p.encode() for p in environment.FAMILIES] + [b"_", b"A", b"Z9", b"a", b"x_", b"\0", b" ", b"-", b"NCCL_ALGO", b"__"]
BYTES = st.lists(st.sampled_from(PIECES), max_size=60).map(b"".join)


def _findall(data: bytes, start: int, end: int) -> set[str]:
    return {name.decode() for name in environment.NAME.findall(data, start, end)}


@settings(max_examples=400, deadline=None, derandomize=True)
@given(data=BYTES, bounds=st.tuples(st.integers(0, 400), st.integers(0, 400)), chunk=st.integers(1, 17))
def test_the_fast_search_finds_exactly_what_findall_finds(data: bytes, bounds: tuple[int, int], chunk: int) -> None:
    start, end = sorted(min(b, len(data)) for b in bounds)
    saved = environment._CHUNK
    environment._CHUNK = chunk  # small chunks: prefixes across every border
    try:
        assert environment.names_between(data, start, end) == _findall(data, start, end)
    finally:
        environment._CHUNK = saved


@pytest.mark.parametrize(
    ("data", "names"),
    [
        (b"\0NCCL_ALGO\0", {"NCCL_ALGO"}),
        (b"xNCCL_ALGO", set()),  # a word character before it: part of another word
        (b"PYTORCH_CUDA_ALLOC_CONF TORCHELASTIC_RUN_ID", {"PYTORCH_CUDA_ALLOC_CONF", "TORCHELASTIC_RUN_ID"}),
        (b"NCCL_", set()),  # a prefix alone is no name
        (b"NCCL_ALGO_", set()),  # a name ends with a letter or digit, and no word character follows it
    ],
)
def test_names_and_near_names(data: bytes, names: set[str]) -> None:
    assert environment.names_between(data, 0, len(data)) == names == _findall(data, 0, len(data))


def test_a_library_is_searched_through_its_mapping(tmp_path: Path) -> None:
    library = tmp_path / "libtorch_x.so"
    library.write_bytes(b"junk\0GLOO_SOCKET_IFNAME\0" * 3 + b"OMP_NUM_THREADS")  # not ELF: the whole file is read
    assert environment.names_in_library(str(library)) == {"GLOO_SOCKET_IFNAME", "OMP_NUM_THREADS"}
    with library.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        assert environment.names_between(data, 0, len(data)) == _findall(library.read_bytes(), 0, len(data))
    assert environment.names_in_library(str(tmp_path / "missing.so")) is None
