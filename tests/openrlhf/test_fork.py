"""OpenRLHF forks (openrlhf/fork.py): read from a checkout, planned with their own flags, with what
the launcher knows of their nearest stock release, and their own flags passed through unchecked."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support import forks
from typer.testing import CliRunner

from rlhf_launch.cli import report
from rlhf_launch.cli.app import app, main
from rlhf_launch.core.config import load_config
from rlhf_launch.core.launch import prepare
from rlhf_launch.errors import UserError
from rlhf_launch.openrlhf import fork
from rlhf_launch.openrlhf.flagset import load

from conftest import ROOT

MODE = {"name": "rollout.mode", "dest": "rollout.mode", "action": "store", "type": "str", "default": "plain", "choices": ["plain", "cut"]}
CUTS = {"name": "rollout.n_cuts", "dest": "rollout.n_cuts", "action": "store", "type": "int", "default": 1}


def a_fork(tmp_path: Path, version: str = "0.11.2") -> Path:
    return forks.stock_plus(tmp_path / "myfork", version, [MODE, CUTS], own_version="0.11.2")


def config(tmp_path: Path, *overrides: str):
    return load_config(ROOT / "configs" / "tiny-1node.yaml", list(overrides))


def messages(launch, level: str | None = None) -> list[str]:
    return [f"{f.key}: {f.message}" for f in launch.findings if level is None or f.level == level]


def test_a_fork_is_read_from_its_checkout_with_its_nearest_release(tmp_path):
    flags = fork.read(str(a_fork(tmp_path)))
    assert flags.fork is not None
    assert flags.version == "0.11.2"  # shares every stock flag with 0.11.2, and says it is 0.11.2
    assert flags.fork.only == ("rollout.mode", "rollout.n_cuts")
    assert flags.fork.version == "0.11.2" and flags.fork.root == str((tmp_path / "myfork").resolve())
    assert flags.pins == load("0.11.2").pins
    assert "rollout.mode" in flags and flags.flags["rollout.mode"].choices == ("plain", "cut")


def test_the_nearest_release_is_by_flag_overlap_first(tmp_path):
    stock, groups = forks.stock_flags("0.9.8")
    root = forks.write_fork(
        tmp_path / "old", stock + [{"name": "my_flag", "dest": "my_flag", "action": "store_true", "default": False}], groups, "0.5.0"
    )
    flags = fork.read(str(root))
    assert set(flags.flags) - {"my_flag"} == set(load(flags.version).flags)  # a release with exactly the shared flags
    assert flags.fork is not None and flags.fork.only == ("my_flag",) and flags.fork.version == "0.5.0"


def test_an_installed_package_directory_and_its_metadata(tmp_path):
    stock, groups = forks.stock_flags("0.11.2")
    site = tmp_path / "site-packages"
    forks.write_fork(site, stock + [CUTS], groups, None)
    (site / "openrlhf-0.11.2+lab.dist-info").mkdir()
    (site / "openrlhf-0.11.2+lab.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: openrlhf\nVersion: 0.11.2+lab\n")
    flags = fork.read(str(site / "openrlhf"))
    assert flags.fork is not None and flags.fork.version == "0.11.2+lab" and flags.fork.root == str(site.resolve())


def test_a_directory_without_a_trainer_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match=r"openrlhf.source .* holds no openrlhf/cli/train_ppo_ray.py"):
        prepare(config(tmp_path, f"openrlhf.source={tmp_path}"))


def test_plan_renders_the_forks_flags_and_lists_its_own_once(tmp_path):
    root = a_fork(tmp_path)
    launch = prepare(config(tmp_path, f"openrlhf.source={root}", "extra_args.rollout.mode=cut", "extra_args.rollout.n_cuts=4"))
    assert launch.ok, messages(launch, "error")
    assert launch.argv[-4:] == ["--rollout.mode", "cut", "--rollout.n_cuts", "4"]
    own = [m for m in messages(launch) if "own flags pass through unchecked" in m]
    assert own == [
        "extra_args: the fork's own flags pass through unchecked: --rollout.mode, --rollout.n_cuts "
        "(openrlhf 0.11.2, the nearest release, has none of them; only the fork's parser reads them)"
    ]
    assert report.plan_text(launch).startswith(f"plan tiny-1node: the OpenRLHF fork 0.11.2 at {root.resolve()} (nearest release 0.11.2)")
    assert launch.as_json()["openrlhf_fork"]["own_flags"] == ["rollout.mode", "rollout.n_cuts"]


def test_a_value_the_forks_parser_refuses_is_refused(tmp_path):
    root = a_fork(tmp_path)
    launch = prepare(config(tmp_path, f"openrlhf.source={root}", "extra_args.rollout.mode=zigzag", "extra_args.rollout.n_cuts=many"))
    errors = messages(launch, "error")
    assert any("rollout.mode" in m and "zigzag" in m and "'plain', 'cut'" in m for m in errors), errors
    assert any("rollout.n_cuts" in m and "many" in m for m in errors), errors


def test_the_stock_releases_checks_apply_to_the_shared_flags(tmp_path):
    root = a_fork(tmp_path)
    launch = prepare(config(tmp_path, f"openrlhf.source={root}", "train.advantage_estimator=group_norm", "train.n_samples_per_prompt=1"))
    assert any("n_samples_per_prompt > 1" in m for m in messages(launch, "error"))


def test_a_relative_source_is_beside_the_config_and_a_version_is_not_used(tmp_path):
    a_fork(tmp_path)
    data = yaml.safe_load((ROOT / "configs" / "tiny-1node.yaml").read_text())
    data["openrlhf"] = {"source": "myfork", "version": "0.9.8"}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(data))
    launch = prepare(load_config(path))
    assert launch.flags.fork is not None and launch.flags.fork.root == str((tmp_path / "myfork").resolve())
    assert any(m.startswith("openrlhf.version: openrlhf 0.9.8 is not used: the trainer runs the OpenRLHF fork") for m in messages(launch))


def test_a_working_dir_holding_openrlhf_is_the_source_and_plan_says_so(tmp_path):
    root = a_fork(tmp_path)
    launch = prepare(config(tmp_path, f"runtime_env.working_dir={root}", "extra_args.rollout.n_cuts=2"))
    assert launch.ok, messages(launch, "error")
    assert launch.flags.fork is not None and launch.flags.fork.via == "runtime_env.working_dir"
    said = [m for m in messages(launch) if m.startswith("runtime_env.working_dir:")]
    assert len(said) == 1 and "holds an openrlhf package" in said[0] and "Ray puts the working dir first" in said[0]


def test_a_working_dir_without_openrlhf_keeps_the_release(tmp_path):
    (tmp_path / "job").mkdir()
    launch = prepare(config(tmp_path, f"runtime_env.working_dir={tmp_path / 'job'}"))
    assert launch.flags.fork is None and launch.flags.version == "0.11.2"


def test_import_with_openrlhf_source_records_it_and_plan_renders_the_forks_flags(tmp_path, monkeypatch):
    root = a_fork(tmp_path)
    script = tmp_path / "train.sh"
    script.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path m --reward.model_name_or_path r "
        "--data.prompt_dataset d --rollout.mode cut --rollout.n_cuts 3\n"
    )
    runner = CliRunner()
    refused = runner.invoke(app, ["import", str(script), "-o", str(tmp_path / "stock.yaml")])
    assert refused.exit_code == 1 and "does not accept '--rollout.mode cut'; left out" in refused.output  # no release has them
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "train.yaml"
    done = runner.invoke(app, ["import", str(script), "--openrlhf-source", "myfork", "-o", str(out)])
    assert done.exit_code == 0, done.output
    data = yaml.safe_load(out.read_text())
    assert data["openrlhf"] == {"source": str(root.resolve())}
    assert data["extra_args"] == {"rollout.mode": "cut", "rollout.n_cuts": 3}
    planned = runner.invoke(app, ["plan", str(out)])
    assert "--rollout.mode cut" in planned.output and "--rollout.n_cuts 3" in planned.output
    assert planned.output.count("own flags pass through unchecked") == 1


def test_a_fork_without_reward_model_flags_scores_rollouts_itself(tmp_path):
    stock, groups = forks.stock_flags("0.8.0")
    gone = {"reward_pretrain", "reward_num_nodes", "reward_num_gpus_per_node", "colocate_critic_reward"}
    root = forks.write_fork(tmp_path / "rule", [f for f in stock if f["name"] not in gone], groups, "0.5.0")
    launch = prepare(config(tmp_path, f"openrlhf.source={root}", "models.reward=null", "placement.colocate=[actor_ref]"))
    assert launch.ok, messages(launch, "error")
    reward = launch.plan.role("reward")
    assert not reward.enabled and reward.reason == "off: the fork itself (it has no reward model flag) scores rollouts"
    assert not any(t.startswith("--reward") for t in launch.argv)


def test_a_forks_own_converters_read_as_the_fork_reads_them(tmp_path):
    stock, groups = forks.stock_flags("0.8.0")
    own = [
        {"name": "use_multiturn", "dest": "use_multiturn", "action": "store", "type": {"expr": "bool"}, "default": False},
        {"name": "custom_configs", "dest": "custom_configs", "action": "store", "type": {"expr": "json.loads"}, "default": None},
        {"name": "odd", "dest": "odd", "action": "store", "type": {"expr": "str2list"}, "default": None},
    ]
    flags = fork.read(str(forks.write_fork(tmp_path / "conv", stock + own, groups, "0.6.2")))
    args = flags.parse(["--use_multiturn", "False", "--custom_configs", '{"a": 1}', "--odd", "x,y"])
    assert args.use_multiturn is True  # bool("False"): the fork's own parser reads it so
    assert args.custom_configs == {"a": 1} and args.odd == "x,y"
    launch = prepare(config(tmp_path, f"openrlhf.source={tmp_path / 'conv'}", "extra_args.use_multiturn=true"))
    assert launch.ok, messages(launch, "error")
    assert launch.argv[-2:] == ["--use_multiturn", "True"]


def test_import_with_a_source_that_holds_no_trainer_is_a_user_error(tmp_path, capsys):
    script = tmp_path / "train.sh"
    script.write_text("python3 -m openrlhf.cli.train_ppo_ray --pretrain m\n")
    code = main(["import", str(script), "--openrlhf-source", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and f"--openrlhf-source {tmp_path} holds no openrlhf/cli/train_ppo_ray.py" in err and "Traceback" not in err


def test_import_refuses_a_flag_the_forks_parser_lacks_as_the_fork_would(tmp_path, capsys):
    # yyht/openrlhf_async_pipline's run_ray_rl.sh passes --repeatness_threshold, which its fork lacks
    root = a_fork(tmp_path)
    script = tmp_path / "train.sh"
    script.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path m --reward.model_name_or_path r "
        "--data.prompt_dataset d --rollout.mode cut --repeatness_threshold 0.05 --filter_sample\n"
    )
    out = tmp_path / "train.yaml"
    code = main(["import", str(script), "--openrlhf-source", str(root), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert f"the OpenRLHF fork 0.11.2 at {root.resolve()}" in err
    assert "unrecognized arguments: --repeatness_threshold 0.05 --filter_sample" in err and "Traceback" not in err


def test_a_forks_trainer_may_make_its_own_prompts_and_reward_so_plan_warns_naming_it(tmp_path):
    # lfy-123/WIST makes prompts from its own --web_corpus_path; ZefanW/openRLHF_o1 scores with its own
    # --process_reward_pretrain: stock start-up requirements become warnings that name the fork
    unset = ("data.prompt_dataset=null", "models.reward=null", "train.advantage_estimator=reinforce_baseline")
    stock = prepare(config(tmp_path, *unset))
    assert {
        "data.prompt_dataset: no prompt dataset",
        "models.reward: no reward model and no remote reward URL: the trainer cannot score rollouts",
    } <= set(messages(stock, "error"))
    # a fork whose own flags are about something else (rollout.n_cuts) keeps the stock requirements
    other = prepare(config(tmp_path, f"openrlhf.source={a_fork(tmp_path)}", *unset))
    assert {m.split(":")[0] for m in messages(other, "error")} >= {"data.prompt_dataset", "models.reward"}
    own = [
        {"name": "web_corpus_path", "dest": "web_corpus_path", "action": "store", "type": "str", "default": None},
        {"name": "process_reward_pretrain", "dest": "process_reward_pretrain", "action": "store", "type": "str", "default": None},
    ]
    root = forks.stock_plus(tmp_path / "wist", "0.11.2", own, own_version="0.11.2")
    launch = prepare(config(tmp_path, f"openrlhf.source={root}", *unset))
    assert not [m for m in messages(launch, "error") if m.startswith(("data.prompt_dataset", "models.reward"))]
    warned = messages(launch, "warning")
    label = f"the OpenRLHF fork 0.11.2 at {root.resolve()}"
    assert any(m.startswith("data.prompt_dataset: no prompt dataset") and label in m for m in warned), warned
    assert any(m.startswith("models.reward: no reward model") and label in m for m in warned), warned


def test_a_fork_with_no_flags_of_its_own_keeps_the_stock_requirements(tmp_path):
    stock, groups = forks.stock_flags("0.11.2")
    root = forks.write_fork(tmp_path / "same", stock, groups, "0.11.2")
    launch = prepare(config(tmp_path, f"openrlhf.source={root}", "data.prompt_dataset=null"))
    assert "data.prompt_dataset: no prompt dataset" in messages(launch, "error")


def test_a_flag_the_fork_has_is_its_own_though_a_stock_rule_gives_it_to_a_key(tmp_path):
    # lfy-123/WIST (nearest 0.9.0) passes --max_len beside --prompt_max_len/--generate_max_len; 0.9.0's
    # spelling of data.prompt_max_len is the latter, so --max_len is the script's to keep
    stock, groups = forks.stock_flags("0.9.0")
    root = forks.write_fork(tmp_path / "wist", stock + [CUTS], groups, "0.9.0")
    script = tmp_path / "train.sh"
    script.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --pretrain m --reward_pretrain r --prompt_data d "
        "--prompt_max_len 8192 --generate_max_len 8192 --max_len 16384 --rollout.n_cuts 2\n"
    )
    out = tmp_path / "train.yaml"
    runner = CliRunner()
    done = runner.invoke(app, ["import", str(script), "--openrlhf-source", str(root), "-o", str(out)])
    assert done.exit_code == 0, done.output
    data = yaml.safe_load(out.read_text())
    assert data["extra_args"] == {"max_len": 16384, "rollout.n_cuts": 2}
    launch = prepare(load_config(out))
    assert launch.ok, messages(launch, "error")
    assert launch.argv[launch.argv.index("--max_len") + 1] == "16384"


def test_a_fork_whose_parser_is_built_in_a_sibling_module_is_read_from_its_checkout_only(tmp_path):
    # EIT-EAST-Lab/C3: `from openrlhf.cli.train_ppo_ray_tooling import build_parser`
    root = forks.write_sibling_fork(tmp_path / "c3", "0.9.1", [CUTS], outside_call="add_outside")
    (tmp_path / "elsewhere.py").write_text("def add_outside(parser):\n    parser.add_argument('--outside')\n")  # not in the checkout
    flags = fork.read(str(root))
    assert flags.fork is not None and flags.fork.version == "0.1.0" and flags.version == "0.9.1"
    assert flags.fork.only == ("rollout.n_cuts",) and "outside" not in flags


def test_a_forks_own_default_that_no_config_value_holds_is_left_to_the_fork(tmp_path):
    # EIT-EAST-Lab/C3 defaults --vllm_num_engines to -1 ("auto"); a script that leaves it unset must not get 0
    stock, groups = forks.stock_flags("0.9.1")
    flags = [{**f, "default": -1} if f["name"] == "vllm_num_engines" else f for f in stock]
    root = forks.write_fork(tmp_path / "auto", [*flags, CUTS], groups, "0.1.0")
    script = tmp_path / "train.sh"
    script.write_text("python3 -m openrlhf.cli.train_ppo_ray --pretrain m --reward_pretrain r --prompt_data d --rollout.n_cuts 2\n")
    out = tmp_path / "train.yaml"
    done = CliRunner().invoke(app, ["import", str(script), "--openrlhf-source", str(root), "-o", str(out)])
    assert done.exit_code == 0, done.output
    assert "defaults --vllm_num_engines to -1, which placement.vllm.engines cannot hold; left unset (null)" in done.output
    assert yaml.safe_load(out.read_text())["placement"]["vllm"]["engines"] is None
    launch = prepare(load_config(out))
    assert "--vllm_num_engines" not in launch.argv
    assert fork.read(str(root)).parse(launch.argv).vllm_num_engines == -1
    # the engines the fork makes itself are in no count of the plan: it says so
    assert any(
        m.startswith("placement.vllm.engines: unset:") and "defaults --vllm_num_engines to -1" in m for m in messages(launch, "warning")
    )


def test_a_repository_root_whose_fork_lies_in_a_subfolder_is_named_in_the_hint(tmp_path):
    # RUCAIBox/R1-Searcher keeps its fork in OpenRLHF-RAG/: naming the repository's root is a common slip
    stock, groups = forks.stock_flags("0.8.0")
    forks.write_fork(tmp_path / "repo" / "OpenRLHF-RAG", [*stock, CUTS], groups, "0.6.2")
    with pytest.raises(UserError) as caught:
        fork.read(str(tmp_path / "repo"))
    assert "holds no openrlhf/cli/train_ppo_ray.py" in caught.value.message
    assert f"it is in {tmp_path / 'repo' / 'OpenRLHF-RAG'}: name that folder" in (caught.value.hint or "")


def test_a_fork_that_names_flags_in_code_the_reader_cannot_evaluate_is_not_trusted_to_refuse(tmp_path):
    stock, groups = forks.stock_flags("0.9.1")
    root = forks.write_fork(tmp_path / "loopy", [*stock, CUTS], groups, "0.1.0")
    trainer = root / fork.TRAINER
    trainer.write_text(
        trainer.read_text().replace(
            "    args = parser.parse_args()",
            "    for r in roles_from_config():\n        parser.add_argument(f'--{r}_beta', type=float)\n    args = parser.parse_args()",
        )
    )
    assert fork.read(str(root)).fork.unresolved  # the reader says what it could not name
    script = tmp_path / "train.sh"
    script.write_text("python3 -m openrlhf.cli.train_ppo_ray --pretrain m --reward_pretrain r --prompt_data d --actor_beta 0.1\n")
    out = tmp_path / "train.yaml"
    done = CliRunner().invoke(app, ["import", str(script), "--openrlhf-source", str(root), "-o", str(out)])
    assert done.exit_code == 1, done.output  # written, with the flag left out and said why: not refused as the fork's own refusal
    assert "flag(s) in code the reader cannot evaluate" in done.output and out.is_file()
