"""Operators on NCHW maps whose output size is set by attributes: Pad, UpSampling, Crop,
GridGenerator, BilinearSampler, SpatialTransformer, im2col and col2im."""

from __future__ import annotations

from typing import Any

from . import Shape, prod, rule
from .domains import BOOL, REAL, choice, integer, ints

WINDOW = {"kernel": ints(low=1), "stride": ints(low=1), "dilate": ints(low=1),
          "pad": ints(low=0)}


def _maps(shape: Shape, what: str, dims: tuple[int, ...] = (4,)) -> Shape:
    if len(shape) not in dims:
        raise ValueError(f"{what} must be {' or '.join(f'{d}-D' for d in dims)}, got {shape}")
    return shape


@rule("pad", "Pad", attrs={"mode": choice("constant", "edge", "reflect"),
                           "pad_width": ints(low=0), "constant_value": REAL})
def _pad(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    shape = _maps(shapes[0], "the data", (4, 5))
    widths = p.get("pad_width", ())
    if len(widths) != 2 * len(shape):
        raise ValueError(f"pad_width needs 2 values per axis of {shape}, got {widths}")
    if any(widths[:4]):
        raise ValueError("the batch and channel axes cannot be padded")
    if p.get("mode") == "reflect" and any(
            w >= d for i, d in enumerate(shape) for w in widths[2 * i:2 * i + 2]):
        raise ValueError(f"reflect padding {widths} must be smaller than each axis of {shape}")
    return tuple(d + widths[2 * i] + widths[2 * i + 1] for i, d in enumerate(shape))


@rule("UpSampling", attrs={"scale": integer(low=1), "sample_type": choice("nearest"),
                           "num_args": integer(low=1), "num_filter": integer(low=0),
                           "multi_input_mode": choice("concat"), "workspace": integer(low=0)},
      inputs=(1, None))
def _upsampling(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    scale = p.get("scale", 1)
    outs = [_maps(s, "each input") for s in shapes]
    if any(s[0] != outs[0][0] or s[2:] != outs[0][2:] for s in outs):
        raise ValueError(f"inputs {shapes} differ in batch or spatial size")
    n, _, h, w = outs[0]
    return (n, sum(s[1] for s in outs), h * scale, w * scale)


@rule("Crop", attrs={"num_args": integer(low=1), "offset": ints(low=0), "h_w": ints(low=0),
                     "center_crop": BOOL}, inputs=(1, 2))
def _crop(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data = _maps(shapes[0], "the data")
    h, w = shapes[1][2:4] if len(shapes) > 1 else p.get("h_w", (0, 0))
    top, left = p.get("offset", (0, 0))
    if p.get("center_crop", False):
        top, left = (data[2] - h) // 2, (data[3] - w) // 2
    if top < 0 or left < 0 or top + h > data[2] or left + w > data[3]:
        raise ValueError(f"{h}x{w} at {(top, left)} exceeds the input {data}")
    return (data[0], data[1], h, w)


@rule("GridGenerator", attrs={"transform_type": choice("affine", "warp"),
                              "target_shape": ints(low=0)})
def _grid_generator(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data = shapes[0]
    if p.get("transform_type", "affine") == "warp":
        n, two, h, w = _maps(data, "a warp's flow field")
        if two != 2:
            raise ValueError(f"a warp's flow field is (N, 2, H, W), got {data}")
        return data
    target = p.get("target_shape", (0, 0))
    if len(data) != 2 or data[1] != 6:
        raise ValueError(f"affine parameters are (N, 6), got {data}")
    if len(target) != 2 or min(target) < 1:
        raise ValueError(f"target_shape must be (H, W) with positive sizes, got {target}")
    return (data[0], 2) + target


@rule("BilinearSampler", attrs={"cudnn_off": BOOL}, inputs=(2, 2))
def _bilinear_sampler(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data, grid = _maps(shapes[0], "the data"), _maps(shapes[1], "the grid")
    if grid[0] != data[0] or grid[1] != 2:
        raise ValueError(f"the grid must be (N, 2, H, W) for data {data}, got {grid}")
    return data[:2] + grid[2:]


@rule("SpatialTransformer", attrs={"target_shape": ints(low=0),
                                   "transform_type": choice("affine"),
                                   "sampler_type": choice("bilinear"), "cudnn_off": BOOL},
      inputs=(2, 2))
def _spatial_transformer(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data, loc = _maps(shapes[0], "the data"), shapes[1]
    target = p.get("target_shape", (0, 0))
    if loc != (data[0], 6) or len(target) != 2 or min(target) < 1:
        raise ValueError(f"loc must be (N, 6) and target_shape (H, W), got {loc} and {target}")
    return data[:2] + target


def _window(p: dict[str, Any], spatial: int) -> tuple[Shape, Shape, Shape, Shape]:
    kernel = p.get("kernel", ())
    if len(kernel) != spatial:
        raise ValueError(f"kernel must have {spatial} sizes, got {kernel}")
    stride, dilate, pad = (p.get(k) or (d,) * spatial for k, d in
                           (("stride", 1), ("dilate", 1), ("pad", 0)))
    if not len(stride) == len(dilate) == len(pad) == spatial:
        raise ValueError("stride, dilate and pad must have one value per spatial axis")
    return kernel, stride, dilate, pad


def _windows(size: Shape, kernel: Shape, stride: Shape, dilate: Shape, pad: Shape) -> Shape:
    out = tuple((n + 2 * q - d * (k - 1) - 1) // s + 1
                for n, k, s, d, q in zip(size, kernel, stride, dilate, pad, strict=True))
    if any(d < 1 for d in out):
        raise ValueError(f"the kernel {kernel} does not fit the input {size}")
    return out


@rule("im2col", attrs=WINDOW, required=("kernel",))
def _im2col(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data = shapes[0]
    if len(data) < 3:
        raise ValueError(f"expects (N, C, spatial...), got {data}")
    kernel, stride, dilate, pad = _window(p, len(data) - 2)
    blocks = _windows(data[2:], kernel, stride, dilate, pad)
    return (data[0], data[1] * prod(kernel), prod(blocks))


@rule("col2im", attrs={**WINDOW, "output_size": ints(low=1)},
      required=("kernel", "output_size"))
def _col2im(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data, size = shapes[0], p["output_size"]
    kernel, stride, dilate, pad = _window(p, len(size))
    blocks = _windows(size, kernel, stride, dilate, pad)
    if len(data) != 3 or data[1] % prod(kernel) or data[2] != prod(blocks):
        raise ValueError(f"expects (N, C*{prod(kernel)}, {prod(blocks)}), got {data}")
    return (data[0], data[1] // prod(kernel)) + size
