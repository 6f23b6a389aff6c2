"""No OpenRLHF example script at any tag from v0.8.0 is refused for memory on the hardware
OpenRLHF's README names (80 GB A100 / H100, stated). The scripts are the import round trip's corpus
(tests/data/scripts/field/MANIFEST.yaml, `origin: openrlhf`), each read with the release its
copies name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.launch import prepare
from rlhf_launch.importer import import_script

FIELD = Path(__file__).parents[1] / "data" / "scripts" / "field"
README_GPU_GB = 80  # OpenRLHF's README: "A100 80G" / "H100 80G" nodes


def _examples() -> list[tuple[str, dict[str, Any]]]:
    data = yaml.safe_load((FIELD / "MANIFEST.yaml").read_text())
    return [(Path(e["file"]).name, e) for e in data["scripts"] if e["origin"] == "openrlhf"]


EXAMPLES = _examples()


@pytest.mark.parametrize("entry", [e for _, e in EXAMPLES], ids=[name for name, _ in EXAMPLES])
def test_openrlhfs_examples_are_not_refused_for_memory(entry: dict[str, Any]) -> None:
    text = (FIELD / entry["file"]).read_text()
    variables = {str(k): str(v) for k, v in (entry.get("vars") or {}).items()}
    imported = import_script(text, name="example", environ=variables, script_version=entry.get("release"))
    data = imported.data | {"cluster": {**imported.data.get("cluster", {}), "gpu_memory_gb": README_GPU_GB}}
    launch = prepare(LaunchConfig.model_validate(data), environ={})
    refused = [f.message for f in launch.findings if f.reason == "memory"]
    assert refused == [], refused
