"""The one way a report reaches the disk: whole or not at all.

``write_atomically`` writes the text to a new temporary file beside the target (same directory, so
same filesystem), flushes it to the disk (fsync) and renames it over the target: a reader, or a run
killed halfway, sees the old file or the new one, never a part. Parent directories are created.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

# A temporary name no other writer uses (several runs may write reports into one directory).
_TEMPORARY_ATTEMPTS = 16


def write_atomically(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically; on any error the old file stays and no temporary is left."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    temporary, fd = _create_temporary(target)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)


def _create_temporary(target: Path) -> tuple[Path, int]:
    """A new file beside ``target``, created exclusively with the mode a plain open() would give it (umask applies)."""
    for _ in range(_TEMPORARY_ATTEMPTS):
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return temporary, os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable; a filesystem that cannot open or sync a directory is left as it is."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
