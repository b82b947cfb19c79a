"""core.model_forms lists the zoo's names and options (the api cannot import the engine);
this builds every one with the engine, so the list and the zoo cannot drift apart."""

from __future__ import annotations

import pytest

from core.model_forms import ZOO_MODELS, ZooModel

vision = pytest.importorskip("engine.gluon.model_zoo.vision")


@pytest.mark.parametrize("name", sorted(ZOO_MODELS))
def test_every_offered_zoo_name_builds_with_each_option_it_allows(name: str) -> None:
    samples = {"thumbnail": True, "dropout": 0.1}
    spec = ZooModel.model_validate({"zoo": name, "classes": 7,
                                    **{o: samples[o] for o in ZOO_MODELS[name]}})
    net = vision.get_model(spec.zoo, **spec.engine_kwargs())
    net.initialize()
    # the classifier (a Dense, or MobileNetV2's and SqueezeNet's 1x1 convolution) has 7
    # outputs: classes= reached the constructor (no layer of these nets has 7 otherwise)
    assert any(p.shape[:1] == (7,) for p in net.collect_params().values())


def test_pretrained_weights_are_refused_by_the_engine_not_offered_by_the_spec() -> None:
    with pytest.raises(ValueError):
        ZooModel.model_validate({"zoo": "resnet18_v1", "pretrained": True})
