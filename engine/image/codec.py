"""Image bytes <-> uint8 arrays, with OpenCV's conventions.

MXNet decodes with OpenCV: ``cv2.imdecode`` gives BGR (what ``recordio.unpack_img``
returns) while ``mx.image.imdecode`` converts to RGB by default. Colour JPEGs (nearly every
record of an image data set) are decoded by libjpeg-turbo through simplejpeg, with
libjpeg's default settings, as OpenCV's build of the same library does (the same pixels);
it costs 12 us for a 32x32 image where ``cv2.imdecode`` takes 19 and Pillow 29. Everything
else (PNG, gray or CMYK JPEGs) and any JPEG it refuses (truncated or corrupt: it fails on
libjpeg's warnings) goes through Pillow, which also encodes and says what is wrong.
Both release the GIL while they work, so several threads decode at once.
"""

from __future__ import annotations

import io

import numpy
import simplejpeg
from PIL import Image

from ..base import MXNetError

# A decoded image larger than this is refused (Pillow warns at 89 Mpx and we turn warnings
# into errors elsewhere); an uploaded "image" announcing more is a decompression bomb.
MAX_PIXELS = 178_956_970


class ImageDecodeError(MXNetError, ValueError):
    """The bytes are not an image Pillow can decode (MXNet raises MXNetError here)."""


def _open(buf: bytes | bytearray | memoryview) -> Image.Image:
    try:
        img = Image.open(io.BytesIO(buf))
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        raise ImageDecodeError(f"cannot decode image: {err}") from None
    if img.width * img.height > MAX_PIXELS:
        raise ImageDecodeError(f"image of {img.width}x{img.height} pixels is too large")
    return img


def _decode_jpeg_direct(buf: bytes, flag: int) -> numpy.ndarray | None:
    """Decode a colour JPEG with libjpeg-turbo; None when the file needs the general path."""
    if flag < 0 or buf[:2] != b"\xff\xd8":
        return None
    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(buf)
        if colorspace not in ("YCbCr", "RGB") or not 0 < width * height <= MAX_PIXELS:
            return None
        # strict (the default): a truncated or corrupt file raises instead of coming back
        # with its missing rows filled in
        array: numpy.ndarray = simplejpeg.decode_jpeg(buf, "RGB" if flag > 0 else "GRAY")
    except ValueError:
        return None  # let the general path say what is wrong
    return array


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
    """Decode many images to HWC uint8 RGB, as :func:`decode` with ``flag=1`` does."""
    out = []
    for payload in payloads:
        array = _decode_jpeg_direct(payload, 1)  # no copy of the bytes for the usual file
        out.append(array if array is not None else decode(payload, 1))
    return out
