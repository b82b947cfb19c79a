"""Image bytes <-> uint8 arrays through Pillow, with OpenCV's conventions.

MXNet decodes with OpenCV: ``cv2.imdecode`` gives BGR (what ``recordio.unpack_img``
returns) while ``mx.image.imdecode`` converts to RGB by default. Pillow's decoders release
the GIL while they work, so several threads decode at once.
"""

from __future__ import annotations

import io

import numpy
from PIL import Image

# A decoded image larger than this is refused (Pillow warns at 89 Mpx and we turn warnings
# into errors elsewhere); an uploaded "image" announcing more is a decompression bomb.
MAX_PIXELS = 178_956_970


class ImageDecodeError(ValueError):
    """The bytes are not an image Pillow can decode."""


def _open(buf: bytes | bytearray | memoryview) -> Image.Image:
    try:
        img = Image.open(io.BytesIO(buf))
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        raise ImageDecodeError(f"cannot decode image: {err}") from None
    if img.width * img.height > MAX_PIXELS:
        raise ImageDecodeError(f"image of {img.width}x{img.height} pixels is too large")
    return img


_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def jpeg_geometry(buf: bytes) -> tuple[int, int, int] | None:
    """(height, width, components) from a JPEG's frame header, or None if not found."""
    if buf[:2] != b"\xff\xd8":
        return None
    position, end = 2, len(buf)
    while position + 4 <= end:
        if buf[position] != 0xFF:
            return None
        marker = buf[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            position += 2
            continue
        length = (buf[position + 2] << 8) | buf[position + 3]
        if marker in _SOF_MARKERS:
            if position + 10 > end:
                return None
            height = (buf[position + 5] << 8) | buf[position + 6]
            width = (buf[position + 7] << 8) | buf[position + 8]
            return height, width, buf[position + 9]
        if marker == 0xDA or length < 2:  # scan data before any frame header
            return None
        position += 2 + length
    return None


def _decode_jpeg_direct(buf: bytes, flag: int) -> numpy.ndarray | None:
    """Decode a plain colour JPEG straight into an array, skipping Image.open's format
    probing (half the time of a 32x32 image); None when the file needs the general path."""
    geometry = jpeg_geometry(buf)
    if geometry is None or geometry[2] != 3 or flag < 0:
        return None
    height, width, _ = geometry
    if not 0 < width * height <= MAX_PIXELS:
        return None
    mode = "RGB" if flag > 0 else "L"
    try:
        img = Image.frombytes(mode, (width, height), buf, "jpeg", mode, "")
    except (OSError, ValueError):
        return None  # let the general path say what is wrong
    array = numpy.asarray(img)
    return array if array.ndim == 3 else array[:, :, None]


def decode(buf: bytes | bytearray | memoryview, flag: int = 1) -> numpy.ndarray:
    """Decode to HWC uint8 **RGB** (``flag=1``), HW1 gray (``flag=0``) or the file's own
    channels (``flag=-1``: HW1 gray, HWC RGB or RGBA)."""
    data = bytes(buf)
    direct = _decode_jpeg_direct(data, flag)
    if direct is not None:
        return direct
    img = _open(data)
    try:
        if flag == 0:
            if img.format == "JPEG":
                img.draft("L", img.size)  # libjpeg's own luma, as OpenCV's gray JPEG read
            img = img.convert("L")
        elif flag > 0 or img.mode not in ("L", "RGB", "RGBA"):
            if img.mode in ("I;16", "I;16B", "I"):
                img = img.point(lambda v: v / 256).convert("L")  # 16 bit → 8 bit as OpenCV
            img = img.convert("RGB")
        if flag > 0 and img.mode != "RGB":
            img = img.convert("RGB")
        array = numpy.asarray(img)
    except (OSError, SyntaxError, ValueError) as err:
        raise ImageDecodeError(f"cannot decode image: {err}") from None
    if array.ndim == 2:
        array = array[:, :, None]
    return array


def decode_bgr(buf: bytes | bytearray | memoryview, iscolor: int = -1) -> numpy.ndarray:
    """``cv2.imdecode``: HWC BGR (or BGRA), HW for gray."""
    array = decode(buf, iscolor)
    if array.shape[2] == 1:
        return array[:, :, 0]
    if array.shape[2] == 4:
        return numpy.ascontiguousarray(array[:, :, [2, 1, 0, 3]])
    return numpy.ascontiguousarray(array[:, :, ::-1])


def encode(img: numpy.ndarray, img_fmt: str = ".jpg", quality: int = 95) -> bytes:
    """Encode an HWC (or HW) uint8 **RGB** array as JPEG or PNG bytes."""
    array = numpy.asarray(img)
    if array.dtype != numpy.uint8:
        raise ValueError(f"can only encode uint8 images, got {array.dtype}")
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (3, 4)):
        raise ValueError(f"expected an HW, HW1, HW3 or HW4 image, got shape {array.shape}")
    pil = Image.fromarray(array)
    out = io.BytesIO()
    fmt = img_fmt.lower().lstrip(".")
    if fmt in ("jpg", "jpeg"):
        # OpenCV writes 4:2:0 chroma subsampling, Pillow's default at quality < 100 too
        pil.save(out, "JPEG", quality=int(min(max(quality, 1), 100)))
    elif fmt == "png":
        pil.save(out, "PNG", compress_level=int(min(max(quality, 0), 9)))
    else:
        raise ValueError(f"unsupported image format {img_fmt!r}: use '.jpg' or '.png'")
    return out.getvalue()


