"""The ast reader of train_ppo_ray.py: flags, loop-made flags, defaults, startup facts."""

from __future__ import annotations

import pytest

from rlhf_launch.openrlhf.extract import ExtractError, extract_flags, extract_group_estimators

SOURCE = """
import argparse
from datetime import datetime

def train(args):
    pass

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--actor.num_nodes", type=int, default=1, help="nodes")
    parser.add_argument("--flag", action="store_true", default=False)
    parser.add_argument("--betas", type=float, nargs=2, default=(0.9, 0.95))
    parser.add_argument("--max_samples", type=int, default=int(1e8))
    parser.add_argument("--max_mem", type=float, default=float("inf"))
    parser.add_argument("--run_name", type=str, default="ppo_%s" % datetime.now().strftime("%m"))
    parser.add_argument("--estimator", type=str, choices=["gae", "rloo"], default="gae")
    for prefix in ("actor", "critic"):
        parser.add_argument(f"--{prefix}.adam.lr", type=float, default=1e-6 if prefix == "actor" else 9e-6)
        parser.add_argument(f"--{prefix}.no_x", dest=f"{prefix}.x", action="store_false")
    args = parser.parse_args()
    if args.estimator in ["rloo", "group_norm"]:
        assert args.n_samples_per_prompt > 1, "needs samples"
"""


def test_reads_every_flag_in_order_with_loop_expansion():
    flags = extract_flags(SOURCE)
    names = [f["name"] for f in flags]
    assert names == [
        "actor.num_nodes",
        "flag",
        "betas",
        "max_samples",
        "max_mem",
        "run_name",
        "estimator",
        "actor.adam.lr",
        "actor.no_x",
        "critic.adam.lr",
        "critic.no_x",
    ]
    by_name = {f["name"]: f for f in flags}
    assert by_name["actor.num_nodes"] == {
        "name": "actor.num_nodes",
        "dest": "actor.num_nodes",
        "type": "int",
        "default": 1,
        "action": "store",
    }
    assert by_name["flag"]["action"] == "store_true" and by_name["flag"]["default"] is False
    assert by_name["betas"]["nargs"] == 2 and by_name["betas"]["default"] == (0.9, 0.95)
    assert by_name["max_samples"]["default"] == 100000000
    assert by_name["max_mem"]["default"] == {"expr": 'float("inf")'}
    assert "datetime.now()" in by_name["run_name"]["default"]["expr"]
    assert by_name["estimator"]["choices"] == ["gae", "rloo"]
    assert by_name["actor.adam.lr"]["default"] == 1e-6
    assert by_name["critic.adam.lr"]["default"] == 9e-6
    assert by_name["critic.no_x"]["dest"] == "critic.x" and by_name["critic.no_x"]["default"] is True
    assert "help" not in by_name["actor.num_nodes"]


def test_group_estimators_come_from_the_startup_assert():
    assert extract_group_estimators(SOURCE) == ["rloo", "group_norm"]
    assert extract_group_estimators("x = 1\n") == []


def test_rejects_files_without_flags_and_duplicates():
    with pytest.raises(ExtractError):
        extract_flags("print('hello')\n")
    with pytest.raises(ExtractError, match="twice"):
        extract_flags('p.add_argument("--a")\np.add_argument("--a")\n')


