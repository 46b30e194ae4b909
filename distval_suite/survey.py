"""The image's files that ``libraries`` and ``environment`` read, surveyed in a thread beside the earlier checks.

Those two checks run last: they judge what the earlier checks made the rank load. Most of what they read does not
depend on that, and it is the bulk of their time (measured on the 2.6 fixture, 2 ranks, loaded machine: 1.8 s of
torch's Python files, 0.6 s of libtorch_cpu's 45 MB of read-only data, 0.3 s of package databases): the names torch's
Python files read, the package databases (who owns each shared object) and the read-only data of the libraries
mapped once torch is imported. A thread started when the rank starts reads those while the ranks wait in their
collectives; the checks take its results and read the rest themselves: a library mapped since, a library file whose
identity (device, inode, size, mtime) is not the one surveyed, a package search path that changed. What the checks
conclude is exactly what reading everything at check time gives; a survey that failed or did not finish for a part
leaves that part to the check (nothing is taken from a half-done read).

Never beside a timed check (distval_suite/main.py waits for the survey before one: a timeout's elapsed time,
bandwidth figures). Each search of a file holds the GIL about a millisecond (environment._CHUNK).

Python 3.9 and the standard library only.
"""

from __future__ import annotations

import os
import threading
from typing import Dict, List, Optional, Sequence, Set, Tuple

from distval_suite import environment, libraries

Identity = Tuple[int, int, int, int]


def identity(path: str) -> Optional[Identity]:
    """What tells a file from its replacement: device, inode, size, mtime (None: it cannot be stat'ed)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class Survey:
    """Started once per rank (``start``); each method gives what its module's function would give now."""

    def __init__(self, package_dir: str, search_path: Sequence[str], mapped: Sequence[str]) -> None:
        self._package_dir = package_dir
        self._search_path = tuple(search_path)
        self._mapped = sorted(set(mapped))
        self._python_names: Optional[Set[str]] = None
        self._owners: Optional[Dict[str, str]] = None
        # path -> (its identity before and after the read, the names in it or None when it could not be read)
        self._library_names: Dict[str, Tuple[Identity, Optional[Set[str]]]] = {}
        self.error: Optional[str] = None
        self._thread = threading.Thread(target=self._run, name="distval-survey", daemon=True)

    def start(self) -> "Survey":
        self._thread.start()
        return self

    def wait(self) -> None:
        """Until the survey has ended (the check's own time limit bounds the wait: distval_suite/watchdog.py)."""
        if self._thread.ident is not None:
            self._thread.join()

    def _run(self) -> None:
        try:
            for path in self._mapped:
                if environment.READERS.match(os.path.basename(path)):
                    before = identity(path)
                    names = environment.names_in_library(path)
                    if before is not None and identity(path) == before:
                        self._library_names[path] = (before, names)
            self._owners = libraries.package_files(self._search_path)
            self._python_names = environment.names_in_python(self._package_dir)
        except Exception as exc:  # noqa: BLE001 - whatever went wrong, the checks read it all themselves
            self.error = "%s: %s" % (type(exc).__name__, exc)

    # -- what the checks ask -------------------------------------------------------------------------
    def python_names(self, package_dir: str) -> Set[str]:
        """environment.names_in_python(package_dir)."""
        self.wait()
        if self._python_names is not None and package_dir == self._package_dir:
            return set(self._python_names)
        return environment.names_in_python(package_dir)

    def package_files(self, search_path: Sequence[str]) -> Dict[str, str]:
        """libraries.package_files(search_path)."""
        self.wait()
        if self._owners is not None and tuple(search_path) == self._search_path:
            return dict(self._owners)
        return libraries.package_files(search_path)

    def names_in_libraries(self, paths: Sequence[str]) -> Tuple[Set[str], List[str]]:
        """environment.names_in_libraries(paths): a library surveyed as it is now is not read again."""
        self.wait()
        names: Set[str] = set()
        scanned: List[str] = []
        for path in sorted(set(paths)):
            if not environment.READERS.match(os.path.basename(path)):
                continue
            surveyed = self._library_names.get(path)
            if surveyed is not None and identity(path) == surveyed[0]:
                found = surveyed[1]
            else:
                found = environment.names_in_library(path)
            if found is None:
                continue
            names |= found
            scanned.append(path)
        return names, scanned
