"""An archive (zip or tar, optionally gzip'd) of image folders, one folder per class,
labelled like ``ImageFolderDataset``: class folders sorted by name get labels 0, 1, ...

Refused, with the offending member named: absolute paths or ``..`` (path traversal),
symbolic or hard links, devices, files outside a class folder or nested deeper, files
that are not images, and zip bombs (a member inflating more than ``MAX_RATIO`` times, or
more than ``MAX_TOTAL_BYTES`` in all). Members are read one at a time and never written
to disk, so nothing in the archive decides where anything goes.
"""

from __future__ import annotations

import stat
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from core.dataset_stats import ImageStatsAccumulator
from workers.datasets.summary import (
    IMAGE_SUFFIXES,
    InvalidDataset,
    Summary,
    decode_image,
)

MAX_RATIO = 100
MAX_TOTAL_BYTES = 16 * 1024**3
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_MEMBERS = 2_000_000


def class_and_name(raw_name: str) -> tuple[str, str] | None:
    """(class, file) of an image member; None for a folder entry. ``root/class/file``
    is accepted too (archives made of one top folder)."""
    if raw_name.startswith(("/", "\\")) or "\\" in raw_name or ":" in raw_name.split("/")[0]:
        raise InvalidDataset(f"archive member {raw_name!r} has an absolute path")
    parts = [p for p in PurePosixPath(raw_name).parts if p not in ("", ".")]
    if ".." in parts:
        raise InvalidDataset(f"archive member {raw_name!r} escapes the archive (path "
                             "traversal with '..')")
    if raw_name.endswith("/"):
        return None
    if any(p.startswith(".") for p in parts) or parts[-1] in ("Thumbs.db",):
        return ("", "")  # hidden files (.DS_Store, __MACOSX/._x): skipped, like MXNet
    if len(parts) == 3:
        parts = parts[1:]
    if len(parts) != 2:
        raise InvalidDataset(
            f"archive member {raw_name!r} is not in a class folder: expected "
            "<class>/<image> (or <root>/<class>/<image>)"
        )
    return parts[0], parts[1]


def _zip_members(path: Path) -> Iterator[tuple[str, int, bytes | None]]:
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        if len(infos) > MAX_MEMBERS:
            raise InvalidDataset(f"the archive has more than {MAX_MEMBERS} members")
        total = 0
        for info in infos:
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise InvalidDataset(f"archive member {info.filename!r} is a symbolic link")
            if info.is_dir():
                yield info.filename, 0, None
                continue
            total += info.file_size
            if info.file_size > MAX_RATIO * max(info.compress_size, 1) + 4096:
                raise InvalidDataset(
                    f"archive member {info.filename!r} inflates {info.file_size} bytes from "
                    f"{info.compress_size} (a zip bomb?); the limit is {MAX_RATIO}x"
                )
            if info.file_size > MAX_MEMBER_BYTES:
                raise InvalidDataset(f"archive member {info.filename!r} is larger than "
                                     f"{MAX_MEMBER_BYTES} bytes")
            if total > MAX_TOTAL_BYTES:
                raise InvalidDataset(f"the archive inflates to more than {MAX_TOTAL_BYTES} bytes")
            with archive.open(info) as member:
                # Read one byte past the declared size: a member that lies is refused.
                data = member.read(info.file_size + 1)
            if len(data) != info.file_size:
                raise InvalidDataset(f"archive member {info.filename!r} is not the size "
                                     "its header declares")
            yield info.filename, info.file_size, data


def _tar_members(path: Path) -> Iterator[tuple[str, int, bytes | None]]:
    total, count = 0, 0
    with tarfile.open(path, mode="r:*") as archive:
        for member in archive:  # streams: the member list is never held whole
            count += 1
            if count > MAX_MEMBERS:
                raise InvalidDataset(f"the archive has more than {MAX_MEMBERS} members")
            if member.issym() or member.islnk():
                raise InvalidDataset(f"archive member {member.name!r} is a "
                                     f"{'symbolic' if member.issym() else 'hard'} link")
            if member.isdir():
                yield member.name + "/", 0, None
                continue
            if not member.isfile():
                raise InvalidDataset(f"archive member {member.name!r} is not a regular file")
            total += member.size
            if member.size > MAX_MEMBER_BYTES:
                raise InvalidDataset(f"archive member {member.name!r} is larger than "
                                     f"{MAX_MEMBER_BYTES} bytes")
            if total > MAX_TOTAL_BYTES or total > MAX_RATIO * path.stat().st_size + 2**20:
                raise InvalidDataset("the archive inflates too much (a tar bomb?)")
            handle = archive.extractfile(member)
            if handle is None:
                raise InvalidDataset(f"archive member {member.name!r} cannot be read")
            yield member.name, member.size, handle.read(member.size)


def members(path: Path) -> Iterator[tuple[str, int, bytes | None]]:
    if zipfile.is_zipfile(path):
        return _zip_members(path)
    try:
        with tarfile.open(path, mode="r:*"):
            pass
    except (tarfile.TarError, OSError) as exc:
        raise InvalidDataset("the archive is neither a zip nor a tar file") from exc
    return _tar_members(path)


def validate_archive(path: Path) -> Summary:
    """One pass: each image is decoded as it is read and then dropped, so the archive is
    never held in memory; labels (sorted class names) are assigned at the end."""
    stats = ImageStatsAccumulator()
    try:
        for name, _, data in members(path):
            located = class_and_name(name)
            if located is None or located == ("", "") or data is None:
                continue
            class_name, file_name = located
            if not file_name.lower().endswith(IMAGE_SUFFIXES):
                raise InvalidDataset(
                    f"archive member {name!r} in class folder {class_name!r} is not an "
                    f"image (expected one of {', '.join(IMAGE_SUFFIXES)})"
                )
            try:
                stats.add(decode_image(data, f"archive member {name!r}"), class_name)
            except InvalidDataset:
                raise
            except ValueError as exc:
                raise InvalidDataset(str(exc)) from exc
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise InvalidDataset(f"the archive is corrupt ({exc})") from exc
    if not stats.records:
        raise InvalidDataset("the archive holds no class folders with images")
    result = stats.result()
    class_names = sorted(result["class_counts"])
    result["class_names"] = class_names
    result["class_counts"] = {
        str(label): result["class_counts"][name] for label, name in enumerate(class_names)
    }
    common = next(iter(result["image_sizes"]), "0x0")
    height, width = (int(n) for n in common.split("x"))
    return Summary(
        num_rows=stats.records, feature_shape=[height, width, stats.channels or 0],
        dtype="uint8", num_classes=len(class_names), stats=result,
    )
