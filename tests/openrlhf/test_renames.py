"""renames.json (scripts/gen_renames.py): what each flag that disappears between releases became,
and extra_args written in either era's spelling (or abbreviated) rendered in the target's."""

from __future__ import annotations

import json
import runpy
from collections import Counter
from pathlib import Path

import pytest

from rlhf_launch.core.config import load_config
from rlhf_launch.core.launch import prepare
from rlhf_launch.openrlhf import renames
from rlhf_launch.openrlhf.flagset import load, newest_version, supported_versions, version_key

from conftest import CONFIGS

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "src" / "rlhf_launch" / "openrlhf" / "renames.json"
NEWEST = newest_version()
# Old flags that one release step deliberately merges into one new flag: none so far.
INTENDED_MERGES: set[tuple[str, str]] = set()


def test_renames_json_is_what_the_generator_derives_from_the_flag_sets():
    built = runpy.run_path(str(ROOT / "scripts" / "gen_renames.py"), run_name="gen")["build"]()
    assert built == json.loads(SHIPPED.read_text()), "run scripts/gen_renames.py"
    assert built["releases"] == list(supported_versions())


def test_every_flag_of_every_release_reaches_the_newest_release_or_is_listed_removed():
    newest = load(NEWEST)
    for version in supported_versions():
        for name in load(version).flags:
            found = renames.resolve(name, renames.ANY, newest)
            assert found is not None, f"--{name} of {version} neither maps to {NEWEST} nor is listed as removed"
            if found.removed is not None:
                assert all(r in newest for r in found.replacement), (name, found.replacement)
            else:
                assert found.flags and all(n in newest for n, _ in found.flags), (name, found.flags)


def test_each_change_is_a_real_disappearance_and_each_name_disappears_once():
    versions = list(supported_versions())
    for c in renames.changes():
        before = load(versions[versions.index(c.since) - 1])
        after = load(c.since)
        assert c.old in before and c.old not in after, c
        assert all(n in after and n not in before for n in c.new), c
        assert all(r in after for r in c.replacement), c
        assert c.basis.startswith(("derived: ", "table: ")) and len(c.basis) > len("table: ") + 10, c
    counts = Counter(c.old for c in renames.changes())
    assert [name for name, n in counts.items() if n > 1] == []


def test_no_two_old_flags_become_one_new_flag():
    targets = Counter((c.since, new) for c in renames.changes() for new in c.new)
    merged = {key for key, n in targets.items() if n > 1}
    assert merged == INTENDED_MERGES


def test_counts_match_the_changes():
    data = json.loads(SHIPPED.read_text())
    changes = data["changes"]
    assert data["counts"] == {
        "renamed": len([c for c in changes if c["new"]]),
        "renamed_with_values": len([c for c in changes if c["new"] and "values" in c]),
        "removed_with_replacement": len([c for c in changes if not c["new"] and c["replacement"]]),
        "removed": len([c for c in changes if not c["new"] and not c["replacement"]]),
    }


KNOWN = [
    # (old flag, value, target release, the flags it becomes there)
    ("actor_num_nodes", 2, NEWEST, [("actor.num_nodes", 2)]),
    ("colocate_all_models", True, NEWEST, [("train.colocate_all", True)]),
    ("zero_stage", 3, NEWEST, [("ds.zero_stage", 3)]),
    ("load_checkpoint", True, NEWEST, [("ckpt.load_enable", True)]),
    ("ckpt_path", "/c", NEWEST, [("ckpt.path", "/c")]),
    ("pretrain", "m", NEWEST, [("actor.model_name_or_path", "m")]),
    ("use_wandb", "k", NEWEST, [("logger.wandb.key", "k")]),
    ("flash_attn", True, "0.9.0", [("attn_implementation", "flash_attention_2")]),
    ("flash_attn", False, NEWEST, [("ds.attn_implementation", "eager")]),
    ("bf16", True, NEWEST, [("ds.param_dtype", "bf16")]),
    ("generate_max_len", 512, "0.9.8", [("max_new_tokens", 512)]),
    ("adam_betas", [0.9, 0.99], NEWEST, [("actor.adam.betas", [0.9, 0.99]), ("critic.adam.betas", [0.9, 0.99])]),
    ("l2", 0.1, NEWEST, [("actor.adam.weight_decay", 0.1), ("critic.adam.weight_decay", 0.1)]),
    ("ref_reward_offload", True, NEWEST, [("ref.offload", True), ("reward.offload", True)]),
    ("use_icepop", True, "0.10.4", [("algo.advantage.is_correction_type", "icepop")]),
    # backwards: a newer spelling for an older release
    ("vllm.enforce_eager", True, "0.8.11", [("enforce_eager", True)]),
    ("ds.param_dtype", "bf16", "0.9.1", [("bf16", True)]),
    ("ds.attn_implementation", "eager", "0.8.5", [("flash_attn", False)]),
    ("algo.advantage.is_correction_enable", True, "0.10.0", [("enable_vllm_is_correction", True)]),
]


