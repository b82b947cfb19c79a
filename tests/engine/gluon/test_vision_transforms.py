"""gluon.data.vision.transforms give MXNet 1.9.1's numbers on the same images."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import nd
from engine.gluon.data.vision import image_ops, transforms
from tests.oracle import needs_mxnet, run_mxnet


def sample_image(h=20, w=24, seed=0):
    rng = np.random.default_rng(seed)
    base = np.add.outer(np.arange(h) * 9, np.arange(w) * 5)[:, :, None] * [1, 2, 3]
    return np.clip(base % 256 + rng.integers(-30, 30, (h, w, 3)), 0, 255).astype(np.uint8)


IMG = sample_image()
# include pure grays and saturated primaries, where HLS has its special cases
IMG[0, :6] = [[0, 0, 0], [255, 255, 255], [128, 128, 128], [255, 0, 0], [0, 255, 0],
              [0, 0, 255]]

ORACLE = """
x = nd.array(inputs['img'], dtype='uint8')
xf = nd.array(inputs['img'].astype('float32'))
T = gluon.data.vision.transforms
outputs['to_tensor'] = T.ToTensor()(x)
outputs['normalize'] = T.Normalize((0.4, 0.5, 0.6), (0.2, 0.25, 0.3))(T.ToTensor()(x))
outputs['normalize_scalar'] = T.Normalize(0.5, 0.25)(T.ToTensor()(x))
outputs['to_tensor_batch'] = T.ToTensor()(nd.stack(x, x))
outputs['cast'] = T.Cast('float16')(x)
for interp in (0, 1, 2, 3):
    outputs['resize%d' % interp] = T.Resize(10, interpolation=interp)(x)
    outputs['resize_up%d' % interp] = T.Resize((31, 27), interpolation=interp)(x)
outputs['resize_keep'] = T.Resize(12, keep_ratio=True)(x)
outputs['center'] = T.CenterCrop(10)(x)
outputs['center_up'] = T.CenterCrop((30, 26))(x)
outputs['flip_lr'] = nd.image.flip_left_right(x)
outputs['flip_tb'] = nd.image.flip_top_bottom(x)
for name, op in (('brightness', nd.image.random_brightness),
                 ('contrast', nd.image.random_contrast),
                 ('saturation', nd.image.random_saturation),
                 ('hue', nd.image.random_hue)):
    for i, a in enumerate((0.3, 0.9, 1.37)):
        outputs['%s%d' % (name, i)] = op(x, min_factor=a, max_factor=a)
        outputs['%s%d_f' % (name, i)] = op(xf, min_factor=a, max_factor=a)
