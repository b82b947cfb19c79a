"""A CSV data set (a header with a ``label`` column, numbers in every other column)
converted to the npz the loaders read, as a stream.

Text is read in blocks of ``BLOCK_CHARS`` with a limit on each line's length and parsed
into batches of about ``BLOCK_VALUES`` numbers; each batch is checked (finite, fits
float32), added to the stats and appended to raw temporary files, then dropped. A block
of plain rows (no quotes, the right number of commas on every line) is parsed in one go;
any other block line by line, which is what names the line of a problem. The npz is
written from those files at the end (core.dataset_npz). A 47 MiB CSV had cost the worker
1.6-1.8 GB as Python lists of floats; now memory stays at a few batches whatever the
file's size.

Every refusal names the line (and the column where there is one): a non-number, a
non-finite value, a row with the wrong number of columns, a line or a field past its
limit (a field of more than 131072 characters was a 500 from ``_csv.Error``).
"""

from __future__ import annotations

import csv
import io
import tempfile
from typing import BinaryIO

import numpy as np

from core.dataset_checks import LABEL_COLUMN, DatasetError, DatasetSummary, check_shapes
from core.dataset_npz import RawArray, write_npz
from core.dataset_stats import ChannelMoments, LabelTally, summarise

# The csv module's default field limit, kept for fields we split ourselves: no number is
# anywhere near this long.
MAX_FIELD_CHARS = 131_072
MAX_HEADER_CHARS = 16 * 1024 * 1024
# A data line may hold one field at the limit plus an ordinary number in every column.
CHARS_PER_COLUMN = 64
BLOCK_VALUES = 128 * 1024
BLOCK_CHARS = 256 * 1024
# Whole-number labels become int64 only while float64 holds them exactly.
MAX_EXACT_INTEGER = 2**53


class _Lines:
    """Numbered lines of a text stream, each refused past ``limit`` characters before
    more of it is read."""

    def __init__(self, text: io.TextIOWrapper):
        self.text = text
        self.number = 0  # lines handed out so far
        self._tail = ""

    def next(self, limit: int, what: str) -> str | None:
        try:
            line = self.text.readline(limit + 2)
        except UnicodeDecodeError as exc:
            raise DatasetError(f"the CSV is not UTF-8 text (near line {self.number + 1})") from exc
        if not line:
            return None
        self.number += 1
        content = line.rstrip("\r\n")
        if len(content) > limit:
            raise self._too_long(self.number, limit, what)
        return content

    @staticmethod
    def _too_long(number: int, limit: int, what: str) -> DatasetError:
        return DatasetError(f"line {number} is longer than {limit} characters, the limit "
                            f"for {what}")

    def block(self, limit: int, what: str) -> tuple[int, list[str]] | None:
        """(number of the first line, the next whole lines: about ``BLOCK_CHARS`` of
        text), or None at the end. A line ends at LF, CRLF or CR, as csv reads them."""
        while True:
            try:
                text = self.text.read(BLOCK_CHARS)
                if text.endswith("\r"):  # its \n may start the next block
                    text += self.text.read(1)
            except UnicodeDecodeError as exc:
                raise DatasetError("the CSV is not UTF-8 text (near line "
                                   f"{self.number + 1})") from exc
            if not text:
                if not self._tail:
                    return None
                lines, self._tail = [self._tail], ""
            else:
                joined = self._tail + text
                lines = joined.replace("\r\n", "\n").replace("\r", "\n").split("\n")
                self._tail = lines.pop()  # the start of a line the next block ends
                if len(joined) > limit:
                    for index, line in enumerate([*lines, self._tail]):
                        if len(line) > limit:
                            raise self._too_long(self.number + index + 1, limit, what)
            if lines:
                first = self.number + 1
                self.number += len(lines)
                return first, lines


