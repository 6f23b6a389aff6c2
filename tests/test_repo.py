"""The README's two set-up commands and CI stay in step."""

from __future__ import annotations

import re

from conftest import CONFIGS, ROOT


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    first_block = re.search(r"```(?:bash)?\n(.*?)```", text, re.S).group(1)
    return [line for line in first_block.splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_setup_commands():
    install, test = readme_commands()
    assert install.startswith("pip install -e '.[test]' && rlhf-launch plan configs/")
    preset = install.split("configs/")[1].split()[0]
    assert (CONFIGS / preset).is_file()
    assert test == 'python -m pytest -q -m "not slow"'


def test_ci_runs_the_readme_test_command_after_installing():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    _, test = readme_commands()
    assert test in ci
    assert any("pip install" in line and ".[test]" in line for line in ci)
    assert ci.index(test) > next(i for i, line in enumerate(ci) if ".[test]" in line)


QUICK = 'python -m pytest -q -m "not cluster and not slurm and not slow"'


def test_readme_gives_the_quick_subset_as_a_command_with_its_measured_time():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```(?:bash)?\n(.*?)```", text, re.S)
    assert any(block.strip() == QUICK for block in blocks), "the quick subset's command in a code block of its own"
    before = text[: text.index("```bash\n" + QUICK)]
    last = before.rstrip().rsplit("\n\n", 1)[-1]  # the paragraph that introduces the block
    assert re.search(r"\b\d+m\d{2}s\b", last), last  # its real time, e.g. 1m25s


def test_readme_documents_the_ray_variable_the_test_clusters_set():
    from support.ray_cluster import env_for_cluster

    text = " ".join((ROOT / "README.md").read_text().split())
    for name, value in env_for_cluster().items():
        if name.startswith("RAY_"):
            assert f"`{name}={value}`" in text, name
