"""The checkpoint storage budget: ZeRO saves x max_num, plus an HF export, at ckpt_path."""

from __future__ import annotations

import json

import pytest

from rlhf_launch.cli.report import plan_text
from rlhf_launch.core.config import load_config, validate
from rlhf_launch.core.launch import prepare
from rlhf_launch.core.plan import build_plan
from rlhf_launch.core.shapes import KNOWN
from rlhf_launch.core.storage import GIB, TIB, StorageBudget, budget

from conftest import CONFIGS, run_cli

LLAMA70 = KNOWN["llama-2-70b"].params


def make(estimator="gae", save_steps=100, save_hf=False, max_num=3, actor="meta-llama/Llama-2-70b-chat-hf", **models):
    data = {
        "name": "t",
        "models": {"actor": actor, "reward": "/mnt/rm/llama-2-70b-rm", **models},
        "train": {"advantage_estimator": estimator},
        "checkpoint": {"save_steps": save_steps, "save_hf": save_hf, "max_num": max_num},
    }
    cfg = validate(data)
    return budget(cfg, build_plan(cfg))


def test_70b_actor_and_critic_save_14_bytes_per_parameter_each():
    assert 68.5e9 < LLAMA70 < 69.5e9  # Llama-2-70B: ~69e9 parameters
    b = make()
    assert set(b.per_save) == {"actor", "critic"}
    assert b.per_save["actor"] == pytest.approx(14 * LLAMA70)
    assert b.per_save["critic"] == pytest.approx(14 * LLAMA70)
    assert b.per_save_total == pytest.approx(28 * LLAMA70)
    assert b.hf_export == 0.0
    assert b.required == pytest.approx(3 * 28 * LLAMA70)


@pytest.mark.parametrize("estimator", ["group_norm", "reinforce", "rloo"])
def test_without_a_critic_only_the_actor_is_saved(estimator):
    b = make(estimator=estimator)
    assert set(b.per_save) == {"actor"}
    assert b.required == pytest.approx(3 * 14 * LLAMA70)
    assert "critic" not in " ".join(b.lines())


def test_save_hf_adds_one_bf16_export_of_the_actor_which_is_not_rotated():
    off, on = make(), make(save_hf=True)
    assert on.hf_export == pytest.approx(2 * LLAMA70)
    assert on.required - off.required == pytest.approx(2 * LLAMA70)
    text = " ".join(on.lines())
    assert "HF export" in text and "not rotated" in text


def test_max_num_multiplies_the_zero_saves():
    assert make(max_num=5).required == pytest.approx(5 / 3 * make(max_num=3).required)


def test_no_saves_need_no_space():
    b = make(save_steps=-1, save_hf=True)
    assert b.required == 0.0
    assert b.as_json()["required_gib"] == 0.0
    assert "no checkpoints are saved" in b.lines()[0]


def test_an_unknown_model_is_unknown_not_guessed():
    b = make(actor="acme/mystery-model", reward=None, reward_remote_url="http://rm")
    assert b.per_save["actor"] is None and b.per_save_total is None and b.required is None
    assert b.as_json()["required_gib"] is None
    assert "unknown" in b.lines()[0] and "acme/mystery-model" in b.lines()[0]
    # A known critic does not make the unknown actor known.
    mixed = make(actor="acme/mystery-model")
    assert mixed.per_save["critic"] == pytest.approx(14 * LLAMA70) and mixed.required is None


def test_params_billion_alone_is_enough_for_a_size():
    b = make(actor="acme/mystery-model", reward=None, reward_remote_url="http://rm", params_billion=7.0, save_hf=True)
    assert b.per_save == {"actor": pytest.approx(14 * 7e9), "critic": pytest.approx(14 * 7e9)}
    assert b.hf_export == pytest.approx(2 * 7e9)


def test_budget_json_and_text():
    b = StorageBudget(per_save={"actor": 2 * TIB, "critic": None}, max_num=2, hf_export=0.0, save_steps=10)
    assert b.as_json() == {
        "per_save_gib": {"actor": 2048.0, "critic": None},
        "per_save_total_gib": None,
        "max_num": 2,
        "hf_export_gib": 0.0,
        "save_steps": 10,
        "required_gib": None,
    }
    small = StorageBudget(per_save={"actor": 10 * GIB}, max_num=3, hf_export=0.0, save_steps=10)
    assert small.lines() == ["checkpoint storage at ckpt_path: actor 10.0 GiB per save x max_num 3 = 30.0 GiB; needs 30.0 GiB free"]


def test_the_70b_preset_plan_shows_and_reports_its_budget():
    launch = prepare(load_config(CONFIGS / "llama70b-4node.yaml", []))
    assert launch.storage is not None
    assert launch.storage.required == pytest.approx(3 * 28 * LLAMA70 + 2 * LLAMA70)
    text = plan_text(launch)
    assert "checkpoint storage at ckpt_path: actor 0.88 TiB + critic 0.88 TiB per save x max_num 3" in text
    assert "placement (Ray PACK, in OpenRLHF's order):" in text
    assert text.index("placement (Ray PACK") < text.index("memory per GPU") < text.index("checkpoint storage")
    assert launch.as_json()["storage"]["required_gib"] == pytest.approx(round(launch.storage.required / GIB, 1))


def test_plan_cli_shows_picture_and_storage():
    done = run_cli("plan", str(CONFIGS / "llama70b-4node.yaml"))
    assert done.returncode == 0, done.stderr
    assert "  node3  " in done.stdout and "checkpoint storage at ckpt_path:" in done.stdout
    out = json.loads(run_cli("plan", str(CONFIGS / "llama70b-4node.yaml"), "--json").stdout)
    assert out["storage"]["per_save_gib"]["actor"] == pytest.approx(14 * LLAMA70 / GIB, abs=0.1)