def _fields(content: str, line: int, columns: int) -> list[str]:
    """The line's fields; a row must have exactly ``columns`` of them. (No valid number
    holds a comma, so counting commas first bounds what the parser may allocate.)"""
    found = content.count(",") + 1
    if found == columns:
        if '"' not in content:
            fields = content.split(",")
        else:
            try:
                fields = next(csv.reader([content]))
            except csv.Error as exc:
                if "field limit" in str(exc):
                    raise DatasetError(f"line {line}: a field is longer than {MAX_FIELD_CHARS} "
                                       "characters (the limit of a CSV field)") from exc
                raise DatasetError(f"line {line}: {exc}") from exc
            found = len(fields)
    if found != columns:
        raise DatasetError(f"line {line} has {found} columns, the header has {columns}")
    if len(content) > MAX_FIELD_CHARS:
        longest = max(fields, key=len)
        if len(longest) > MAX_FIELD_CHARS:
            raise DatasetError(f"line {line}: a field of {len(longest)} characters is longer "
                               f"than {MAX_FIELD_CHARS} (the limit of a CSV field)")
    return fields


def _not_a_number(header: list[str], fields: list[str], line: int) -> DatasetError:
    for column, value in zip(header, fields, strict=True):
        try:
            float(value)
        except ValueError:
            shown = value if len(value) <= 40 else value[:40] + "..."
            return DatasetError(f"line {line}, column {column!r}: {shown!r} is not a number",
                                field=LABEL_COLUMN if column == LABEL_COLUMN else "file")
    return DatasetError(f"line {line}: not a number")


def _parse(numbered: list[tuple[int, str]], header: list[str]) -> np.ndarray:
    """The rows of ``(line number, text)`` lines as float64, one row per line."""
    columns = len(header)
    texts = [text for _, text in numbered]
    if (max(map(len, texts)) <= MAX_FIELD_CHARS and not any('"' in t for t in texts)
            and all(t.count(",") == columns - 1 for t in texts)):
        parts = ",".join(texts).split(",")
        try:  # the same float() as below, without a Python loop per line
            flat = np.fromiter(map(float, parts), dtype=np.float64, count=len(parts))
            return flat.reshape(len(texts), columns)
        except ValueError:
            pass  # line by line, to name the line and column
    rows = []
    for number, text in numbered:
        fields = _fields(text, number, columns)
        try:
            rows.append([float(v) for v in fields])
        except ValueError as exc:
            raise _not_a_number(header, fields, number) from exc
    return np.array(rows, dtype=np.float64)


