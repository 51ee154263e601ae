"""The artifact store: a local folder or a gs:// bucket, addressed by keys like Argo's key-only artifacts."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import stat
import time
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Protocol

from steps.lib.errors import ArtifactNotFound, StepError
from steps.lib.input_files import open_regular
from steps.lib.staged_outputs import atomic_path, temporaries_of

MAX_VERSIONED_BYTES = 1 << 20  # read_versioned's default bound: a pointer is a few bytes
GENERATION_BYTES = 4096  # hashed into a folder store key's generation, whatever the bound


class ArtifactStore(Protocol):
    uri: str

    def upload_file(self, local: Path, key: str) -> None: ...
    def download_file(self, key: str, local: Path) -> None: ...
    def list_keys(self, prefix: str) -> list[str]: ...
    def list_folders(self, prefix: str, limit: int) -> list[str]: ...
    def read_text(self, key: str) -> str | None: ...
    def read_head(self, key: str, limit: int) -> bytes | None: ...
    def write_text(self, key: str, text: str) -> None: ...
    def read_versioned(self, key: str, limit: int = ...) -> tuple[str | None, int]: ...
    def write_if_generation(self, key: str, text: str, generation: int) -> bool: ...
    def sweep_temporaries(self, prefix: str, names: Iterable[str], age: float) -> list[str]: ...


def check_key(key: str) -> str:
    """Keys are relative POSIX paths without '..' parts."""
    parts = PurePosixPath(key).parts
    if not key or key.startswith("/") or ".." in parts:
        raise StepError(f"invalid artifact key: {key!r}")
    return key


def _decode(content: bytes, key: str) -> str:
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        raise StepError(f"artifact {key} is not UTF-8 text") from None


def upload_dir(store: ArtifactStore, local_dir: Path, prefix: str) -> None:
    """Upload every file under `local_dir` to `prefix/<relative path>`."""
    for path in sorted(p for p in local_dir.rglob("*") if p.is_file()):
        store.upload_file(path, f"{prefix.rstrip('/')}/{path.relative_to(local_dir).as_posix()}")


def download_dir(store: ArtifactStore, prefix: str, local_dir: Path) -> int:
    """Download every key under `prefix/` into `local_dir`; return how many files came."""
    prefix = prefix.rstrip("/") + "/"
    keys = store.list_keys(prefix)
    root = Path(local_dir).resolve()
    for key in keys:
        relative = check_key(key.removeprefix(prefix))  # a stored name may hold '..'
        target = (root / relative).resolve()
        if not target.is_relative_to(root):
            raise StepError(f"artifact {key} would land outside {local_dir}")
        store.download_file(key, target)
    return len(keys)


class LocalStore:
    """Keys are files under a root folder; every write is a rename, so readers never see half a file.

    A key resolves to a path inside the root, symlinks followed: one leading out is refused.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.uri = str(self.root)

    def _path(self, key: str) -> Path:
        path = (self.root / check_key(key)).resolve()
        if path != self.root and not path.is_relative_to(self.root):
            raise StepError(f"artifact key {key!r} leads outside the store {self.uri}")
        return path

    def upload_file(self, local: Path, key: str) -> None:
        with atomic_path(self._path(key)) as temporary:
            shutil.copyfile(local, temporary)

    def download_file(self, key: str, local: Path) -> None:
        source = self._path(key)
        if not source.is_file():
            raise ArtifactNotFound(f"artifact not found: {key} in {self.uri}")
        with atomic_path(local) as temporary:
            shutil.copyfile(source, temporary)

    def list_keys(self, prefix: str) -> list[str]:
        """Regular files under `prefix`, not following symlinks, not hidden (temporary) ones."""
        base = self._path(prefix.rstrip("/")) if prefix.rstrip("/") else self.root
        if not base.is_dir():
            return []
        keys = []
        for folder, _, names in os.walk(base):  # os.walk does not enter symlinked folders
            for name in names:
                path = Path(folder) / name
                if not name.startswith(".") and path.is_file() and not path.is_symlink():
                    keys.append(path.relative_to(self.root).as_posix())
        return sorted(keys)

    def list_folders(self, prefix: str, limit: int) -> list[str]:
        """The names of the folders right under `prefix` ('': the root), not symlinked, not hidden;
        at most `limit` of them, in name order."""
        base = self._path(prefix.rstrip("/")) if prefix.rstrip("/") else self.root
        if not base.is_dir():
            return []
        with os.scandir(base) as entries:
            names = [
                entry.name
                for entry in entries
                if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
            ]
        return sorted(names)[:limit]

    def read_text(self, key: str) -> str | None:
        path = self._path(key)
        return _decode(path.read_bytes(), key) if path.is_file() else None

    def read_head(self, key: str, limit: int) -> bytes | None:
        """Up to `limit` + 1 bytes of `key` (None when absent), so a caller can tell it is too long;
        a key that is not a regular file is refused without blocking on it (a FIFO, a device)."""
        try:
            with open_regular(self._path(key), f"artifact {key} in {self.uri}") as handle:
                return handle.read(limit + 1)
        except FileNotFoundError:
            return None

    def write_text(self, key: str, text: str) -> None:
        with atomic_path(self._path(key)) as temporary:
            temporary.write_text(text)

    def read_versioned(self, key: str, limit: int = MAX_VERSIONED_BYTES) -> tuple[str | None, int]:
        """Up to `limit` + 1 bytes of the text at `key` (a caller can tell it is too long) and its
        generation (from those bytes, its size, inode and mtime; 0 when absent). A key that is not a
        regular file is refused without blocking on it."""
        try:
            with open_regular(self._path(key), f"artifact {key} in {self.uri}") as handle:
                content = handle.read(max(limit + 1, GENERATION_BYTES))
                info = os.fstat(handle.fileno())
        except FileNotFoundError:
            return None, 0
        identity = f"{info.st_size} {info.st_ino} {info.st_mtime_ns}".encode()
        digest = hashlib.sha256(content[:GENERATION_BYTES] + identity).digest()
        return content[: limit + 1].decode(errors="replace"), int.from_bytes(digest[:8], "big") or 1

    def write_if_generation(self, key: str, text: str, generation: int) -> bool:
        """Write only if `key` is still at `generation` (compare-and-swap under a file lock)."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path.with_name(f".{path.name}.lock"), f"the lock of {key} in {self.uri}"):
            if self.read_versioned(key, 0)[1] != generation:
                return False
            self.write_text(key, text)
            return True

    def sweep_temporaries(self, prefix: str, names: Iterable[str], age: float) -> list[str]:
        """Remove the temporaries a writer killed mid-copy left under `prefix`: regular files named
        as atomic_path names those of `names`, unchanged for `age` seconds (a copy under way is
        younger); return their keys. Symlinked folders are not entered."""
        patterns = [temporaries_of(name) for name in names]
        base = self._path(prefix)
        before = time.time() - age
        removed = []
        for folder, _, files in os.walk(base):
            for name in files:
                path = Path(folder) / name
                if not any(pattern.fullmatch(name) for pattern in patterns):
                    continue
                with contextlib.suppress(FileNotFoundError):  # another sweep was first
                    info = path.lstat()
                    if stat.S_ISREG(info.st_mode) and info.st_mtime < before:
                        path.unlink()
                        removed.append(path.relative_to(self.root).as_posix())
        return removed


class GCSStore:
    """Keys are objects under gs://bucket/prefix, through google-cloud-storage (STORAGE_EMULATOR_HOST aware)."""

    def __init__(self, bucket: str, prefix: str = "", deadline: float | None = None) -> None:
        from google.cloud import storage

        self.bucket = storage.Client().bucket(bucket)
        self.prefix = prefix.strip("/")
        self.uri = f"gs://{bucket}/{self.prefix}".rstrip("/")
        # read_head's bound on each request and on its retries, in seconds: the client's default
        # retries for 120 s (google/cloud/storage/retry.py, DEFAULT_RETRY); None keeps it
        self.deadline = deadline

    def _name(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def upload_file(self, local: Path, key: str) -> None:
        self.bucket.blob(self._name(key)).upload_from_filename(str(local))

    def download_file(self, key: str, local: Path) -> None:
        from google.api_core.exceptions import NotFound

        with atomic_path(local) as temporary:
            try:
                self.bucket.blob(self._name(key)).download_to_filename(str(temporary))
            except NotFound:
                raise ArtifactNotFound(f"artifact not found: {key} in {self.uri}") from None

    def list_keys(self, prefix: str) -> list[str]:
        if prefix.rstrip("/"):
            check_key(prefix.rstrip("/"))
        start = len(self.prefix) + 1 if self.prefix else 0
        return sorted(
            blob.name[start:]
            for blob in self.bucket.client.list_blobs(
                self.bucket, prefix=self._name(prefix.rstrip("/")) + ("/" if prefix else "")
            )
        )

    def list_folders(self, prefix: str, limit: int) -> list[str]:
        """The names of the "folders" right under `prefix` ('': the top): the prefixes a listing with
        the delimiter '/' returns (GCS objects.list), at most `limit` of them, in name order."""
        folder = prefix.rstrip("/")
        under = f"{self._name(folder)}/" if folder else (f"{self.prefix}/" if self.prefix else "")
        found: list[str] = []
        listing = self.bucket.client.list_blobs(self.bucket, prefix=under, delimiter="/")
        for page in listing.pages:
            found.extend(name[len(under) :].rstrip("/") for name in page.prefixes)
            if len(found) >= limit:
                break
        return sorted(found)[:limit]

    def read_text(self, key: str) -> str | None:
        blob = self.bucket.blob(self._name(key))
        return _decode(blob.download_as_bytes(), key) if blob.exists() else None

    def read_bounds(self) -> dict:
        """The timeout and retry of read_head's requests: within `deadline`, when it is set."""
        from google.cloud.storage.retry import DEFAULT_RETRY

        if self.deadline is None:
            return {}
        return {"timeout": self.deadline, "retry": DEFAULT_RETRY.with_timeout(self.deadline)}

    def read_head(self, key: str, limit: int) -> bytes | None:
        """Up to `limit` + 1 bytes of `key` (None when absent), a ranged read whatever its size."""
        from google.api_core.exceptions import NotFound

        try:
            return self.bucket.blob(self._name(key)).download_as_bytes(
                start=0, end=limit, **self.read_bounds()
            )
        except NotFound:
            return None

    def write_text(self, key: str, text: str) -> None:
        self.bucket.blob(self._name(key)).upload_from_string(text, content_type="text/plain")

    def read_versioned(self, key: str, limit: int = MAX_VERSIONED_BYTES) -> tuple[str | None, int]:
        """Up to `limit` + 1 bytes of the text at `key` (a ranged read) and its object generation
        (0 when absent)."""
        blob = self.bucket.get_blob(self._name(key))
        if blob is None:
            return None, 0
        from google.api_core.exceptions import NotFound, PreconditionFailed

        generation = blob.generation  # read first: a download may refresh the blob's properties
        try:
            content = blob.download_as_bytes(start=0, end=limit, if_generation_match=generation)
            return content.decode(errors="replace"), generation
        except (NotFound, PreconditionFailed):  # replaced or deleted between the two calls
            return self.read_versioned(key, limit)

    def write_if_generation(self, key: str, text: str, generation: int) -> bool:
        """Write only if the object is still at `generation` (GCS ifGenerationMatch; 0: absent)."""
        from google.api_core.exceptions import PreconditionFailed

        try:
            self.bucket.blob(self._name(key)).upload_from_string(
                text, content_type="text/plain", if_generation_match=generation
            )
        except PreconditionFailed:
            return False
        return True

    def sweep_temporaries(self, prefix: str, names: Iterable[str], age: float) -> list[str]:
        """Nothing to sweep: an object exists only once its upload is complete."""
        return []


@contextlib.contextmanager
def _locked(lock_path: Path, what: str):
    """An exclusive lock on the regular file `lock_path`, created if absent. Never through a symlink
    (one could lead out of the store: O_NOFOLLOW) and never waiting on a FIFO (O_NONBLOCK)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        descriptor = os.open(lock_path, flags, 0o644)
    except OSError as error:  # ELOOP: a symlink
        raise StepError(f"cannot open {what} ({lock_path}): {error.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise StepError(f"{what} ({lock_path}) is not a regular file")
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)


def split_gs_uri(uri: str) -> tuple[str, str]:
    """'gs://bucket/some/key' → ('bucket', 'some/key')."""
    bucket, _, key = uri.removeprefix("gs://").partition("/")
    if not uri.startswith("gs://") or not bucket:
        raise StepError(f"not a gs:// URI: {uri}")
    return bucket, key


def open_store(uri: str | os.PathLike[str], deadline: float | None = None) -> ArtifactStore:
    """A store from 'gs://bucket[/prefix]' or a folder path; `deadline`: GCSStore's."""
    text = str(uri)
    if text.startswith("gs://"):
        bucket, prefix = split_gs_uri(text)
        return GCSStore(bucket, prefix, deadline)
    return LocalStore(Path(text))


def download_uri(uri: str, target: Path) -> None:
    """Download one object named by a gs:// URI."""
    bucket, key = split_gs_uri(uri)
    GCSStore(bucket).download_file(key, target)