outputs['lighting'] = nd.image.adjust_lighting(x, alpha=(0.1, -0.2, 0.3))
outputs['lighting_f'] = nd.image.adjust_lighting(xf, alpha=(0.5, 0.2, -0.3))
"""


@pytest.fixture(scope="module")
def mxnet_out():
    return run_mxnet(ORACLE, {"img": IMG})


@needs_mxnet
def test_deterministic_transforms_are_exact(mxnet_out):
    x = nd.array(IMG, dtype="uint8")
    T = transforms
    np.testing.assert_array_equal(T.ToTensor()(x).asnumpy(), mxnet_out["to_tensor"])
    np.testing.assert_array_equal(
        T.Normalize((0.4, 0.5, 0.6), (0.2, 0.25, 0.3))(T.ToTensor()(x)).asnumpy(),
        mxnet_out["normalize"])
    np.testing.assert_array_equal(T.Normalize(0.5, 0.25)(T.ToTensor()(x)).asnumpy(),
                                  mxnet_out["normalize_scalar"])
    np.testing.assert_array_equal(T.ToTensor()(nd.stack(x, x)).asnumpy(),
                                  mxnet_out["to_tensor_batch"])
    cast = T.Cast("float16")(x).asnumpy()
    assert cast.dtype == np.float16
    np.testing.assert_array_equal(cast, mxnet_out["cast"])
    np.testing.assert_array_equal(image_ops.lighting(IMG, (0.1, -0.2, 0.3)),
                                  mxnet_out["lighting"])
    np.testing.assert_array_equal(image_ops.lighting(IMG.astype(np.float32), (0.5, 0.2, -0.3)),
                                  mxnet_out["lighting_f"])


@needs_mxnet
@pytest.mark.parametrize("name", ["brightness", "contrast", "saturation", "hue"])
def test_colour_adjustments_match_mxnet_bit_for_bit(mxnet_out, name):
    kernel = getattr(image_ops, name)
    for i, alpha in enumerate((0.3, 0.9, 1.37)):
        np.testing.assert_array_equal(kernel(IMG, alpha), mxnet_out[f"{name}{i}"],
                                      err_msg=f"{name} {alpha} uint8")
        np.testing.assert_allclose(kernel(IMG.astype(np.float32), alpha),
                                   mxnet_out[f"{name}{i}_f"], rtol=1e-6, atol=1e-4,
                                   err_msg=f"{name} {alpha} float32")


@needs_mxnet
def test_resize_and_center_crop_within_one_level(mxnet_out):
    x = nd.array(IMG, dtype="uint8")
    cases = {f"resize{i}": transforms.Resize(10, interpolation=i) for i in range(4)}
    cases |= {f"resize_up{i}": transforms.Resize((31, 27), interpolation=i) for i in range(4)}
    cases |= {"resize_keep": transforms.Resize(12, keep_ratio=True),
              "center": transforms.CenterCrop(10), "center_up": transforms.CenterCrop((30, 26))}
    for key, transform in cases.items():
        ours, theirs = transform(x).asnumpy(), mxnet_out[key]
        assert ours.shape == theirs.shape, key
        assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1, key
    np.testing.assert_array_equal(transforms.Resize(10, interpolation=0)(x).asnumpy(),
                                  mxnet_out["resize0"])


@needs_mxnet
def test_random_flips_give_the_identity_or_mxnets_flip(mxnet_out):
    engine.random.seed(3)
    seen = {"lr": set(), "tb": set()}
    for _ in range(40):
        for key, transform in (("lr", transforms.RandomFlipLeftRight()),
                               ("tb", transforms.RandomFlipTopBottom())):
            out = transform(IMG)
            flipped = np.array_equal(out, mxnet_out[f"flip_{key}"])
            assert flipped or np.array_equal(out, IMG)
            seen[key].add(flipped)
    assert seen == {"lr": {True, False}, "tb": {True, False}}


def test_random_factors_stay_in_mxnets_ranges():
    engine.random.seed(0)
    gray = np.full((4, 4, 3), 100, np.uint8)
    levels = {int(transforms.RandomBrightness(0.5)(gray)[0, 0, 0]) for _ in range(200)}
    assert min(levels) >= 50 and max(levels) <= 150 and len(levels) > 50
    # contrast blends towards the mean: a flat image stays flat whatever the factor
    assert all((transforms.RandomContrast(0.9)(gray) >= 99).all() for _ in range(20))
    out = transforms.RandomColorJitter(0.2, 0.2, 0.2, 0.1)(IMG)
    assert out.shape == IMG.shape and out.dtype == np.uint8 and not np.array_equal(out, IMG)
    lit = [transforms.RandomLighting(0.1)(IMG).astype(int) - IMG for _ in range(20)]
    assert all(np.abs(d).max() < 30 for d in lit) and any(np.abs(d).max() > 0 for d in lit)


def test_random_resized_crop_with_a_full_area_is_a_resize():
    out = transforms.RandomResizedCrop((12, 10), scale=(1.0, 1.0), ratio=(1.2, 1.2))(IMG)
    np.testing.assert_array_equal(out, transforms.Resize((12, 10))(IMG))
    engine.random.seed(1)
    shapes = {transforms.RandomResizedCrop(8)(IMG).shape for _ in range(10)}
    assert shapes == {(8, 8, 3)}


def test_compose_runs_in_order_and_keeps_the_input_kind():
    t = transforms.Compose([transforms.Resize(8), transforms.ToTensor(),
                            transforms.Normalize(0.5, 0.5)])
    as_nd = t(nd.array(IMG, dtype="uint8"))
    as_np = t(IMG)
    assert isinstance(as_nd, engine.NDArray) and isinstance(as_np, np.ndarray)
    assert as_np.shape == (3, 8, 8) and as_np.dtype == np.float32
    np.testing.assert_array_equal(as_nd.asnumpy(), as_np)


def test_compose_gives_the_steps_results_and_keeps_their_hooks():
    steps = [transforms.Resize(8), transforms.ToTensor(), transforms.Normalize(0.5, 0.5)]
    by_step = nd.array(IMG, dtype="uint8")
    for step in steps:
        by_step = step(by_step)
    composed = transforms.Compose(steps)
    np.testing.assert_array_equal(composed(nd.array(IMG, dtype="uint8")).asnumpy(),
                                  by_step.asnumpy())
    seen = []
    steps[1].register_forward_hook(lambda block, inputs, output: seen.append(output.shape))
    np.testing.assert_array_equal(composed(IMG), by_step.asnumpy())
    assert seen == [(3, 8, 8)]  # a hooked step still runs as a Block, hook included


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="mean must have either 1 or 3 elements"):
        transforms.Normalize((0.1, 0.2), 1.0)(np.zeros((3, 2, 2), np.float32))
    with pytest.raises(ValueError, match=r"\(height, width, channels\)"):
        transforms.ToTensor()(np.zeros((2, 2), np.uint8))


@needs_mxnet
def test_crop_resize_matches_mxnet():
    run = run_mxnet(
        "x = nd.array(inputs['img'], dtype='uint8')\n"
        "T = gluon.data.vision.transforms\n"
        "outputs['crop'] = T.CropResize(3, 2, 10, 7)(x)\n"
        # MXNet 1.9.1 passes interpolation=None on to its resize op, which refuses it
        "outputs['crop_resize'] = T.CropResize(3, 2, 10, 7, size=(5, 4), interpolation=1)(x)\n",
        {"img": IMG})
    np.testing.assert_array_equal(transforms.CropResize(3, 2, 10, 7)(IMG), run["crop"])
    ours = transforms.CropResize(3, 2, 10, 7, size=(5, 4))(IMG).astype(int)
    assert np.abs(ours - run["crop_resize"].astype(int)).max() <= 1
    with pytest.raises(ValueError, match="exceeds the 24x20 image"):
        transforms.CropResize(20, 0, 10, 7)(IMG)


def test_transforms_are_created_by_name_for_job_specs():
    pipeline = transforms.Compose([transforms.create("Resize", size=8),
                                   transforms.create("totensor"),
                                   transforms.create("NORMALIZE", mean=0.5, std=0.5)])
    assert pipeline(IMG).shape == (3, 8, 8)
    assert "randomcolorjitter" in transforms.TRANSFORMS
    with pytest.raises(ValueError, match="unknown transform 'Rotate'"):
        transforms.create("Rotate", rotation_degrees=30)
    with pytest.raises(TypeError):
        transforms.create("Resize", width=3)
