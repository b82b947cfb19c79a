"""docs/job-spec.md is the schema's own description: regenerated, it must not change."""

from __future__ import annotations

from core import spec_docs, spec_params


def test_the_checked_in_reference_matches_the_schema() -> None:
    assert spec_docs.DOC_PATH.read_text() == spec_docs.render(), (
        "docs/job-spec.md is stale: run `python -m core.spec_docs`"
    )


def test_the_reference_names_every_class_and_parameter() -> None:
    text = spec_docs.DOC_PATH.read_text()
    for kind in spec_params.KINDS:
        for name in spec_params.names(kind):
            assert f"### `{name}`" in text, (kind, name)
            for param in spec_params.parameters(kind, name):
                assert f"| `{param}` |" in text, (kind, name, param)
    for field in ("batch_size", "every_steps", "keep_last", "update_on_kvstore", "seed"):
        assert f"| `{field}` |" in text
