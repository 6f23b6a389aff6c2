"""Reading OpenRLHF's checkpoint layout, and telling shared storage from per-node disks."""

from __future__ import annotations

from rlhf_launch.runs.checkpoints import compare_nodes, parse, read_local, resume_findings


def make(root, steps=(2, 4), latest="global_step4", critic=True, hf=(4,)):
    for role in ("_actor", "_critic") if critic else ("_actor",):
        for step in steps:
            (root / role / f"global_step{step}").mkdir(parents=True)
        if latest is not None:
            (root / role / "latest").write_text(latest + "\n")
    for step in hf:
        (root / f"global_step{step}_hf").mkdir(parents=True)


def test_reads_the_layout_and_the_latest_step(tmp_path):
    make(tmp_path)
    state = read_local(tmp_path)
    assert state.status == "ok" and state.latest_step == 4
    assert state.actor.steps == (2, 4) and state.roles["critic"].latest == "global_step4"
    assert state.hf_steps == (4,)
    assert resume_findings(state, allow_fresh=False) == []


def test_no_actor_dir_means_a_fresh_start(tmp_path):
    state = read_local(tmp_path / "missing")
    assert state.status == "none" and state.latest_step is None and not state.exists
    assert resume_findings(state, allow_fresh=False)[0].level == "error"
    assert resume_findings(state, allow_fresh=True)[0].level == "warning"


def test_actor_without_latest_is_broken(tmp_path):
    make(tmp_path, latest=None, critic=False)
    state = read_local(tmp_path)
    assert state.status == "broken"
    assert "no `latest` file" in state.problems()[0]
    assert "broken checkpoint" in resume_findings(state, allow_fresh=True)[0].message


def test_latest_naming_a_missing_step_is_broken(tmp_path):
    make(tmp_path, steps=(2,), latest="global_step6", critic=False)
    assert "not in _actor/" in read_local(tmp_path).problems()[0]


def _listing(latest):
    roles = {} if latest is None else {"_actor": {"entries": [latest], "latest": latest}}
    return {"path": "/ckpt", "exists": True, "root": ["_actor"] if roles else [], "roles": roles}


def test_nodes_that_see_different_checkpoints_are_not_on_shared_storage():
    same = {"a": {"ip": "10.0.0.1", "listing": _listing("global_step4")}, "b": {"ip": "10.0.0.2", "listing": _listing("global_step4")}}
    assert compare_nodes(same) == []
    split = {"a": {"ip": "10.0.0.1", "listing": _listing("global_step4")}, "b": {"ip": "10.0.0.2", "listing": _listing(None)}}
    finding = compare_nodes(split)[0]
    assert finding.level == "error" and finding.key == "checkpoint.ckpt_path"
    assert "10.0.0.1: latest global_step4" in finding.message and "10.0.0.2: latest none" in finding.message
    assert parse(split["b"]["listing"]).status == "none"


def test_a_latest_older_than_the_newest_step_on_disk_is_flagged(tmp_path):
    """A fresh run over another's steps leaves `latest` at its own step 5 beside step 40."""
    from rlhf_launch.runs.checkpoints import state_findings

    for step in (30, 40, 5):
        (tmp_path / "_actor" / f"global_step{step}").mkdir(parents=True)
    (tmp_path / "_actor" / "latest").write_text("global_step5")
    [finding] = state_findings(read_local(tmp_path))
    assert finding.level == "warning" and "global_step40 is on disk" in finding.message and "loads step 5" in finding.message
    (tmp_path / "_actor" / "latest").write_text("global_step40")
    assert state_findings(read_local(tmp_path)) == []