@pytest.mark.parametrize("name,value,version,expected", KNOWN)
def test_known_renames(name, value, version, expected):
    found = renames.resolve(name, value, load(version))
    assert found is not None and found.removed is None
    assert list(found.flags) == expected


@pytest.mark.parametrize(
    "name,since,replacement",
    [
        ("algo.advantage.is_correction_enable", "0.11.2", ["is_correction_level", "is_correction_mode", "is_correction_gating"]),
        ("algo.advantage.is_correction_type", "0.11.2", ["is_correction_level", "is_correction_mode", "is_correction_gating"]),
        ("enable_vllm_is_correction", "0.11.2", ["is_correction_level", "is_correction_mode", "is_correction_gating"]),
        ("prompt_max_len", "0.9.8", ["data.max_len"]),
        ("perf", "0.10.2", []),
    ],
)
def test_removed_flags_name_their_replacement_in_the_target_spelling(name, since, replacement):
    found = renames.resolve(name, True, load(NEWEST))
    assert found is not None and found.removed is not None and found.removed.since == since
    assert len(found.replacement) == len(replacement)
    assert all(got.endswith(want) and got in load(NEWEST) for got, want in zip(found.replacement, replacement, strict=True))


def test_what_the_data_cannot_map_is_not_guessed():
    assert renames.resolve("ds.attn_implementation", "sdpa", load("0.8.5")) is None  # no switch value means sdpa
    assert renames.resolve("ref.offload", True, load("0.8.11")) is None  # one of two flags that were one
    assert renames.resolve("no_such_flag", 1, load(NEWEST)) is None
    assert renames.resolve("ds.param_dtype", "fp16", load("0.9.1")) is None  # 0.9.1 has bf16 or fp32 only


def test_versions_are_ordered_in_the_data():
    since = [version_key(c.since) for c in renames.changes()]
    assert since == sorted(since)


# ----------------------------------------------------------------------------- extra_args in either spelling


def _launch(extra, version):
    cfg = load_config(CONFIGS / "tiny-1node.yaml")
    return prepare(cfg.model_copy(update={"extra_args": extra}), version=version, environ={})


def _finding(launch, name):
    return next(f for f in launch.findings if f.key == f"extra_args.{name}")


@pytest.mark.parametrize(
    "version,extra,present",
    [
        (NEWEST, {"enforce_eager": True}, ["--vllm.enforce_eager"]),
        (NEWEST, {"adam_betas": [0.9, 0.98]}, ["--actor.adam.betas", "0.9", "0.98", "--critic.adam.betas", "0.9", "0.98"]),
        (NEWEST, {"temperature": 0.7}, ["--rollout.temperature", "0.7"]),
        ("0.8.11", {"vllm.enforce_eager": True}, ["--enforce_eager"]),
        ("0.8.11", {"rollout.temperature": 0.7}, ["--temperature", "0.7"]),
        ("0.9.5", {"algo.kl.estimator": "k3"}, ["--kl_estimator", "k3"]),
    ],
)
def test_extra_args_in_the_other_eras_spelling_render_in_the_targets(version, extra, present):
    launch = _launch(extra, version)
    assert launch.ok, [f for f in launch.findings if f.level == "error"]
    at = launch.argv.index(present[0])
    assert launch.argv[at : at + 3] == present[:3]
    for token in present:
        assert token in launch.argv
    (name,) = extra
    note = _finding(launch, name)
    assert note.level == "warning" and f"--{name}" in note.message and f"openrlhf {version}" in note.message
    load(version).parse(launch.argv)


