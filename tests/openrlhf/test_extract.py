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
