"""Shipped flag sets: coverage, the rebuilt parser, and `auto` reading an installed openrlhf."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from rlhf_launch.errors import UserError
from rlhf_launch.openrlhf import flagset, releases
from rlhf_launch.openrlhf.extract import extract_flags

from conftest import ROOT

REQUIRED = ["0.8.0", "0.8.11", "0.9.10", "0.10.1", "0.10.2", "0.10.3", "0.10.4", "0.11.0", "0.11.1", "0.11.2"]


def test_required_releases_are_shipped_and_newest_is_default():
    versions = flagset.supported_versions()
    assert set(REQUIRED) <= set(versions)
    assert flagset.newest_version() == max(versions, key=flagset.version_key)
    assert releases.DEFAULT in versions
    assert flagset.for_version(None).version == releases.DEFAULT
    assert flagset.for_version("latest").version == flagset.newest_version()
    assert list(versions) == sorted(versions, key=flagset.version_key)
    assert flagset.version_key("0.9.1") < flagset.version_key("0.9.1.post1") < flagset.version_key("0.9.2")


@pytest.mark.parametrize("version", flagset.supported_versions())
def test_flat_before_0_10_2_dotted_after(version):
    fs = flagset.load(version)
    dotted = flagset.version_key(version) >= flagset.version_key("0.10.2")
    assert fs.dotted is dotted
    # The famous renames.
    if dotted:
        assert {"actor.num_nodes", "ckpt.load_enable", "train.colocate_all", "ds.zero_stage"} <= set(fs.flags)
        assert "actor_num_nodes" not in fs and "load_checkpoint" not in fs
    else:
        assert {"actor_num_nodes", "load_checkpoint", "colocate_all_models", "zero_stage", "pretrain"} <= set(fs.flags)


def test_unknown_release_is_a_user_error_listing_known_ones():
    with pytest.raises(UserError) as info:
        flagset.load("0.7.9")
    assert "0.7.9" in info.value.message and "0.8.0" in info.value.hint


def test_rebuilt_parser_behaves_like_the_trainers():
    fs = flagset.load("0.11.2")
    ns = fs.parse(["--actor.num_nodes", "2", "--ds.adam_offload", "--actor.adam.betas", "0.9", "0.99"])
    assert getattr(ns, "actor.num_nodes") == 2
    assert getattr(ns, "ds.adam_offload") is True
    assert getattr(ns, "actor.adam.betas") == [0.9, 0.99]
    assert getattr(ns, "ds.zero_stage") == 2  # the release's default
    # argparse accepts unambiguous prefixes, as the real trainer does
    assert getattr(fs.parse(["--ds.zero_sta", "3"]), "ds.zero_stage") == 3
    with pytest.raises(UserError, match="--actor_num_nodes"):
        fs.parse(["--actor_num_nodes", "2"])
    with pytest.raises(UserError, match="invalid int"):
        fs.parse(["--actor.num_nodes", "two"])
    with pytest.raises(UserError, match="invalid choice"):
        fs.parse(["--algo.advantage.estimator", "nope"])


def test_group_estimators_differ_by_release():
    assert "dr_grpo" in flagset.load("0.11.2").group_estimators
    assert "dr_grpo" not in flagset.load("0.8.11").group_estimators
    assert "rloo" in flagset.load("0.8.0").group_estimators


FAKE_TRAINER = textwrap.dedent(
    """
    if __name__ == "__main__":
        parser.add_argument("--custom.flag", type=int, default=3)
        parser.add_argument("--actor.num_nodes", type=int, default=1)
    """
)


def _fake_install(site: Path, version: str, trainer_source: str) -> None:
    pkg = site / "openrlhf"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('openrlhf must not be imported')\n")
    (pkg / "cli" / "__init__.py").write_text("")
    (pkg / "cli" / "train_ppo_ray.py").write_text(trainer_source)
    info = site / f"openrlhf-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: openrlhf\nVersion: {version}\n")
    (info / "RECORD").write_text(
        f"openrlhf/__init__.py,,\nopenrlhf/cli/__init__.py,,\nopenrlhf/cli/train_ppo_ray.py,,\nopenrlhf-{version}.dist-info/METADATA,,\n"
    )


def _resolve_auto(site: Path) -> dict:
    code = (
        "import json, sys\n"
        "from rlhf_launch.openrlhf import flagset\n"
        "fs = flagset.for_version('auto')\n"
        "print(json.dumps({'version': fs.version, 'flags': sorted(fs.flags), 'origin': fs.origin,"
        " 'imported': 'openrlhf' in sys.modules}))\n"
    )
    import os

    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_auto_reads_the_installed_trainer_file_without_importing_it(tmp_path):
    _fake_install(tmp_path, "9.9.9", FAKE_TRAINER)
    got = _resolve_auto(tmp_path)
    assert got["version"] == "9.9.9"
    assert got["flags"] == ["actor.num_nodes", "custom.flag"]
    assert got["origin"].endswith("train_ppo_ray.py")
    assert got["imported"] is False


def _published_wheel(version: str, dest: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", f"openrlhf=={version}", "--no-deps", "-q", "-d", str(dest)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    wheels = sorted(dest.glob(f"openrlhf-{version}-*.whl"))
    if done.returncode != 0 or not wheels:
        pytest.skip(f"PyPI unreachable for openrlhf=={version}: {done.stderr.strip()[-200:]}")
    return wheels[0]


@pytest.mark.parametrize("version", ["0.8.11", "0.11.2"])
def test_shipped_data_matches_the_published_wheel(tmp_path, version):
    wheel = _published_wheel(version, tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith("openrlhf/cli/train_ppo_ray.py"))
        source = archive.read(name).decode()
    shipped = json.loads((Path(flagset.__file__).parent / "flagsets" / f"{version}.json").read_text())
    assert json.loads(json.dumps(extract_flags(source))) == shipped["flags"]
    regenerated = runpy.run_path(str(ROOT / "scripts" / "gen_flagsets.py"), run_name="gen")["build"](version, wheel)
    assert json.loads(json.dumps(regenerated)) == shipped  # flags, pins, estimators, the wheel's hash
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(site), str(wheel)],
        check=True,
        timeout=300,
    )
    got = _resolve_auto(site)
    assert got["version"] == version
    assert got["flags"] == sorted(f["name"] for f in shipped["flags"])