def test_abbreviated_extra_args_are_written_in_full():
    launch = _launch({"vllm.enforce": True, "rollout.temp": 0.5}, NEWEST)
    assert launch.ok
    assert "--vllm.enforce_eager" in launch.argv and "--rollout.temperature" in launch.argv
    assert "abbreviation of --vllm.enforce_eager" in _finding(launch, "vllm.enforce").message
    old_era_abbreviation = _launch({"enforce_eag": True}, NEWEST)  # an abbreviation of the flat name
    assert old_era_abbreviation.ok and "--vllm.enforce_eager" in old_era_abbreviation.argv


def test_ambiguous_abbreviation_is_an_error():
    launch = _launch({"vllm.en": True}, NEWEST)
    err = _finding(launch, "vllm.en")
    assert err.level == "error" and "ambiguous" in err.message and "vllm.enforce_eager" in err.message


def test_removed_flag_in_extra_args_is_an_error_naming_its_replacement():
    launch = _launch({"algo.advantage.is_correction_enable": True}, "0.11.2")
    err = _finding(launch, "algo.advantage.is_correction_enable")
    assert err.level == "error" and "removed in 0.11.2" in err.message
    assert "--algo.advantage.is_correction_level" in err.message
    old = _launch({"enable_vllm_is_correction": True}, "0.11.2")
    err = _finding(old, "enable_vllm_is_correction")
    assert err.level == "error" and "(as --algo.advantage.is_correction_enable)" in err.message
    gone = _finding(_launch({"perf": True}, NEWEST), "perf")
    assert gone.level == "error" and "with no replacement" in gone.message


def test_a_renamed_flag_the_launcher_owns_is_still_refused():
    launch = _launch({"actor_num_nodes": 2}, NEWEST)
    assert any(
        f.key == "extra_args.actor_num_nodes" and f.level == "error" and "placement.actor.nodes" in f.message for f in launch.findings
    )


def test_layout_extras_read_in_either_spelling():
    cfg = load_config(CONFIGS / "tiny-1node.yaml", ["placement.colocate=[all]", "placement.vllm.engines=2"])
    flat = prepare(cfg.model_copy(update={"extra_args": {"async_train": True}}), version=NEWEST, environ={})
    dotted = prepare(cfg.model_copy(update={"extra_args": {"train.async_enable": True}}), version=NEWEST, environ={})
    assert flat.plan.extras.async_train and dotted.plan.extras.async_train
    assert flat.plan == dotted.plan


# ----------------------------------------------------------------------------- no name in the target


def test_a_flag_with_no_name_in_the_target_is_refused_naming_the_releases_that_have_it():
    launch = _launch({"algo.advantage.is_correction_level": "token", "algo.advantage.is_correction_threshold": 3.0}, "0.8.11")
    err = _finding(launch, "algo.advantage.is_correction_level")
    assert err.level == "error" and "under any name" in err.message and "added after it" in err.message
    having = [v for v in supported_versions() if "algo.advantage.is_correction_level" in load(v)]
    assert having and having[0] in err.message and having[-1] in err.hint
    assert not any("is_correction_level" in token for token in launch.argv)
    assert launch.argv[launch.argv.index("--vllm_is_truncated_threshold") + 1] == "3.0"  # the renamed one renders


def test_a_flag_split_out_of_the_targets_single_flag_points_at_it():
    err = _finding(_launch({"actor.adam.betas": [0.9, 0.95]}, "0.8.11"), "actor.adam.betas")
    assert err.level == "error" and "split --adam_betas" in err.message and err.hint.startswith("write adam_betas")


def test_a_value_a_kind_change_cannot_map_is_refused_naming_the_targets_flag():
    launch = _launch({"bf16": False}, "0.9.2")  # a switch that became --param_dtype bf16/fp16: off was fp32
    err = _finding(launch, "bf16")
    assert err.level == "error" and "--param_dtype" in err.message and "False" in err.message
    assert "--bf16" not in launch.argv
