"""A mistake in a key=value override is told as the command line's, not the preset file's."""

from __future__ import annotations

import pytest

from rlhf_launch.core.config import load_config
from rlhf_launch.core.presets import config_path
from rlhf_launch.errors import UserError


def error_of(*overrides: str) -> UserError:
    with pytest.raises(UserError) as info:
        load_config(config_path("tiny-1node"), list(overrides))
    return info.value


def test_a_typo_in_an_override_names_the_override_not_the_preset():
    err = error_of("train.train_batch_sise=256")
    assert err.message.startswith("override 'train.train_batch_sise=256' (command line): unknown key train.train_batch_sise")
    assert "did you mean train.train_batch_size?" in err.message
    assert "tiny-1node.yaml" not in err.message
    assert err.hint == "fix the key=value override on the command line"


def test_a_bad_value_from_the_command_line_is_not_given_the_yaml_line_of_the_key():
    err = error_of("train.train_batch_size=abc")
    assert err.message.startswith("override 'train.train_batch_size=abc' (command line): train.train_batch_size:")
    assert ".yaml:" not in err.message


def test_an_unknown_section_made_by_an_override_names_it():
    err = error_of("placement.actor.nodes=1", "foo.bar=1")
    assert err.message.startswith("override 'foo.bar=1' (command line): unknown key foo")


def test_a_mistake_in_the_file_still_names_the_file_and_line(write_config):
    path = write_config("name: x\nmodels: {actor: a}\ndata: {prompt_dataset: d}\ntrain: {train_batch_sise: 8}\n")
    with pytest.raises(UserError) as info:
        load_config(path, ["train.micro_train_batch_size=1"])
    assert info.value.message.startswith(f"{path}:4: unknown key train.train_batch_sise")
    assert info.value.hint == "fix the key in the YAML or pass key=value overrides"


def test_a_list_key_given_a_bare_word_says_how_a_list_is_written():
    err = error_of("placement.colocate=actor_ref")
    assert "placement.colocate: Input should be a valid list (got 'actor_ref')" in err.message
    assert "key=[a,b]" in (err.hint or "")
