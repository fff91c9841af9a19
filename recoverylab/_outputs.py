"""Staged, all-or-nothing writes: temporary names, stale-temporary cleanup, one commit.

ARCHITECTURE §1.5 and §5: a failed job leaves no partial file, never clobbers an input, and its
temporaries never outlive the next run. Every output is written under a temporary name in its
target directory (``.NAME.<host>-<pid>.<random>.tmp``; dataset readers skip dot-files) and renamed
onto its target only when every output of the job exists; a directory output (a dataset of part
files) is staged whole, so an incomplete set of parts never passes for a complete dataset. The
next write to a target removes the temporaries of this host's dead processes (``kill -9`` cannot
clean up) and leaves a live one's alone: two concurrent runs each finish (the later rename wins).

A stop signal (SIGINT, SIGTERM, SIGHUP, SIGPIPE; see :mod:`recoverylab._signals`) unwinds a run like
any failure: the set removes its temporaries. The steps that must not be cut in two (creating a
temporary and recording it, the renames of a commit) hold the signal until they end; a signal
during a commit puts every output back to its previous version. A target that is neither a
regular file nor a directory (a device, a FIFO, a socket) is refused, never replaced.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from recoverylab._errors import OutputError
from recoverylab._signals import finish, held, raise_if_stopped

__all__ = [
    "OutputSet",
    "atomic_dir",
    "atomic_file",
    "remove_stale_temporaries",
    "scratch_dir",
    "target_problem",
]

_DIRECTORY_ATTEMPTS = 20
_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]
_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<host>[0-9a-f]{6})-(?P<pid>\d+)\.[^.]+\.(?:tmp|old)$")


def _temp_prefix(target: Path) -> str:
    return f".{target.name}.{_HOST}-{os.getpid()}."


def _process_is_gone(pid: int) -> bool:
    if pid != os.getpid():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # exists, owned by someone else
            pass
    return False


def remove_stale_temporaries(target: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporaries of ``target`` left by processes of this host that no longer run.

    Returns
    -------
    list of Path
        The removed files and directories.
    """
    target = Path(target)
    removed: list[Path] = []
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _TEMP.match(entry.name)
        if match is None or match["name"] != target.name or match["host"] != _HOST:
            continue
        if not _process_is_gone(int(match["pid"])):
            continue
        _remove(entry)
        removed.append(entry)
    return removed


_SPECIAL_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def target_problem(
    target: str | os.PathLike[str], *, directory: bool | None = False, what: str = "this output"
) -> str | None:
    """Why ``target`` cannot be written as a file (or a ``directory``), or ``None`` when it can.

    Only regular files and directories are ever replaced: a rename onto a device, a FIFO or a
    socket (or a link to one) would replace the special file itself with our output. A file
    target given with a trailing slash names a directory, so it is refused rather than guessed.

    Parameters
    ----------
    target
        The output path as given (a ``str`` keeps a trailing slash; a ``Path`` drops it).
    directory
        Whether the output is a directory (a dataset, a tree of files) rather than one file;
        ``None``: either (only special files are refused).
    what
        How the message names the output, e.g. ``"`--out`"``.

    Examples
    --------
    >>> target_problem("/dev/null").split(";")[0]
    '`/dev/null` is a character device, not a regular file'
    >>> target_problem("cells_dir/") is not None
    True
    """
    text = os.fspath(target)
    if directory is False and text.endswith(("/", os.sep)):
        return (
            f"`{text}` ends with a slash, which names a directory, but {what} is one file. "
            f"Hint: name the file, e.g. `{text}result.parquet`."
        )
    try:
        mode = os.stat(text).st_mode
    except (OSError, ValueError):  # absent (the usual case) or unreadable: writing will say
        return None
    if stat.S_ISDIR(mode):
        return None if directory is not False else f"cannot write `{text}`: it is a directory."
    if stat.S_ISREG(mode):
        if directory is True:
            return f"cannot write directory `{text}`: a file is in the way."
        return None
    kind = next((name for test, name in _SPECIAL_KINDS if test(mode)), "not a regular file")
    return f"`{text}` is {kind}, not a regular file; outputs replace only files and directories."