def encode_bgr(img: numpy.ndarray, img_fmt: str = ".jpg", quality: int = 95) -> bytes:
    """``cv2.imencode``: the array is BGR (or BGRA, or gray)."""
    array = numpy.asarray(img)
    if array.ndim == 3 and array.shape[2] == 3:
        array = array[:, :, ::-1]
    elif array.ndim == 3 and array.shape[2] == 4:
        array = array[:, :, [2, 1, 0, 3]]
    return encode(numpy.ascontiguousarray(array), img_fmt, quality)


def decode_rgb_batch(payloads: list[bytes]) -> list[numpy.ndarray]:
    """Decode many images to HWC uint8 RGB, as :func:`decode` with ``flag=1`` does.

    Colour JPEGs are decoded side by side into one shared canvas (each into its own
    rectangle) and read out with a single copy, which removes most of Pillow's per-image
    Python work: for small images (CIFAR's 32x32) that work costs as much as libjpeg itself.
    Anything else goes through :func:`decode`.
    """
    geometries = [jpeg_geometry(p) for p in payloads]
    direct = [i for i, g in enumerate(geometries)
              if g is not None and g[2] == 3 and 0 < g[0] * g[1] <= MAX_PIXELS]
    out: list[numpy.ndarray | None] = [None] * len(payloads)
    if direct:
        width = max(geometries[i][1] for i in direct)  # type: ignore[index]
        height = sum(geometries[i][0] for i in direct)  # type: ignore[index]
        if width * height <= MAX_PIXELS:
            canvas = Image.new("RGB", (width, height))
            places: list[tuple[int, int, int, int]] = []
            top = 0
            for i in direct:
                h, w, _ = geometries[i]  # type: ignore[misc]
                decoder = Image._getdecoder("RGB", "jpeg", ("RGB", ""))
                decoder.setimage(canvas.im, (0, top, w, top + h))
                consumed, error = decoder.decode(payloads[i])
                decoder.cleanup()
                if consumed >= 0 or error != 0:
                    places.append((i, -1, 0, 0))  # let decode() report it
                else:
                    places.append((i, top, h, w))
                top += h
            pixels = numpy.asarray(canvas)
            for i, y, h, w in places:
                if y >= 0:
                    out[i] = pixels[y:y + h, :w]
    return [array if array is not None else decode(payloads[i], 1)
            for i, array in enumerate(out)]
