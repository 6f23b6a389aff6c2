"""Bad input of every kind: exit 2, one message naming the key or file, and never a hang."""

from __future__ import annotations

import os
import time

import pytest

from rlhf_launch.core.config import MAX_CONFIG_BYTES, load_config

from conftest import run_cli

GOOD = """\
name: t
models: {actor: org/actor, reward: org/rm}
data: {prompt_dataset: org/prompts}
placement:
  vllm: {engines: 1}
"""

LAUGHS = "name: t\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)
)


def refused(path, *args: str, timeout: float = 30) -> str:
    """Run `plan` on the file; assert exit 2, quickly, with one error; return that message."""
    start = time.monotonic()
    done = run_cli("plan", str(path), *args, timeout=timeout)
    assert time.monotonic() - start < timeout
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    return errors[0]


@pytest.mark.parametrize(
    "text,words",
    [
        (GOOD + "train:\n  seed: 1\n  seed: 2\n", ["cfg.yaml:8", "duplicate key 'seed'", "first at line 7"]),
        (GOOD.replace("name: t\n", "name: t\nname: u\n"), ["cfg.yaml:2", "duplicate key 'name'"]),
        (LAUGHS, ["cfg.yaml:", "aliases expand to more than 100000 values"]),
        ("name: t\nextra_args: &x {again: *x}\n", ["cfg.yaml:2", "alias refers to the value that holds it"]),
        ("name: t\nextra_args: {deep: " + "[" * 5000 + "]" * 5000 + "}\n", ["cfg.yaml", "nested too deeply"]),
        (GOOD + "cluster: {address: 'http//head:8265'}\n", ["cfg.yaml:6", "cluster.address", "not an http(s) address"]),
        (GOOD + "cluster: {address: 'head:99999'}\n", ["cluster.address", "port 99999"]),
        (GOOD + "cluster: {address: 'ray://head:10001'}\n", ["cluster.address"]),
        (GOOD + "checkpoint: {save_steps: 0}\n", ["cfg.yaml:6", "checkpoint.save_steps", "-1 (never) or a positive number"]),
        (GOOD + "train: {eval_steps: -5}\n", ["train.eval_steps"]),
        (GOOD + "train: {seed: -1}\n", ["train.seed"]),
        (GOOD + "train: {is_correction_threshold: [0.1, 1, 5]}\n", ["train.is_correction_threshold", "HIGH or [LOW, HIGH]"]),
        (GOOD.replace("reward: org/rm", "reward_func: rules.txt"), ["models.reward_func", "must be a Python file"]),
    ],
)
def test_bad_yaml_and_values(write_config, text, words):
    message = refused(write_config(text))
    for word in words:
        assert word in message, message


def test_anchors_and_merge_keys_within_bounds_still_work(write_config):
    cfg = load_config(
        write_config(
            "name: t\n"
            "models: {actor: org/actor, reward: org/rm}\n"
            "data: {prompt_dataset: org/prompts}\n"
            "placement:\n"
            "  actor: &role {nodes: 1, gpus_per_node: 2}\n"
            "  critic: {<<: *role, gpus_per_node: 4}\n"
            "  ref: *role\n"
        )
    )
    assert (cfg.placement.critic.nodes, cfg.placement.critic.gpus_per_node) == (1, 4)  # a merge key is not a duplicate
    assert cfg.placement.ref == cfg.placement.actor


def test_not_utf8(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(GOOD.encode() + "# café\n".encode("latin-1"))
    message = refused(path)
    assert "latin1.yaml:6" in message and "not UTF-8" in message and "0xe9" in message


@pytest.mark.parametrize(
    "content,words",
    [
        (GOOD.encode().replace(b"name: t", b"name: t\x00u"), ["cfg.yaml:1", "U+0000", "offset 7"]),  # NUL in a value
        (GOOD.encode() + b"\x00" * 64, ["cfg.yaml:6", "U+0000"]),  # NUL padding after the text
        (GOOD.encode() + b"# \x1b[31mred\n", ["cfg.yaml:6", "U+001B"]),  # a terminal escape
        (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)), ["cfg.yaml:2", "not UTF-8", "0x80"]),  # a binary
        (b"PK\x03\x04\x14\x00\x00\x00", ["cfg.yaml:1", "U+0003"]),  # a zip header: valid UTF-8, not text
        ("name: t\n".encode("utf-16"), ["cfg.yaml:1", "not UTF-8"]),
        (b"- models\n- data\n", ["cfg.yaml", "must be a YAML mapping"]),  # a list
        (b"just words\n", ["cfg.yaml", "must be a YAML mapping"]),  # a scalar
        (b"42\n", ["cfg.yaml", "must be a YAML mapping"]),
        (b"a: 1\n---\nb: 2\n", ["cfg.yaml:2", "invalid YAML"]),  # two documents
        (b"? [a, b]\n: 1\n", ["cfg.yaml:1", "unhashable key"]),
        (b"name: t\nextra_args: {deep: " + b"[" * 100 + b"]" * 100 + b"}\n", ["cfg.yaml:2", "more than 64 levels"]),
        (b"name: t\nmodels:\n" + b"".join(b"  " * i + b"  k%d:\n" % i for i in range(80)) + b"  " * 81 + b"x\n", ["levels"]),
        (b"name: t\nx: &a " + b"[" * 40 + b"]" * 40 + b"\nextra_args: {y: " + b"[" * 30 + b"*a" + b"]" * 30 + b"}\n", ["levels"]),
    ],
)
def test_hostile_file_contents_are_a_user_error_naming_the_file(tmp_path, content, words):
    path = tmp_path / "cfg.yaml"
    path.write_bytes(content)
    message = refused(path)
    for word in words:
        assert word in message, message


def test_a_control_character_in_an_override_names_the_override(write_config):
    message = refused(write_config(GOOD), "name=a\x07b")
    assert "override name" in message and "U+0007" in message


def test_a_pipe_is_refused_not_read(tmp_path):
    fifo = tmp_path / "cfg.yaml"
    os.mkfifo(fifo)
    assert "is not a regular file" in refused(fifo, timeout=20)  # opening it would block forever


def test_a_directory_and_a_huge_file(tmp_path):
    (tmp_path / "dir.yaml").mkdir()
    assert "Is a directory" in refused(tmp_path / "dir.yaml")
    huge = tmp_path / "huge.yaml"
    huge.write_text(GOOD + "# " + "x" * MAX_CONFIG_BYTES + "\n")
    assert "at most" in refused(huge)


def test_bad_override_values(write_config):
    path = write_config(GOOD)
    assert "override extra_args.x" in refused(path, "extra_args.x=&a [*a]") and "holds it" in refused(path, "extra_args.x=&a [*a]")
    assert "override train.seed" in refused(path, "train.seed=[1,")
    assert "checkpoint.save_steps" in refused(path, "checkpoint.save_steps=0")


def test_reward_function_file_problems_name_the_key(write_config, tmp_path):
    latin = tmp_path / "rules.py"
    latin.write_bytes("# café\ndef reward_func(q, p, l):\n    return {}\n".encode("latin-1"))
    path = write_config(GOOD.replace("reward: org/rm", "reward_func: rules.py"))
    done = run_cli("plan", str(path))
    assert done.returncode == 2
    assert "models.reward_func" in done.stdout and "not UTF-8" in done.stdout and "Traceback" not in done.stderr
