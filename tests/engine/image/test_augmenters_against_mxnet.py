# ruff: noqa: E501 - each case is one expression string shared verbatim with MXNet
"""Differential tests: ``mx.image``'s augmenters, ``CreateAugmenter`` and ``ImageIter`` as in
MXNet 1.9.1, and ``mx.img`` as another name of ``mx.image``.

Augmenters whose result does not depend on a random draw (the resizes and crops, casts,
normalisation, a flip or gray with probability 1, jitters of strength 0) are compared pixel
for pixel; ``CreateAugmenter`` by the augmenters it builds (``dumps()``). ``ImageIter`` reads
PNG images (lossless, so both decoders give the same pixels) from a list, a list file and an
indexed RecordIO file, with each ``last_batch_handle``.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine import image
from tests.engine.gluon.differential import compare, oracle_results
from tests.oracle import needs_mxnet

pytestmark = needs_mxnet

_rng = np.random.default_rng(27)
_pictures = [_rng.integers(0, 256, (6, 6, 3), dtype=np.uint8) for _ in range(5)]
INPUTS = {
    "img": _rng.integers(0, 256, (8, 10, 3)).astype(np.float32),
    "mean": np.array([120.0, 110.0, 100.0], np.float32),
    "std": np.array([60.0, 50.0, 55.0], np.float32),
    **{f"png{i}": np.frombuffer(image.imencode(p, ".png"), np.uint8)
       for i, p in enumerate(_pictures)},
}

AUGMENTERS = {
    "center_crop": "mx.image.CenterCropAug((6, 4))",
    "force_resize_nearest": "mx.image.ForceResizeAug((5, 4), interp=0)",
    "resize_short_area": "mx.image.ResizeAug(4, interp=3)",
    "cast": "mx.image.CastAug('float16')",
    "color_normalize": "mx.image.ColorNormalizeAug(nd.array(inputs['mean']), nd.array(inputs['std']))",
    "color_normalize_numpy_mean_only": "mx.image.ColorNormalizeAug(inputs['mean'], None)",
    "flip_always": "mx.image.HorizontalFlipAug(1.0)",
    "flip_never": "mx.image.HorizontalFlipAug(0.0)",
    "gray_always": "mx.image.RandomGrayAug(1.0)",
    "brightness_zero": "mx.image.BrightnessJitterAug(0)",
    "contrast_zero": "mx.image.ContrastJitterAug(0)",
    "saturation_zero": "mx.image.SaturationJitterAug(0)",
    "hue_zero": "mx.image.HueJitterAug(0)",
    "lighting_zero": "mx.image.LightingAug(0, np.array([55.46, 4.794, 1.148]), np.eye(3))",
    "sequential": "mx.image.SequentialAug([mx.image.CenterCropAug((8, 6)), mx.image.HorizontalFlipAug(1.0)])",
}

APPLY = """
aug = {expr}
out = aug(nd.array(inputs['img']))
outputs['out'] = out
result['dtype'] = np.dtype(out.dtype).name
result['dumps'] = aug.dumps()
"""

CREATE = """
kwargs = dict(resize=12, rand_crop=True, rand_mirror=True, mean=True, std=True, brightness=0.1,
              contrast=0.2, saturation=0.3, hue=0.1, pca_noise=0.05, rand_gray=0.2,
              inter_method=1)
for name, options in [('plain', {}), ('everything', kwargs),
                      ('random_sized', dict(rand_crop=True, rand_resize=True)),
                      ('numpy_mean', dict(mean=inputs['mean'], std=inputs['std']))]:
    augs = mx.image.CreateAugmenter((3, 8, 8), **options)
    result[name] = [aug.dumps() if not isinstance(aug.dumps(), list) else
                    [aug.dumps()[0], sorted(aug.dumps()[1])] for aug in augs]
"""

ITERATE = """
import os, tempfile
folder = tempfile.mkdtemp()
names = []
for i in range(5):
    names.append(f'{i}.png')
    with open(os.path.join(folder, names[-1]), 'wb') as f:
        f.write(inputs[f'png{i}'].tobytes())
with open(os.path.join(folder, 'list.lst'), 'w') as f:
    for i, name in enumerate(names):
        f.write(f'{i}\\t{i * 2}\\t{name}\\n')
rec = mx.recordio.MXIndexedRecordIO(os.path.join(folder, 'r.idx'), os.path.join(folder, 'r.rec'), 'w')
for i in range(5):
    rec.write_idx(i, mx.recordio.pack(mx.recordio.IRHeader(0, float(i) + 0.5, i, 0),
                                      inputs[f'png{i}'].tobytes()))
rec.close()
sources = {
    'list': dict(imglist=[[float(i), name] for i, name in enumerate(names)], path_root=folder),
    'list_file': dict(path_imglist=os.path.join(folder, 'list.lst'), path_root=folder),
    'record': dict(path_imgrec=os.path.join(folder, 'r.rec'), path_imgidx=os.path.join(folder, 'r.idx')),
}
for source, options in sources.items():
    for handle in ['pad', 'discard', 'roll_over']:
        it = mx.image.ImageIter(2, (3, 6, 6), last_batch_handle=handle, **options)
        for e in range(2):
            pads = []
            for i, batch in enumerate(it):
                outputs[f'{source}.{handle}.{e}.{i}.data'] = batch.data[0]
                outputs[f'{source}.{handle}.{e}.{i}.label'] = batch.label[0]
                pads.append(batch.pad)
            result[f'{source}.{handle}.{e}'] = pads
            it.reset()
result['provide'] = [[d[0], list(d[1])] for d in it.provide_data + it.provide_label]
result['alias'] = mx.img.image.imread is mx.image.imread or mx.img.imread is mx.image.imread
"""

CASES = {name: APPLY.format(expr=expr) for name, expr in AUGMENTERS.items()}
CASES["create_augmenter"] = CREATE
CASES["image_iter"] = ITERATE


@pytest.fixture(scope="module")
def mxnet():
    return oracle_results(CASES, INPUTS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_image_pipeline_matches_mxnet(mxnet, name: str) -> None:
    ours, theirs = compare(CASES, name, INPUTS, mxnet, rtol=1e-5, atol=1e-3)
    assert ours == theirs
