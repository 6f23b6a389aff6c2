"""The conversion probe (cluster/probes/universal.py) on local files, with the stand-in's
`deepspeed.checkpoint.ds_to_universal`: new `<tag>_uni` folders and `latest_universal`, the
original tags only read, a second run keeps what is done, a failure leaves nothing loadable."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from rlhf_launch.cluster.probes import universal

STANDIN = Path(__file__).resolve().parents[1] / "standin"


def checkpoint(root: Path, step: int = 10, dp: int = 2) -> Path:
    for role in ("_actor", "_critic"):
        tag = root / role / f"global_step{step}"
        tag.mkdir(parents=True)
        (tag / "state.json").write_text(json.dumps({"step": step, "dp": dp}))
        (tag / "zero_pp_rank_0_mp_rank_00_optim_states.pt").write_bytes(b"x" * 16)
        (root / role / "latest").write_text(f"global_step{step}")
    return root


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes()) for p in root.rglob("*") if p.is_file()}


def test_each_role_is_converted_beside_its_tag_and_latest_universal_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(STANDIN))
    root = checkpoint(tmp_path / "ckpt")
    before = snapshot(root)
    result = universal.convert(str(root), ["actor", "critic"], 60, python=sys.executable)
    assert result["errors"] == []
    for role in ("actor", "critic"):
        info = result["roles"][role]
        assert info["tag"] == "global_step10" and info["universal"] == "global_step10_uni" and not info["skipped"]
        assert (root / f"_{role}" / "latest_universal").read_text() == "global_step10_uni"
        assert json.loads((root / f"_{role}" / "global_step10_uni" / "state.json").read_text())["universal"] is True
        assert (root / f"_{role}" / "latest").read_text() == "global_step10"
    after = snapshot(root)
    assert {k: v for k, v in after.items() if k in before} == before  # the original tags and `latest` untouched
    assert not [p for p in root.rglob("*.partial")]
    again = universal.convert(str(root), ["actor", "critic"], 60, python=sys.executable)
    assert all(info["skipped"] for info in again["roles"].values())
    assert snapshot(root) == after


def test_a_failed_conversion_names_the_error_and_leaves_no_latest_universal(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "nowhere"))  # no deepspeed to run
    root = checkpoint(tmp_path / "ckpt")
    result = universal.convert(str(root), ["actor", "critic"], 60, python=sys.executable)
    assert result["roles"] == {}
    assert "_actor: ds_to_universal exited 1" in result["errors"][0] and "deepspeed" in result["errors"][0]
    assert not (root / "_actor" / "latest_universal").exists()
    assert not (root / "_actor" / "global_step10_uni").exists()


def test_a_conversion_past_its_time_bound_is_cut_short(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(STANDIN))
    monkeypatch.setenv("STANDIN_CONVERT_SECONDS", "30")
    root = checkpoint(tmp_path / "ckpt")
    result = universal.convert(str(root), ["actor"], 1, python=sys.executable)
    assert "took longer than 1s" in result["errors"][0]
    assert not (root / "_actor" / "latest_universal").exists()


def test_a_missing_latest_is_an_error_not_a_guess(tmp_path):
    root = checkpoint(tmp_path / "ckpt")
    os.remove(root / "_actor" / "latest")
    result = universal.convert(str(root), ["actor"], 60)
    assert result["errors"] and "_actor/latest" in result["errors"][0]
