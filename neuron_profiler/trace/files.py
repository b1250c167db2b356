"""Files on disk for the trace reader, writer and exporters: inputs are regular files only (never a FIFO that
would block or a device that never ends), outputs appear under their final name only when complete.

``atomic_output(path)`` is the one way this package writes a file: the data goes to a temporary name in the
same directory (``<name>.<pid>-<random>.tmp``, not matched by ``*.nprof`` or ``*.json`` globs) and is renamed
over ``path`` once written; on any exception, Ctrl-C included, the temporary file is removed and ``path`` is left
as it was. A process killed outright leaves the temporary file (a trace there reads back every complete chunk).
"""
from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from neuron_profiler.trace.errors import NotATraceError, TraceFormatError, TruncatedTraceError

_KINDS = {stat.S_IFIFO: "FIFO (named pipe)", stat.S_IFCHR: "character device", stat.S_IFBLK: "block device",
          stat.S_IFSOCK: "socket", stat.S_IFDIR: "directory"}


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "special file")


class PositionalFile:
    """A regular file open for positional reads (``pread``): bytes are copied out, never mapped, so a file truncated
    or rewritten while a reader holds it gives a short read, raised as a ``TraceFormatError`` that says the file
    changed, instead of the SIGBUS that touching a memory map past the new end of the file delivers (which kills
    the process). Thread-safe (``pread`` has no shared file position)."""

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        self.size = size
        self._fd: int | None = fd

    def read(self, pos: int, n: int) -> bytes:
        """Exactly the ``n`` bytes at ``pos`` (within the size the file had when opened)."""
        n = max(0, min(n, self.size - pos))
        fd = self._fd
        if fd is None:
            raise TraceFormatError(f"{self.path}: the trace file is closed")
        if n == 0:
            return b""
        try:
            data = os.pread(fd, n, pos)
        except OSError as e:
            raise TraceFormatError(f"{self.path}: cannot read {n} bytes at byte {pos}: {e.strerror or e}") from None
        if len(data) < n:  # the file shrank under this reader (truncated, or rewritten in place)
            now = os.fstat(fd).st_size
            raise TruncatedTraceError(f"{self.path}: the file changed while it was read: it was {self.size:,} bytes "
                                      f"when opened and is now {now:,} (truncated or rewritten in place by another "
                                      f"process); open it again")
        return data

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def open_regular_file(path: Path) -> PositionalFile:
    """``path`` open for positional reads. The file is opened without blocking and must be a regular file: a FIFO,
    device, socket or directory raises ``NotATraceError`` at once instead of hanging or reading forever."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise NotATraceError(f"{path}: is a directory, not a trace file") from None
    except (OSError, ValueError) as e:  # ValueError: embedded NUL byte in the path
        raise TraceFormatError(f"{path}: cannot open: {getattr(e, 'strerror', None) or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotATraceError(f"{path}: is a {_kind(st.st_mode)}, not a trace file (traces are read from "
                                 f"regular files only)")
        return PositionalFile(path, fd, st.st_size)
    except BaseException as e:
        os.close(fd)
        if isinstance(e, OSError):
            raise TraceFormatError(f"{path}: cannot read: {e.strerror or e}") from None
        raise


def check_input_file(path: str | os.PathLike) -> Path:
    """``path`` when it is an existing regular file (symlinks followed); else ``FileNotFoundError`` or
    ``NotATraceError`` naming what it is. For readers outside this package (e.g. JSON importers) that
    ``open()`` their input, which blocks forever on a FIFO."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"no such file: {p}") from None
    except (OSError, ValueError) as e:
        raise TraceFormatError(f"{p}: cannot open: {getattr(e, 'strerror', None) or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise NotATraceError(f"{p}: is a {_kind(st.st_mode)}, not a trace file (traces are read from regular files "
                             f"only)")
    return p


def output_target(path: str | os.PathLike) -> Path:
    """The file an output to ``path`` replaces: ``path`` itself, or the file a symlink at ``path`` points to.
    Raises ``IsADirectoryError`` / ``ValueError`` when ``path`` names a directory or a special file (a FIFO or
    device cannot be replaced atomically), ``FileNotFoundError`` when its directory does not exist."""
    p = Path(path)
    if p.is_symlink():
        p = Path(os.path.realpath(p))
    try:
        st = p.stat()
    except FileNotFoundError:
        if not p.parent.is_dir():
            raise FileNotFoundError(f"cannot write {p}: directory {p.parent} does not exist") from None
        return p
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"cannot write {p}: it is a directory (name a file)")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"cannot write {p}: it is a {_kind(st.st_mode)}; outputs are regular files")
    return p


class OutputIsInputError(ValueError):
    """An output path that is one of the command's inputs, or resolves to one through symbolic or hard links:
    writing it would replace the user's source file."""


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether paths ``a`` and ``b`` name the same file or directory: equal once symbolic links and ``..`` are
    resolved, or the same inode (hard links, bind mounts). A path that does not exist is the same as nothing."""
    try:
        if os.path.realpath(a) == os.path.realpath(b):
            return True
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # missing, unreadable, or an embedded NUL byte
        return False


def check_not_input(output: str | os.PathLike, inputs: Iterable[str | os.PathLike | None]) -> None:
    """Raise ``OutputIsInputError`` when ``output`` is one of ``inputs`` (see ``same_file``): every command that
    writes calls this before reading, so an output named like its input never replaces it."""
    for src in inputs:
        if src is not None and same_file(output, src):
            same = "" if os.fspath(output) == os.fspath(src) else f" (it resolves to the input {src})"
            raise OutputIsInputError(f"refusing to write {output}: it is the input{same}, which would be replaced; "
                                     f"the output must differ from the input")


def partial_name(target: Path) -> Path:
    """A fresh temporary name beside ``target`` for the file being written."""
    return target.with_name(f"{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


def create_partial(target: Path) -> tuple[Path, int]:
    """(temporary path, descriptor open for writing) of a new temporary file beside ``target``, created with
    the permissions ``open()`` would give (0666 minus the umask)."""
    for _ in range(8):
        tmp = partial_name(target)
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot create a temporary file beside {target}")


def discard(tmp: Path) -> None:
    """Remove a temporary file (missing is fine)."""
    with contextlib.suppress(OSError):
        os.unlink(tmp)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, inputs: Iterable[str | os.PathLike | None] = ()) -> Iterator[Path]:
    """Yield a temporary path to write; on success it is renamed over ``path`` (or a symlink's target), on any
    exception it is removed. ``OutputIsInputError`` (nothing written) when ``path`` is one of ``inputs``."""
    check_not_input(path, inputs)
    target = output_target(path)
    tmp, fd = create_partial(target)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        discard(tmp)
        raise