class _Batches:
    """Rows parsed so far, flushed as checked arrays to the raw files and the stats."""

    def __init__(self, header: list[str], label_index: int):
        self.header = header
        self.label_index = label_index
        features = len(header) - 1
        self.moments = ChannelMoments((0, features))
        self.labels = LabelTally()
        self.blocks: list[np.ndarray] = []
        self.lines: list[int] = []
        self.count = 0  # rows written
        self.size = max(1, BLOCK_VALUES // len(header))
        self.data = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.label = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()

    @property
    def rows(self) -> int:
        """Rows parsed so far, written or not."""
        return self.count + len(self.lines)

    def add(self, block: np.ndarray, lines: list[int]) -> None:
        """Rows (float64, one per line number) to check and write."""
        self.blocks.append(block)
        self.lines.extend(lines)
        if len(self.lines) >= self.size:
            self.flush()

    def _refuse(self, bad: np.ndarray, block: np.ndarray, why: str) -> DatasetError:
        row, column = (int(i) for i in np.argwhere(bad)[0])
        name = self.header[column]
        return DatasetError(
            f"line {self.lines[row]}, column {name!r}: {block[row, column]} {why}",
            field=LABEL_COLUMN if name == LABEL_COLUMN else "file",
        )

    def flush(self) -> None:
        if not self.lines:
            return
        block = np.concatenate(self.blocks) if len(self.blocks) > 1 else self.blocks[0]
        # float("1e400") is inf: refuse it here, before a cast makes it int64 min.
        if not np.isfinite(block).all():
            raise self._refuse(~np.isfinite(block), block,
                               "is not a finite number (NaN and infinities are refused)")
        features = np.delete(block, self.label_index, axis=1).astype(np.float32)
        if not np.isfinite(features).all():
            narrow = np.insert(~np.isfinite(features), self.label_index, False, axis=1)
            raise self._refuse(narrow, block, "is too large for a float32 feature")
        labels = np.ascontiguousarray(block[:, self.label_index])
        self.moments.add(features)
        self.labels.add(labels)
        self.data.write(features.tobytes())
        self.label.write(labels.tobytes())
        self.count += len(self.lines)
        self.blocks, self.lines = [], []

    def close(self) -> None:
        self.data.close()
        self.label.close()


def _read_header(lines: _Lines, max_features: int) -> list[str]:
    content = lines.next(MAX_HEADER_CHARS, "the header")
    if content is None or not content.strip():
        raise DatasetError("the CSV is empty; it needs a header row")
    if content.count(",") > max_features:
        raise DatasetError(f"too many feature columns (more than {max_features})")
    try:
        header = [h.strip() for h in next(csv.reader([content]))]
    except csv.Error as exc:
        raise DatasetError(f"line 1 (the header): {exc}") from exc
    if LABEL_COLUMN not in header:
        raise DatasetError(f"the CSV header has no '{LABEL_COLUMN}' column", field="label")
    if len(header) - 1 > max_features:
        raise DatasetError(f"too many feature columns ({len(header) - 1} > {max_features})")
    if len(header) < 2:
        raise DatasetError(f"the CSV needs a feature column besides '{LABEL_COLUMN}'")
    return header


def _label_dtype(labels: LabelTally) -> np.dtype:
    if labels.integral and max(abs(labels.minimum), abs(labels.maximum)) <= MAX_EXACT_INTEGER:
        return np.dtype(np.int64)
    if max(abs(labels.minimum), abs(labels.maximum)) > float(np.finfo(np.float32).max):
        raise DatasetError("label values lie beyond the float32 range", field=LABEL_COLUMN)
    return np.dtype(np.float32)


def convert_csv(
    source: BinaryIO, target: BinaryIO, *, max_rows: int, max_features: int
) -> DatasetSummary:
    """Check the CSV in ``source`` and write it to ``target`` as an npz with ``data``
    (float32 features) and ``label`` (int64 when all labels are whole numbers, else
    float32)."""
    text = io.TextIOWrapper(source, encoding="utf-8-sig", newline="")
    lines = _Lines(text)
    try:
        header = _read_header(lines, max_features)
        batches = _Batches(header, header.index(LABEL_COLUMN))
        try:
            limit = MAX_FIELD_CHARS + CHARS_PER_COLUMN * len(header)
            what = f"a row of {len(header)} columns"
            while (found := lines.block(limit, what)) is not None:
                first, texts = found
                numbered = [(first + i, text) for i, text in enumerate(texts) if text]
                if batches.rows + len(numbered) > max_rows:
                    raise DatasetError(f"the CSV has more than {max_rows} rows")
                if numbered:
                    batches.add(_parse(numbered, header), [n for n, _ in numbered])
            batches.flush()
            if not batches.count:
                raise DatasetError("the CSV has a header but no rows")
            shape = (batches.count, len(header) - 1)
            label_dtype = _label_dtype(batches.labels)
            check_shapes(np.dtype(np.float32), shape, label_dtype, (batches.count,),
                         max_rows=max_rows, max_features=max_features)
            write_npz(target, [
                RawArray("data", batches.data, np.dtype(np.float32), np.dtype(np.float32),
                         shape),
                RawArray("label", batches.label, np.dtype(np.float64), label_dtype,
                         (batches.count,)),
            ])
        finally:
            batches.close()
    finally:
        text.detach()  # the caller owns ``source``
    num_classes = batches.labels.num_classes(label_dtype.kind)
    return DatasetSummary(
        format="csv", num_rows=shape[0], feature_shape=[shape[1]], dtype="float32",
        num_classes=num_classes,
        stats=summarise(shape, batches.moments, batches.labels, label_kind=label_dtype.kind,
                        label_ndim=1),
    )