def _public_permissions(path: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    mode = 0o777 if path.is_dir() else 0o666
    os.chmod(path, mode & ~umask)  # mkstemp/mkdtemp make entries private; results are not


def _prepare_parent(target: Path) -> None:
    if target.exists() and target.is_dir() and not target.is_symlink():
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(
            f"cannot create the directory of `{target}` ({exc.strerror or exc})."
        ) from exc


@dataclass
class _Staged:
    target: Path
    temp: Path
    is_dir: bool
    merge: bool = False  # a tree: each entry of ``temp`` replaces the same entry of ``target``


#: The output set of the running command, which every atomic write joins (see ``activate``).
_ACTIVE: ContextVar[OutputSet | None] = ContextVar("recoverylab_outputs", default=None)


@contextmanager
def _active(outputs: OutputSet | None) -> Iterator[None]:
    token = _ACTIVE.set(outputs)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


@dataclass
class OutputSet:
    """Outputs staged under temporary names and committed together, or none of them.

    Use as a context manager: leaving the block normally commits (renames every staged output onto
    its target); leaving it with an exception removes every temporary and leaves the targets as
    they were.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> with OutputSet() as outputs:
    ...     _ = outputs.stage_file(root / "a.txt").write_text("a")
    ...     _ = outputs.stage_file(root / "b.txt").write_text("b")
    >>> sorted(p.name for p in root.iterdir())
    ['a.txt', 'b.txt']
    """

    guard: Callable[[Path], None] | None = None
    staged: list[_Staged] = field(default_factory=list)
    committed: list[Path] = field(default_factory=list)

    def __enter__(self) -> OutputSet:
        return self

    @contextmanager
    def activate(self) -> Iterator[OutputSet]:
        """Make every :func:`atomic_file` / :func:`atomic_dir` in the block join this set.

        A command line run activates one set, so what library functions write (a report, a rule
        file, synthetic part files) is committed with the command's other outputs, or not at all.
        """
        with _active(self):
            yield self

    def discard(self, temp: Path) -> None:
        """Remove one staged temporary (its writer failed) so it is never committed."""
        with held():
            _remove(temp)
            self.staged = [staged for staged in self.staged if staged.temp != temp]

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def stage_file(self, target: str | os.PathLike[str]) -> Path:
        """Return a temporary path (in the target directory) for ``target``'s content."""
        return self._stage(target, is_dir=False)

    def stage_dir(self, target: str | os.PathLike[str]) -> Path:
        """Return a temporary directory whose whole content replaces directory ``target``."""
        return self._stage(target, is_dir=True)

    def _stage(self, given: str | os.PathLike[str], is_dir: bool) -> Path:
        raise_if_stopped()  # nothing new is staged once a stop signal arrived
        target = Path(given)
        if any(staged.target.resolve() == target.resolve() for staged in self.staged):
            raise OutputError(f"`{target}` is named as two outputs of one command.")
        if self.guard is not None:
            self.guard(target)
        problem = target_problem(given, directory=is_dir)
        if problem is not None:
            raise OutputError(problem)
        _prepare_parent(target)
        remove_stale_temporaries(target)
        prefix = _temp_prefix(target)
        with held():  # a stop signal must not fall between creating the temporary and recording it
            try:
                if is_dir:
                    name = tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=target.parent)
                else:
                    handle, name = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=target.parent)
                    os.close(handle)
            except OSError as exc:
                raise OutputError(f"cannot write `{target}` ({exc.strerror or exc}).") from exc
            self.staged.append(_Staged(target, Path(name), is_dir=is_dir))
        return Path(name)

    def stage_tree(self, target: str | os.PathLike[str]) -> Path:
        """Return a temporary directory whose entries replace the same entries of ``target``.

        For a command that writes several files and folders into an output directory that may
        hold other things (``demo --out DIR``): only the written entries are replaced.
        """
        staged = self.stage_dir(target)
        self.staged[-1].merge = True
        return staged

    @staticmethod
    @contextmanager
    def suspended() -> Iterator[None]:
        """Let atomic writes in the block commit at once (e.g. into a staged tree)."""
        with _active(None):
            yield

    def abort(self) -> None:
        """Remove every temporary; no target is touched."""
        with held():
            for staged in self.staged:
                _remove(staged.temp)
            self.staged.clear()

    def commit(self, *, final: bool = False) -> list[Path]:
        """Rename every staged output onto its target; return the committed targets.

        On a failure part-way, or a stop signal during the renames, the outputs already renamed
        are put back to their previous versions (or removed when they had none); a failure raises
        :class:`OutputError` naming the output that failed. With ``final`` (the command line's
        last step) a stop signal after the commit is ignored: the run's work is done.
        """
        with held():
            done: list[tuple[_Staged, Path | None]] = []
            try:
                raise_if_stopped()  # a stopped run never commits, even if its exception was lost
                self.staged = [entry for staged in self.staged for entry in _expand_tree(staged)]
                for staged in self.staged:
                    _public_permissions(staged.temp)
                    done.append((staged, _swap_in(staged)))
                raise_if_stopped()  # the last moment at which everything can still be put back
            except BaseException as exc:
                failed = self.staged[len(done)].target if len(done) < len(self.staged) else None
                for staged, backup in reversed(done):
                    if not staged.merge:  # a tree's own directory stays; its entries are restored
                        _restore(staged.target, backup)
                self.abort()
                if isinstance(exc, OSError):
                    raise OutputError(f"cannot write `{failed}` ({exc.strerror or exc}).") from exc
                raise
            if final:
                finish()
            for _, backup in done:
                if backup is not None:
                    _remove(backup)
            self.committed.extend(s.target for s in self.staged)
            self.staged.clear()
        return list(self.committed)


