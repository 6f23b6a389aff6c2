"""doctor and an OpenRLHF fork: every node must run the train_ppo_ray.py the flags were read from
(compared by hash, as a release is compared by version); a fork shipped as the job's working_dir
reaches every node with the job."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

from support import forks

from rlhf_launch.cluster.doctor import probe_code
from rlhf_launch.core.config import load_config
from rlhf_launch.core.launch import prepare
from rlhf_launch.doctor import checks, spec
from rlhf_launch.doctor.checks import Node, Status
from rlhf_launch.openrlhf import fork

from conftest import ROOT

PROBE = probe_code()
CUTS = {"name": "rollout.n_cuts", "dest": "rollout.n_cuts", "action": "store", "type": "int", "default": 1}


def fork_launch(tmp_path: Path, key: str = "openrlhf.source"):
    root = forks.stock_plus(tmp_path / "myfork", "0.11.2", [CUTS])
    cfg = load_config(ROOT / "configs" / "tiny-1node.yaml", [f"{key}={root}", f"checkpoint.ckpt_path={tmp_path / 'ckpt'}"])
    return prepare(cfg), root


def node_facts(launch, trainer_sha256: str | None) -> dict:
    request = spec.build(launch, nonce="n0", version="test")
    facts = PROBE["facts"]({**request, "models": {}, "datasets": {}, "trainer_hash": False})
    facts["packages"]["openrlhf"] = {"version": "0.11.2", "module": True, "module_at": "/opt/fork/openrlhf/__init__.py"}
    facts["openrlhf_trainer_sha256"] = trainer_sha256
    return facts


def software_failures(launch, *facts: dict) -> list[checks.NodeFinding]:
    """The software check's failures about the fork (the test machine lacks the other packages)."""
    nodes = [Node(f"node{i:02d}" + "0" * 30, f"10.0.0.{i + 1}", f) for i, f in enumerate(facts)]
    report = checks.judge(spec.needs(launch), nodes)
    return [f for f in report.findings if f.check == "software" and f.status is Status.FAIL and "not the fork" in f.found]


def test_the_spec_asks_nodes_for_the_trainers_hash(tmp_path):
    launch, root = fork_launch(tmp_path)
    need = spec.needs(launch)
    assert need.fork_sha256 == hashlib.sha256((root / fork.TRAINER).read_bytes()).hexdigest()
    assert not need.fork_shipped
    assert spec.build(launch, nonce="n", version="v")["trainer_hash"] is True


def test_a_node_with_another_fork_fails_like_a_release_mismatch(tmp_path):
    launch, _ = fork_launch(tmp_path)
    same = node_facts(launch, launch.flags.fork.sha256)
    other = node_facts(launch, "f" * 64)
    missing = node_facts(launch, None)
    found = software_failures(launch, same, copy.deepcopy(same), other, missing)
    assert {f.node for f in found} == {"10.0.0.3", "10.0.0.4"}, [f.text() for f in found]
    texts = {f.node: f.found for f in found}
    assert "has another train_ppo_ray.py (sha256 ffffffffffff)" in texts["10.0.0.3"]
    assert "no openrlhf/cli/train_ppo_ray.py at /opt/fork/openrlhf/__init__.py" in texts["10.0.0.4"]
    assert all("not the fork the flags were read from" in t for t in texts.values())


def test_a_fork_in_the_working_dir_ships_with_the_job(tmp_path):
    launch, _ = fork_launch(tmp_path, key="runtime_env.working_dir")
    assert spec.needs(launch).fork_shipped
    assert software_failures(launch, node_facts(launch, None)) == []


def test_the_probe_hashes_the_trainer_its_path_finds(tmp_path):
    launch, root = fork_launch(tmp_path)
    request = {**spec.build(launch, nonce="n0", version="test"), "models": {}, "datasets": {}}
    request["env"] = {**request["env"], "PYTHONPATH": str(root)}
    facts = PROBE["facts"](request)
    assert facts["openrlhf_trainer_sha256"] == launch.flags.fork.sha256
    assert software_failures(launch, facts) == []


def test_a_node_whose_parser_module_differs_fails_though_its_trainer_file_is_the_same(tmp_path):
    root = forks.write_sibling_fork(tmp_path / "c3", "0.11.2", [CUTS])
    cfg = load_config(ROOT / "configs" / "tiny-1node.yaml", [f"openrlhf.source={root}", f"checkpoint.ckpt_path={tmp_path / 'ckpt'}"])
    launch = prepare(cfg)
    assert launch.flags.fork is not None and launch.flags.fork.modules == ("openrlhf.cli.train_ppo_ray_tooling",)
    request = {**spec.build(launch, nonce="n0", version="test"), "models": {}, "datasets": {}}
    assert request["trainer_modules"] == ["openrlhf.cli.train_ppo_ray_tooling"]
    request["env"] = {**request["env"], "PYTHONPATH": str(root)}
    same = PROBE["facts"](request)
    assert same["openrlhf_trainer_sha256"] == launch.flags.fork.sha256  # the probe's sum is the fork reader's
    assert software_failures(launch, same) == []
    # the same train_ppo_ray.py, another parser module: the flags on this node are not those read
    tooling = root / "openrlhf" / "cli" / "train_ppo_ray_tooling.py"
    tooling.write_text(tooling.read_text().replace("    return p\n", "    p.add_argument('--other')\n    return p\n"))
    other = PROBE["facts"](request)
    found = software_failures(launch, other)
    assert len(found) == 1 and "has another train_ppo_ray.py and openrlhf.cli.train_ppo_ray_tooling" in found[0].found


def test_a_checkout_with_crlf_line_endings_reads_the_same_sum_on_the_node(tmp_path):
    launch, root = fork_launch(tmp_path)
    trainer = root / fork.TRAINER
    trainer.write_bytes(trainer.read_bytes().replace(b"\n", b"\r\n"))  # as a Windows checkout holds it
    launch = prepare(
        load_config(ROOT / "configs" / "tiny-1node.yaml", [f"openrlhf.source={root}", f"checkpoint.ckpt_path={tmp_path / 'ckpt'}"])
    )
    assert launch.flags.fork.sha256 == hashlib.sha256(trainer.read_bytes()).hexdigest()
    request = {**spec.build(launch, nonce="n0", version="test"), "models": {}, "datasets": {}}
    request["env"] = {**request["env"], "PYTHONPATH": str(root)}
    assert PROBE["facts"](request)["openrlhf_trainer_sha256"] == launch.flags.fork.sha256
