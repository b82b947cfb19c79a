"""Issue 26 item 15: an error is printed once, leading with its cause."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.api.specs import digits_spec
from tests.cli.conftest import Cli


def test_a_field_typo_is_one_line_that_names_the_field_meant(cli: Cli, tmp_path: Path) -> None:
    spec = digits_spec(model=[{"type": "Dense", "unit": 128, "activation": "relu"},
                              {"type": "Dense", "units": 10}])
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = cli("submit", str(path))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: model.0.unit: unknown field; did you mean units? (422 validation_error)"]


def test_several_errors_print_each_field_once(cli: Cli, tmp_path: Path) -> None:
    spec = digits_spec(epochs=0, device="tpu")
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    lines = cli("submit", str(path)).stderr.splitlines()
    assert lines[0].startswith("error: epochs: ") and lines[0].endswith(
        "(and 1 more) (422 validation_error)"), lines
    assert len(lines) == 2 and lines[1].startswith("  device: "), lines