def _expand_tree(staged: _Staged) -> list[_Staged]:
    """Split a staged tree into one staged entry per top-level file or folder it holds."""
    if not staged.merge:
        return [staged]
    staged.target.mkdir(parents=True, exist_ok=True)
    return [
        _Staged(staged.target / entry.name, entry, is_dir=entry.is_dir())
        for entry in sorted(staged.temp.iterdir())
    ] + [_Staged(staged.target, staged.temp, is_dir=True, merge=True)]


def _swap_in(staged: _Staged) -> Path | None:
    """Move ``staged.temp`` onto its target; return where the previous version was kept."""
    if staged.merge:  # the emptied tree itself
        _remove(staged.temp)
        return None
    target = staged.target
    if not staged.is_dir:
        backup = None
        if target.exists() or target.is_symlink():
            backup = _backup_name(target)
            os.link(target, backup) if not target.is_symlink() else shutil.copy2(target, backup)
        os.replace(staged.temp, target)  # atomic: readers see the old file or the new one
        return backup
    # A directory cannot be renamed onto a non-empty one: move the current version aside first.
    # Another run may commit the same target in between; then move its version aside too (the
    # later rename wins, as for files) and drop it, so one complete dataset remains.
    backups: list[Path] = []
    for _ in range(_DIRECTORY_ATTEMPTS):
        if target.exists() or target.is_symlink():
            backups.append(_backup_name(target))
            os.replace(target, backups[-1])
        try:
            os.replace(staged.temp, target)
            break
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    else:
        raise OSError(errno.EBUSY, "other runs keep writing it")
    for extra in backups[1:]:
        _remove(extra)
    return backups[0] if backups else None


def _backup_name(target: Path) -> Path:
    return Path(tempfile.mktemp(prefix=_temp_prefix(target), suffix=".old", dir=target.parent))


def _restore(target: Path, backup: Path | None) -> None:
    if backup is None or (target.is_dir() and not target.is_symlink()):
        _remove(target)
    if backup is not None:
        os.replace(backup, target)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def _joined(stage: Callable[[OutputSet], Path]) -> Iterator[Path]:
    """Stage one output in the active set (committed with the command), or in a set of its own."""
    active = _ACTIVE.get()
    if active is None:
        with OutputSet() as own:
            yield stage(own)
        return
    temp = stage(active)
    try:
        yield temp
    except BaseException:
        active.discard(temp)
        raise


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Yield a binary handle whose content replaces ``path`` only if the block succeeds.

    The handle writes a temporary file in the target directory (created if needed); on success it
    gets the usual permissions (``0o666`` less the umask) and is renamed onto ``path`` (inside
    :meth:`OutputSet.activate`, at the set's commit); on failure it is removed and ``path`` is
    untouched. Writers get the handle, never the temporary path: polars' streaming sink may still
    open its output path after a failed query raised, recreating a file already cleaned up.
    """
    with _joined(lambda outputs: outputs.stage_file(path)) as temp, temp.open("wb") as out:
        yield out


@contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a staging directory whose whole content replaces directory ``path`` on success.

    For datasets of several part files: readers never see an incomplete set of parts, and parts
    of an earlier, larger run never mix with the new ones.
    """
    with _joined(lambda outputs: outputs.stage_dir(path)) as temp:
        yield temp


@contextmanager
def scratch_dir(near: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """Yield a private scratch directory (next to ``near``, else in the system temp directory).

    It is removed when the block ends; one left by a killed process is removed by the next call
    for the same place.
    """
    parent = Path(near).parent if near is not None else Path(tempfile.gettempdir())
    parent.mkdir(parents=True, exist_ok=True)
    anchor = parent / "recoverylab-scratch"
    remove_stale_temporaries(anchor)
    with ExitStack() as cleanup:
        with held():  # a stop signal must not fall between creating it and arranging its removal
            path = Path(tempfile.mkdtemp(prefix=_temp_prefix(anchor), suffix=".tmp", dir=parent))
            cleanup.callback(shutil.rmtree, path, ignore_errors=True)
        yield path
