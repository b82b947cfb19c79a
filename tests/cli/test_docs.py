"""issue 15.9: the README and docs are read on the repository alone and match the CLI."""

from __future__ import annotations

import re

import yaml

from tests.cli.conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)")
PATH_IN_CODE = re.compile(r"`((?:\.\./|docs/|examples/|docker/)[^`\s]+)`")


def test_docs_cite_only_files_that_are_in_the_repository() -> None:
    for doc in DOCS:
        text = doc.read_text()
        assert "../shared" not in text, f"{doc.name} cites a file outside the repository"
        for target in LINK.findall(text) + PATH_IN_CODE.findall(text):
            if "://" in target or target == "docs/job-spec.md":  # job-spec: the API side
                continue
            assert (doc.parent / target).exists() or (ROOT / target).exists(), \
                f"{doc.name} cites {target}, which is not in the repository"


def test_no_internal_build_brief_among_the_user_docs() -> None:
    assert not (ROOT / "docs" / "team-brief.md").exists()


def test_tour_output_matches_the_cli() -> None:
    """The `rudder ls` header and the examples the tours submit are the real ones."""
    from rudder.commands import JOB_COLUMNS

    assert "EPOCHS" in JOB_COLUMNS
    for doc in (ROOT / "README.md", ROOT / "docs" / "tour.md"):
        text = doc.read_text()
        assert not re.search(r"\bEPOCH\b", text), doc.name
        for example in re.findall(r"rudder submit (examples/\S+)", text):
            assert (ROOT / example).exists(), f"{doc.name}: {example}"
        # An epoch line agrees with the epochs of an example the doc names (not `3/12`
        # for a 300-epoch job).
        named = set(re.findall(r"examples/[\w-]+\.yaml", text))
        loaded = [yaml.safe_load((ROOT / e).read_text()) for e in named]
        epochs = {spec["epochs"] for spec in loaded if isinstance(spec, dict)}  # (not rules)
        for shown in re.findall(r"epoch \d+/(\d+)", text):
            assert int(shown) in epochs, f"{doc.name}: epoch x/{shown}, examples: {epochs}"
