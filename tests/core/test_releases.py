"""One default OpenRLHF release, and everything built for it agrees: the presets, the image,
the node script, the `cluster` extra and README (scripts/gen_flagsets.py --default keeps them so)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import yaml

from rlhf_launch.openrlhf import flagset, releases

from conftest import CONFIGS, ROOT

DEFAULT = flagset.load(releases.DEFAULT)


def test_the_default_is_a_shipped_release_with_its_pins():
    assert releases.DEFAULT in flagset.supported_versions()
    assert {"ray", "vllm", "deepspeed", "transformers"} <= set(DEFAULT.pins)
    assert DEFAULT.ray_pin == DEFAULT.pins["ray"]


def test_every_preset_targets_the_default_release():
    for path in CONFIGS.glob("*.yaml"):
        assert yaml.safe_load(path.read_text())["openrlhf"]["version"] == releases.DEFAULT, path.name


def test_the_image_pins_what_the_default_release_requires():
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", (ROOT / "docker" / "Dockerfile").read_text(), re.M))
    assert args["OPENRLHF_VERSION"] == releases.DEFAULT
    for package, arg in (("vllm", "VLLM_VERSION"), ("deepspeed", "DEEPSPEED_VERSION"), ("ray", "RAY_VERSION")):
        assert args[arg] == DEFAULT.pins[package], arg
    assert args["TRANSFORMERS_VERSION"] == DEFAULT.pins["transformers"]
    if "flash-attn" in DEFAULT.pins:
        assert args["FLASH_ATTN_VERSION"] == DEFAULT.pins["flash-attn"]


def test_the_cluster_extra_the_node_script_and_readme_name_the_default():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'"openrlhf[vllm]=={releases.DEFAULT}"' in pyproject
    assert f'"ray[default]=={DEFAULT.pins["ray"]}"' in pyproject
    assert set(re.findall(r"rlhf-launch:(\d[\w.]*)", (ROOT / "scripts" / "run-node.sh").read_text())) == {releases.DEFAULT}
    assert set(re.findall(r"rlhf-launch:(\d[\w.]*)", (ROOT / "README.md").read_text())) == {releases.DEFAULT}


def test_making_a_release_the_default_rewrites_every_place(tmp_path):
    """Run `gen_flagsets.py --default` on a copy of the repository, with the release's data
    already there (no download), and check the copy is consistent for the new default."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", ".pytest_cache"), symlinks=True)
    older = "0.10.4"
    code = (
        "import sys, runpy; sys.argv = ['gen_flagsets.py']\n"
        "ns = runpy.run_path('scripts/gen_flagsets.py', run_name='gen')\n"
        f"ns['make_default']({older!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=copy, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    target = flagset.load(older)
    assert f'DEFAULT = "{older}"' in (copy / "src/rlhf_launch/openrlhf/releases.py").read_text()
    for path in (copy / "src/rlhf_launch/presets").glob("*.yaml"):
        assert yaml.safe_load(path.read_text())["openrlhf"]["version"] == older
    docker = (copy / "docker/Dockerfile").read_text()
    assert f"ARG OPENRLHF_VERSION={older}" in docker and f"ARG VLLM_VERSION={target.pins['vllm']}" in docker
    assert f"ARG RAY_VERSION={target.pins['ray']}" in docker
    assert f'"openrlhf[vllm]=={older}"' in (copy / "pyproject.toml").read_text()
    assert f"rlhf-launch:{older}" in (copy / "scripts/run-node.sh").read_text()
    assert set(re.findall(r"rlhf-launch:(\d[\w.]*)", (copy / "README.md").read_text())) == {older}