# EIT-EAST-Lab/C3: the trainer imports build_parser from a sibling module whose _add_*(p) helpers add
# the flags to `p` and to argument groups; a constant names a default, BooleanOptionalAction a switch.
C3_TRAINER = """
from openrlhf.cli.train_ppo_ray_tooling import build_parser, normalize_args
from .helpers import add_more
from openrlhf.utils import get_strategy

def train(args):
    strategy = get_strategy(args)

if __name__ == "__main__":
    parser = build_parser()
    add_more(parser)
    parser.add_argument("--last", type=int, default=1)
    args = normalize_args(parser.parse_args())
    train(args)
"""
C3_TOOLING = """
import argparse
from typing import Tuple
_SENTINEL = -1
_MODES: Tuple[str, ...] = ("loo", "full_mean")

def _add_vllm_args(p):
    p.add_argument("--vllm_num_engines", type=int, default=_SENTINEL)
    p.add_argument("--colocate_all_models", action=argparse.BooleanOptionalAction, default=True)

def _add_c3_args(p):
    c3_group = p.add_argument_group("C3")
    c3_group.add_argument("--c3_baseline_mode", type=str, default="loo", choices=list(_MODES))

def unrelated():
    other = argparse.ArgumentParser()
    other.add_argument("--not_the_trainers", type=int)

def normalize_args(args):
    return args

def build_parser():
    p = argparse.ArgumentParser()
    _add_vllm_args(p)
    _add_c3_args(p)
    return p
"""
C3_HELPERS = """
def add_more(parser):
    parser.add_argument("--more", action="store_true")
"""
C3_UTILS = """
import argparse
def get_strategy(args):
    parser = argparse.ArgumentParser()
    parser.add_argument("--utils_only")
"""


def test_a_parser_built_in_modules_of_the_same_checkout_is_followed():
    modules = {
        "openrlhf.cli.train_ppo_ray_tooling": C3_TOOLING,
        "openrlhf.cli.helpers": C3_HELPERS,
        "openrlhf.utils": C3_UTILS,
    }
    asked: list[str] = []

    def load(name: str) -> str | None:
        asked.append(name)
        return modules.get(name)

    flags = extract_flags(C3_TRAINER, load)
    assert [f["name"] for f in flags] == ["vllm_num_engines", "colocate_all_models", "c3_baseline_mode", "more", "last"]
    by = {f["name"]: f for f in flags}
    assert by["vllm_num_engines"]["default"] == -1
    assert by["colocate_all_models"]["action"] == "boolean_optional" and by["colocate_all_models"]["default"] is True
    assert by["c3_baseline_mode"]["choices"] == ["loo", "full_mean"]
    assert "openrlhf.utils" not in asked  # get_strategy(args) builds no trainer parser: not followed
    assert [f["name"] for f in extract_flags(C3_TRAINER)] == ["last"]  # without the checkout's modules: the file alone
    with pytest.raises(ExtractError, match="no parser.add_argument"):
        extract_flags(C3_TRAINER.replace('parser.add_argument("--last", type=int, default=1)', "pass"))


def test_a_boolean_optional_switch_parses_and_renders_both_ways(tmp_path):
    from support import forks

    from rlhf_launch.core.flags import tokens
    from rlhf_launch.openrlhf import fork

    stock, groups = forks.stock_flags("0.9.1")
    own = [{"name": "dual", "dest": "dual", "action": "boolean_optional", "default": True}]
    root = forks.write_fork(tmp_path / "c3", stock + own, groups, "0.1.0")
    assert "'--dual', action=argparse.BooleanOptionalAction" in (root / "openrlhf" / "cli" / "train_ppo_ray.py").read_text()
    flags = fork.read(str(root))
    assert flags.flags["dual"].action == "boolean_optional"
    assert flags.parse(["--no-dual"]).dual is False and flags.parse([]).dual is True
    assert tokens(flags, "dual", False) == ["--no-dual"] and tokens(flags, "dual", True) == ["--dual"]


def test_a_loop_over_a_module_constant_names_its_flags_and_what_cannot_be_named_is_said():
    source = (
        "import argparse\nROLES = ('actor', 'critic')\n\n"
        "if __name__ == '__main__':\n    parser = argparse.ArgumentParser()\n"
        "    for r in ROLES:\n        parser.add_argument(f'--{r}_extra_lr', type=float)\n"
        "    for r in roles_from_somewhere():\n        parser.add_argument(f'--{r}_beta', type=float)\n"
        "    args = parser.parse_args()\n"
    )
    unresolved: list[str] = []
    flags = extract_flags(source, unresolved=unresolved)
    assert [f["name"] for f in flags] == ["actor_extra_lr", "critic_extra_lr"]  # no garbage name for the second loop
    assert unresolved == ["parser.add_argument(f'--{r}_beta', type=float)"]
