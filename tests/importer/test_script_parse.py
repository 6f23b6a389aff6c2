"""parse_script: a shell script that launches OpenRLHF's PPO trainer -> the trainer's argv, unrun.

The stored scripts (tests/data/scripts, see its README) are real OpenRLHF and third-party launch
scripts plus a few of ours; the inline cases pin one construct each. Where a case can run under
bash with stub commands that only record their arguments, `test_matches_bash` checks that the
parser builds the same argv bash does.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from rlhf_launch.importer.bash import ScriptError, TrainerCall, parse_script

DATA = Path(__file__).parents[1] / "data" / "scripts"
SCRIPTS = sorted(DATA.glob("*.sh"))
M = "openrlhf.cli.train_ppo_ray"


def parse(text: str, environ: dict[str, str] | None = None) -> TrainerCall:
    return parse_script(textwrap.dedent(text), environ=environ)


def flag(call: TrainerCall, name: str) -> str:
    """The value after `name` in the trainer's argv."""
    return call.argv[call.argv.index(name) + 1]


def has_warning(call: TrainerCall, pattern: str) -> bool:
    return any(re.search(pattern, w) for w in call.warnings)


# ----------------------------------------------------------------------------- stored scripts


def test_stored_scripts_are_all_there_and_listed():
    names = [p.name for p in SCRIPTS]
    openrlhf = [n for n in names if n.startswith("openrlhf-")]
    assert len(openrlhf) >= 6
    assert len({n.split("-")[1] for n in openrlhf}) >= 3  # from at least three tags
    assert len([n for n in names if n.startswith("ours-")]) >= 4
    assert len([n for n in names if not n.startswith(("openrlhf-", "ours-"))]) >= 3
    readme = (DATA / "README.md").read_text()
    for name in names:
        assert f"`{name}`" in readme, f"{name} is not described in tests/data/scripts/README.md"
    for path in SCRIPTS:
        first, second = path.read_text().splitlines()[:2]
        assert first.startswith("# Source: ") or (first.startswith("#!") and second.startswith("# Source: ")), path.name
        if path.name.startswith("openrlhf-"):
            tag = path.name.split("-")[1]
            assert first.startswith(f"# Source: https://github.com/OpenRLHF/OpenRLHF/blob/{tag}/examples/scripts/")
            assert first.endswith("(Apache-2.0)")


def test_stored_scripts_hold_no_real_wandb_key():
    for path in SCRIPTS:
        body = "\n".join(path.read_text().splitlines()[1:])  # the Source line may name a commit
        assert not re.search(r"\b[0-9a-f]{32,}\b", body), path.name


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_stored_script_yields_one_trainer_call(path: Path):
    text = path.read_text()
    call = parse_script(text)
    assert "--pretrain" in call.argv or "--actor.model_name_or_path" in call.argv
    assert call.launcher in ("ray job submit", "python", "deepspeed", "torchrun")
    line = text.splitlines()[call.line - 1]
    assert line.strip() and not line.lstrip().startswith("#")
    assert M not in call.argv
    flat = "--pretrain" in call.argv
    dotted = [a for a in call.argv if re.match(r"--[a-z_]+\.[a-z_]", a)]
    assert not (flat and dotted), "one era of flags per script"
    assert dataclasses.is_dataclass(call)
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.line = 0  # type: ignore[misc]


EXPECTED = {
    "openrlhf-v0.8.11-train_ppo_llama_ray.sh": dict(
        launcher="ray job submit",
        line=4,
        ray_address="http://127.0.0.1:8265",
        runtime_env={"working_dir": "/openrlhf"},
        flags={"--pretrain": "OpenRLHF/Llama-3-8b-sft-mixture", "--use_wandb": "{wandb_token}", "--zero_stage": "3"},
        last="{wandb_token}",
        warnings=[],
    ),
    "openrlhf-v0.8.11-train_reinforce_baseline_ray_agent_multiturn.sh": dict(
        launcher="ray job submit",
        line=11,
        flags={"--vllm_num_engines": "8", "--ref_num_gpus_per_node": "8", "--top_p": "0.98"},
        last="--enable_vllm_is_correction",
        warnings=[r"positional parameter \$1 .* using the default '8'"],
        variables={"NUM_GPUS": "8", "OPENRLHF_ASYNC_NUM_TASKS": "128"},
    ),
    "openrlhf-v0.9.10-train_reinforce_baseline_hybrid_engine.sh": dict(
        launcher="ray job submit",
        line=101,
        runtime_env=None,
        flags={
            "--pretrain": "Qwen/Qwen3-4B-Thinking-2507",
            "--ckpt_path": "${WORK_DIR}/exp/Qwen3-4B-Thinking/ckpt",
            "--max_ckpt_num": "3",
            "--ring_head_stride": "2",
        },
        last="-1",
        warnings=[r"\$WORK_DIR is set at line 5 by command substitution \$\(cd .*kept as '\$\{WORK_DIR\}'"],
    ),
    "openrlhf-v0.10.2-train_ppo_ray_slurm.sh": dict(
        launcher="ray job submit",
        line=55,
        ray_address="http://localhost:8265",
        runtime_env={"working_dir": "/openrlhf", "pip": "/openrlhf/requirements.txt"},
        flags={"--actor.model_name_or_path": "OpenRLHF/Llama-3-8b-sft-mixture", "--logger.wandb.key": "{wandb_token}"},
        last="{wandb_token}",
        warnings=[r"inside a `bash -c` string"],
    ),
    "openrlhf-v0.11.0-train_prorlv2_math_hybrid_engine.sh": dict(
        launcher="python",
        line=30,
        ray_address=None,
        runtime_env=None,
        flags={
            "--actor.model_name_or_path": "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
            "--ckpt.path": "${WORK_DIR}/exp/DeepSeek-R1-Qwen-1.5B-PRORLV2/ckpt",
            "--actor.eps_clip_low_high": "0.2",
            "--algo.advantage.is_correction_type": "icepop",
        },
        last="0.0",
    ),
    "openrlhf-v0.11.0-train_reinforce_baseline_ray_agent_async.sh": dict(
        launcher="ray job submit",
        line=104,
        ray_address="http://127.0.0.1:8265",
        runtime_env=None,
        flags={"--train.agent_func_path": "examples/python/agent_func.py", "--vllm.gpu_memory_utilization": "0.95"},
        last="-1",
    ),
    "r1-searcher-qwen_reinforce_plus_train.sh": dict(
        launcher="ray job submit",
        line=44,
        ray_address="http://127.0.0.1:8267",
        runtime_env=None,
        flags={"--pretrain": "/opt/aps/workdir/model/Qwen2.5-7B", "--use_wandb": "xxx", "--generate_max_len": "29000"},
        last="xxx",  # --wandb_run_name $SAVE_MODEL_NAME; the commented-out flag after it is dropped
        warnings=[],
    ),
    "lmm-r1-train_fre_text.sh": dict(
        launcher="ray job submit",
        line=68,
        runtime_env={
            "working_dir": "${WORKSPACE_DIR}",
            "env_vars": {"VLLM_USE_V1": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
        },
        flags={"--label_key": "answer", "--wandb_group": "lmm-r1-training", "--use_wandb": "YOUR_WANDB_API_KEY"},
        last="/checkpoints/lmm-r1-fre-text/logs",  # `> >(tee ...) 2>&1 &` is not an argument
        warnings=[r"\$WORKSPACE_DIR is set at line 10 by command substitution \$\(pwd\)"],
    ),
    "acecoder-train_reinforce_ray_rule_v2.sh": dict(
        launcher="ray job submit",
        line=76,
        runtime_env={"working_dir": "$PWD", "excludes": ["saves", "rm_records", "logs"]},
        flags={
            "--pretrain": "CodeDPO/qwen2.5-coder-inst-cold-start-R1",
            "--save_path": "$PWD/saves/ckpt/qwen25-coder-inst-7b--reinforce++_v2_mini_processed_r1_cold_start",
            "--use_wandb": "$WANDB_API_KEY",
        },
        last="qwen25-coder-inst-7b--reinforce++_v2_mini_processed_r1_cold_start",
        warnings=[
            r"variable \$PWD is not set in the script; kept as '\$PWD'",
            r"\$training_post_args is also set at line 42, inside a block that is not evaluated",
        ],
    ),
    "ours-flat-vars-quotes.sh": dict(
        launcher="python",
        line=17,
        flags={
            "--ref_num_gpus_per_node": "8",
            "--vllm_num_engines": "8",
            "--reward_pretrain": "OpenRLHF/Llama-3-8b-rm-700k",
            "--save_path": "/mnt/ckpt/ppo-llama3-8b",
            "--ckpt_path": "/mnt/ckpt/ppo-llama3-8b/ckpt",
            "--input_key": "context_messages",
            "--input_template": "User: {}\nAssistant: ",
            "--use_wandb": "${WANDB_KEY}",
            "--wandb_run_name": "ppo llama3 8b",
            "--wandb_project": "rlhf launch",
        },
        contains=["--actor_num_nodes=2", "--actor_num_gpus_per_node=8", "--max_epochs=1"],
        last="rlhf launch",
        warnings=[
            r"variable \$NODES is not set in the script; using the default '2'",
            r"variable \$WANDB_KEY is not set in the script; kept as '\$\{WANDB_KEY\}'",
            r"environment variables \(CUDA_VISIBLE_DEVICES\)",
        ],
    ),
    "ours-ray-submit-json.sh": dict(
        launcher="ray job submit",
        line=25,
        ray_address="http://10.0.0.1:8265",
        runtime_env={"working_dir": "/openrlhf", "env_vars": {"NCCL_DEBUG": "WARN", "VLLM_USE_V1": "1"}},
        flags={
            "--ref.num_gpus_per_node": "8",
            "--vllm.tensor_parallel_size": "2",
            "--data.input_template": "<|user|>\n{}\n<|assistant|>\n",
            "--logger.wandb.key": "xxxxx",
            "--logger.wandb.run_name": "qwen grpo (run 1)",
        },
        contains=["--ckpt.output_dir=/openrlhf/ckpt/qwen-grpo"],
        last="qwen grpo (run 1)",
        warnings=[],
    ),
    "ours-comments-continuations.sh": dict(
        launcher="python",
        line=8,
        argv=[
            "--pretrain",
            "OpenRLHF/Llama-3-8b-sft-mixture",
            "--reward_pretrain",
            "OpenRLHF/Llama-3-8b-rm-mixture",
            "--micro_train_batch_size",
            "8",
            "--zero_stage",
            "3",
            "--bf16",
            "--save_path",
            "/tmp/ckpt",
        ],  # fmt: skip
        warnings=[r"line 14: this comment line ends the trainer command .* line 15 '--max_epochs 1"],
    ),
    "ours-conditionals-function.sh": dict(
        launcher="python",
        line=31,
        argv=[
            "--actor_num_nodes",
            "2",
            "--actor_num_gpus_per_node",
            "8",
            "--pretrain",
            "/models/Qwen2.5-7B-Instruct",
            "--advantage_estimator",
            "group_norm",
            "--save_path",
            "/ckpt/Qwen2.5-7B-Instruct-grpo",
            "--wandb_run_name",
            "GRPO",
        ],  # fmt: skip
        warnings=[
            r"inside function launch, called at line 41",
            r"the `case` is decided by values the script does not set itself \(variable \$MODE",
        ],
    ),
    "ours-function-called-twice.sh": dict(
        launcher="ray job submit",
        line=11,
        ray_address="http://127.0.0.1:8265",
        runtime_env={"working_dir": "/openrlhf"},
        flags={"--pretrain": "Qwen/Qwen2.5-7B-Instruct", "--actor_num_nodes": "1", "--vllm_num_engines": "4"},
        last="--deepspeed_enable_sleep",
        warnings=[
            r"^the trainer command at line 11 runs twice, called at lines 44 and 45; imported call 1 \(line 44\); --call 2 imports the other$",
        ],
    ),
    "ours-import-flat-0.9.sh": dict(
        launcher="ray job submit",
        line=12,
        ray_address="http://127.0.0.1:8265",
        runtime_env={"working_dir": "/openrlhf", "pip": ["math-verify"], "env_vars": {"NCCL_DEBUG": "WARN", "WANDB_API_KEY": "$WANDB_KEY"}},
        flags={
            "--actor_num_gpus": "4",
            "--vllm_gpu_mem": "0.6",
            "--critic_pretrain": "Qwen/Qwen2.5-7B-Instruct",
            "--use_wandb": "$WANDB_KEY",
        },
        contains=["--ref_reward_offload", "--load_checkpoint"],
        last="qwen-ppo",
        warnings=[r"variable \$WANDB_KEY is not set in the script; kept as '\$WANDB_KEY'"],
    ),
    "ours-import-dotted-0.11.sh": dict(
        launcher="python",
        line=10,
        flags={"--ds.zero": "3", "--ckpt.path": "/mnt/shared/rlhf/grpo-qwen3-8b/ckpt", "--logger.wandb.run_name": "grpo-qwen3-8b"},
        contains=["--vllm.gpu_memory_utilization=0.85", "--train.async_enable"],
        last="$WANDB_KEY",
        warnings=[r"RAY_ADDRESS is set, so the trainer's ray.init\(\) connects to that cluster"],
    ),
    "ours-import-edge-values.sh": dict(
        launcher="deepspeed",
        line=6,
        flags={"--ds.attn_implementation": "sdpa", "--reward.num_nodes": "0", "--data.max_len": "3072"},
        contains=["--ref.offload"],
        last="reinforce_baseline",
        warnings=[],
    ),
}


def test_expected_table_covers_every_stored_script():
    assert sorted(EXPECTED) == sorted(p.name for p in SCRIPTS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_stored_script_details(name: str):
    want = EXPECTED[name]
    call = parse_script((DATA / name).read_text())
    assert call.launcher == want["launcher"]
    assert call.line == want["line"]
    if "ray_address" in want:
        assert call.ray_address == want["ray_address"]
    if "runtime_env" in want:
        assert call.runtime_env == want["runtime_env"]
    if "argv" in want:
        assert call.argv == want["argv"]
    for key, value in want.get("flags", {}).items():
        assert flag(call, key) == value, key
    for item in want.get("contains", []):
        assert item in call.argv
    if "last" in want:
        assert call.argv[-1] == want["last"]
    if want.get("warnings") == []:
        assert call.warnings == []
    for pattern in want.get("warnings", []):
        assert has_warning(call, pattern), (pattern, call.warnings)
    for key, value in want.get("variables", {}).items():
        assert call.variables[key] == value


# ----------------------------------------------------------------------------- continuations, comments


def test_backslash_continuations_and_trailing_comments():
    call = parse(f"""\
        #!/bin/bash
        # python3 -m {M} --pretrain commented/out
        set -x

        python3 -m {M} \\
           --pretrain a \\
           --bf16 # trailing comment ends the command here

        # --adam_offload \\
        """)
    assert call.argv == ["--pretrain", "a", "--bf16"]
    assert call.line == 5
    assert call.launcher == "python"
    assert call.warnings == []


def test_comment_line_inside_a_continued_command_ends_it_as_in_bash():
    call = parse(f"""\
        python3 -m {M} \\
          --pretrain a \\
          # --load_checkpoint \\
          --max_epochs 1 \\
          --zero_stage 3
        """)
    assert call.argv == ["--pretrain", "a"]
    assert has_warning(call, r"line 3: this comment line ends the trainer command .* line 4 '--max_epochs 1 --zero_stage 3'")


def test_comment_line_at_the_end_of_a_continued_command_is_harmless():
    call = parse(f"python3 -m {M} \\\n  --pretrain a \\\n  # --apply_chat_template \\\n\necho done\n")
    assert call.argv == ["--pretrain", "a"]
    assert call.warnings == []


def test_comment_idioms_inside_a_continued_command_expand_to_nothing():
    call = parse(f"python3 -m {M} --pretrain a `# the model` \\\n  --x $(: note) 1\n")
    assert call.argv == ["--pretrain", "a", "--x", "1"]
    assert call.warnings == []


def test_backslash_followed_by_a_blank_does_not_continue():
    call = parse(f"python3 -m {M} --pretrain a \\ \n  --x 1\n")
    assert call.argv == ["--pretrain", "a", " "]
    assert has_warning(call, r"line 1: the backslash is followed by a blank")


def test_crlf_line_endings():
    call = parse_script(f"X=1\r\npython3 -m {M} \\\r\n  --pretrain $X\r\n")
    assert call.argv == ["--pretrain", "1"]
    assert has_warning(call, "CRLF")


# ----------------------------------------------------------------------------- variables


def test_assignments_and_expansions():
    call = parse(f"""\
        X=1
        export Y="two words"
        Z="${{X}}/out"
        : ${{D:=dflt}}
        python3 -m {M} --pretrain $X ${{X}} "$Y" $Y $Z $D ${{U:-u d}} "${{U:-u d}}"
        """)
    assert call.argv == ["--pretrain", "1", "1", "two words", "two", "words", "1/out", "dflt", "u", "d", "u d"]
    assert call.variables == {"X": "1", "Y": "two words", "Z": "1/out", "D": "dflt"}
    assert has_warning(call, r"variable \$U is not set in the script; using the default 'u d'")


def test_unknown_variables_stay_literal_with_a_warning():
    call = parse(f'python3 -m {M} --pretrain $FOO --x ${{BAR}} --y "$BAZ/sub"\n')
    assert call.argv == ["--pretrain", "$FOO", "--x", "${BAR}", "--y", "$BAZ/sub"]
    assert "variable $FOO is not set in the script; kept as '$FOO'" in call.warnings
    assert "variable $BAR is not set in the script; kept as '${BAR}'" in call.warnings


def test_environ_supplies_what_the_script_does_not_set():
    text = f"X=mine\nW=$(pwd)\npython3 -m {M} --pretrain $MODEL --x $X --w $W\n"
    call = parse(text, environ={"MODEL": "m", "X": "theirs", "W": "/work"})
    assert call.argv == ["--pretrain", "m", "--x", "mine", "--w", "/work"]  # the script's own X wins
    assert call.warnings == []
    assert "MODEL" not in call.variables


def test_empty_and_unset_values():
    call = parse(f'E=\nX=1\nunset X\npython3 -m {M} --pretrain p ${{E-e}} ${{E:-f}} "$E" $E "" "$X" ${{X:-d}}\n')
    assert call.argv == ["--pretrain", "p", "f", "", "", "", "d"]


def test_command_substitution_is_not_evaluated():
    call = parse(f'STAMP=$(date +%s)\nDIR="$(pwd)/out"\npython3 -m {M} --pretrain p --a $STAMP --b $DIR --c "$(hostname)"\n')
    assert call.argv == ["--pretrain", "p", "--a", "$STAMP", "--b", "$(pwd)/out", "--c", "$(hostname)"]
    assert has_warning(call, r"variable \$STAMP is set at line 1 by command substitution \$\(date \+%s\), which is not evaluated")
    assert has_warning(call, r"line 2: command substitution \$\(pwd\) not evaluated")
    assert has_warning(call, r"line 3: command substitution \$\(hostname\) not evaluated")
    assert call.variables["STAMP"] == "$(date +%s)"


def test_parameter_operators():
    call = parse(f"""\
        P=/models/Qwen2.5-7B/
        Q=${{P%/}}
        S="a-b-c"
        python3 -m {M} --pretrain $Q ${{Q##*/}} ${{Q#/}} ${{S//-/_}} ${{S/-/_}} ${{S^^}} ${{S:2:3}} ${{S: -1}} ${{#S}} ${{S%%-*}}
        """)
    assert call.argv == [
        "--pretrain", "/models/Qwen2.5-7B", "Qwen2.5-7B", "models/Qwen2.5-7B",
        "a_b_c", "a_b-c", "A-B-C", "b-c", "c", "5", "a",
    ]  # fmt: skip


def test_arithmetic():
    call = parse(
        f"N=2\nG=8\npython3 -m {M} --a $((N*G)) $(( (N+1) * G / 3 )) $((G % 3)) $((2**4)) $((N > 1 ? 10 : 20)) $((-7/2)) --pretrain p\n"
    )
    assert call.argv[:7] == ["--a", "16", "8", "2", "16", "10", "-3"]
    call = parse(f"python3 -m {M} --pretrain p --n $((NODES * 8))\n")
    assert flag(call, "--n") == "$((NODES * 8))"
    assert has_warning(call, r"arithmetic \$\(\(NODES \* 8\)\) not evaluated \(\$NODES is not known\)")


def test_positional_parameters_are_unknown():
    call = parse(f'N=${{1:-8}}\npython3 -m {M} --pretrain $2 --n $N "$@"\n')
    assert call.argv == ["--pretrain", "$2", "--n", "8"]
    assert has_warning(call, r"positional parameter \$1 .* using the default '8'")
    assert has_warning(call, r"positional parameter \$2 .* kept as '\$2'")
    assert has_warning(call, r"line 2: \$@ \(the script's arguments\) assumed empty")


def test_secret_looking_defaults_are_not_repeated_in_warnings():
    call = parse(f"python3 -m {M} --pretrain p --use_wandb ${{WANDB_API_KEY:-0123abcd}}\n")
    assert flag(call, "--use_wandb") == "0123abcd"
    assert all("0123abcd" not in w for w in call.warnings)
    assert has_warning(call, "<hidden>")


def test_tilde_needs_home():
    assert parse(f"python3 -m {M} --pretrain ~/m\n", environ={"HOME": "/root"}).argv == ["--pretrain", "/root/m"]
    call = parse(f'python3 -m {M} --pretrain ~/m "~/q"\n')
    assert call.argv == ["--pretrain", "~/m", "~/q"]
    assert has_warning(call, "HOME is not known")


# ----------------------------------------------------------------------------- quoting


def test_quoting_keeps_values_with_spaces_together():
    call = parse(
        f"""python3 -m {M} --pretrain "a b" 'c d' e\\ f "g"'h'i --j="k l" --m=n '' $'x\\ty' --p "it's" --q 'say "hi"' --r "\\$HOME"\n"""
    )
    assert call.argv == [
        "--pretrain", "a b", "c d", "e f", "ghi", "--j=k l", "--m=n", "", "x\ty",
        "--p", "it's", "--q", 'say "hi"', "--r", "$HOME",
    ]  # fmt: skip
    assert call.warnings == []


def test_quote_splicing_in_runtime_env_json():
    call = parse(f"""\
        W=/w
        ray job submit --address=http://h:8265 --runtime-env-json='{{"working_dir": "'$W'", "env_vars": {{"A": "1"}}}}' -- python3 -m {M} --pretrain p
        """)
    assert call.runtime_env == {"working_dir": "/w", "env_vars": {"A": "1"}}


def test_double_quoted_runtime_env_json():
    call = parse(f'W=/w\nray job submit --runtime-env-json="{{\\"working_dir\\": \\"${{W}}\\"}}" -- python3 -m {M} --pretrain p\n')
    assert call.runtime_env == {"working_dir": "/w"}


# ----------------------------------------------------------------------------- arrays


def test_arrays():
    call = parse(f"""\
        A=(--x 1 # a comment
          --y "a b")
        A+=(--z)
        python3 -m {M} --pretrain p "${{A[@]}}" ${{A[@]}} "${{A[*]}}" ${{#A[@]}} ${{A[1]}} ${{A[-1]}} $A
        """)
    assert call.argv == [
        "--pretrain", "p",
        "--x", "1", "--y", "a b", "--z",
        "--x", "1", "--y", "a", "b", "--z",
        "--x 1 --y a b --z", "5", "1", "--z", "--x",
    ]  # fmt: skip
    assert call.variables["A"] == "--x 1 --y a b --z"


def test_declare_and_local_arrays():
    call = parse(f'declare -a OPTS=(--bf16 --zero_stage 3)\npython3 -m {M} --pretrain p "${{OPTS[@]}}"\n')
    assert call.argv == ["--pretrain", "p", "--bf16", "--zero_stage", "3"]


# ----------------------------------------------------------------------------- control flow


def test_assignments_in_branches_that_may_not_run_are_not_applied():
    call = parse(f"""\
        X=1
        Z=$(hostname)
        if [ -n "$Z" ]; then
          X=2
        else
          X=3
        fi
        python3 -m {M} --pretrain $X
        """)
    assert call.argv == ["--pretrain", "1"]
    assert has_warning(call, r"\$X is also set at line 4, inside a block that is not evaluated; using the value from line 1")


def test_a_condition_on_a_variable_the_script_never_sets_reads_it_as_unset():
    # the-laughing-monkey/OpenRLHF-M's *_simple.sh: W&B flags set in both branches on $WANDB_API_KEY
    text = f"""\
        if [ -z "${{WANDB_API_KEY}}" ]; then
          WANDB_ARGS=""
        else
          WANDB_ARGS="--use_wandb ${{WANDB_API_KEY}} --wandb_group g"
        fi
        python3 -m {M} --pretrain p ${{WANDB_ARGS}}
        """
    call = parse(text)
    assert call.argv == ["--pretrain", "p"]  # as bash runs it when the caller does not export the key
    assert has_warning(call, r"line 1: the `if` reads \$WANDB_API_KEY as unset \(empty\).*--var WANDB_API_KEY=\.\.\.")
    given = parse(text, {"WANDB_API_KEY": "k"})
    assert given.argv == ["--pretrain", "p", "--use_wandb", "k", "--wandb_group", "g"]
    assert not has_warning(given, r"reads \$WANDB_API_KEY as unset")


def test_a_condition_on_a_variable_set_only_in_a_branch_stays_undecided():
    call = parse(f"""\
        if [ -n "$(hostname)" ]; then
          Y=1
        fi
        X=1
        if [ -n "$Y" ]; then
          X=2
        fi
        python3 -m {M} --pretrain $X
        """)
    assert call.argv == ["--pretrain", "1"]
    assert not has_warning(call, r"reads \$Y as unset")


def test_known_conditions_pick_the_branch_bash_would_run():
    call = parse(f"""\
        B=False
        N=1
        if [ $B = True ]; then
          X=2
        elif [[ "$B" == False ]]; then
          X=3
        fi
        if [ "$N" -gt 1 ]; then
          python3 -m {M} --pretrain multi $X
        else
          python3 -m {M} --pretrain single $X
        fi
        """)
    assert call.argv == ["--pretrain", "single", "3"]
    assert call.line == 11
    assert call.warnings == []


def test_case_on_a_known_value():
    call = parse(f"""\
        MODE=${{MODE:-grpo}}
        case "$MODE" in
          ppo) python3 -m {M} --pretrain ppo ;;
          grpo|rloo)
            EST=group_norm
            python3 -m {M} --pretrain grpo --advantage_estimator $EST ;;
        esac
        """)
    assert call.argv == ["--pretrain", "grpo", "--advantage_estimator", "group_norm"]
    assert has_warning(call, r"line 2: the `case` is decided by values the script does not set itself")
    call = parse(f"MODE=ppo\ncase $MODE in\n  ppo) python3 -m {M} --pretrain ppo ;;\n  *) python3 -m {M} --pretrain other ;;\nesac\n")
    assert call.argv == ["--pretrain", "ppo"]
    assert call.warnings == []


def test_trainer_inside_a_branch_with_an_unknown_condition_is_found():
    call = parse(f'if [ "$NODE_RANK" = "0" ]; then\n  X=2\n  python3 -m {M} --pretrain $X\nfi\n')
    assert call.argv == ["--pretrain", "2"]


def test_loops_and_subshells_do_not_leak_assignments():
    call = parse(f"""\
        for i in 1 2; do J=$i; done
        while false; do W=1; done
        (S=1)
        python3 -m {M} --pretrain p ${{i:-none}} ${{W:-none}} ${{S:-none}}
        """)
    assert call.argv == ["--pretrain", "p", "none", "none", "none"]


def test_trainer_inside_a_function_uses_the_call_site():
    call = parse(f"""\
        launch() {{
          local tag="$1"
          python3 -m {M} --pretrain "$MODEL" --wandb_run_name "$tag" "$@" $#
        }}
        MODEL=m
        launch "run 1" extra
        """)
    assert call.argv == ["--pretrain", "m", "--wandb_run_name", "run 1", "run 1", "extra", "2"]
    assert call.line == 3
    assert has_warning(call, "inside function launch, called at line 6")


def test_function_keyword_and_uncalled_functions():
    call = parse(f"function go {{\n  G=global\n  python3 -m {M} --pretrain $1\n}}\ngo m1\n")
    assert call.argv == ["--pretrain", "m1"]
    call = parse(f"function go() {{\n  python3 -m {M} --pretrain p\n}}\n")
    assert call.argv == ["--pretrain", "p"]
    assert has_warning(call, "inside function go, which the script never calls")


def test_here_documents_are_not_commands():
    call = parse(f"""\
        cat > run.sh <<EOF
        python3 -m {M} --pretrain wrong
        EOF
        cat <<-'DONE'
        \tpython3 -m {M} --pretrain wrong
        \tDONE
        python3 -m {M} --pretrain right
        """)
    assert call.argv == ["--pretrain", "right"]
    assert call.line == 7


# ----------------------------------------------------------------------------- launchers


@pytest.mark.parametrize(
    ("command", "launcher"),
    [
        (f"python -m {M}", "python"),
        (f"python3 -m {M}", "python"),
        (f"python3.10 -u -m {M}", "python"),
        (f"/opt/conda/envs/rl/bin/python -m {M}", "python"),
        (f"uv run python -m {M}", "python"),
        (f"CUDA_VISIBLE_DEVICES=0,1 nohup python3 -m {M}", "python"),
        ("python3 /src/OpenRLHF/openrlhf/cli/train_ppo_ray.py", "python"),
        (f"deepspeed --num_gpus 8 --module {M}", "deepspeed"),
        (f"torchrun --nproc_per_node 8 -m {M}", "torchrun"),
        (f"python -m torch.distributed.run --nproc_per_node 8 -m {M}", "torchrun"),
        (f"ray job submit --address http://h:8265 -- python3 -m {M}", "ray job submit"),
        (f"uv run ray job submit --address=http://h:8265 --no-wait -- python -m {M}", "ray job submit"),
        (f"yes | /usr/local/bin/ray job submit --address=http://h:8265 -- python3 -m {M}", "ray job submit"),
    ],
)
def test_launchers(command: str, launcher: str):
    call = parse(f"{command} --pretrain p --bf16 > train.log 2>&1 &\n")
    assert call.launcher == launcher
    assert call.argv == ["--pretrain", "p", "--bf16"]
    if launcher == "ray job submit":
        assert call.ray_address == "http://h:8265"
    else:
        assert call.ray_address is None and call.runtime_env is None


def test_ray_job_submit_options():
    call = parse(f"""\
        ray job submit --address="http://10.0.0.1:8265" \\
          --runtime-env-json='{{"working_dir": "/openrlhf", "env_vars": {{"NCCL_DEBUG": "WARN"}}}}' \\
          --working-dir /code --submission-id run-1 --no-wait \\
          -- RAY_BACKEND_WORKER_TIMEOUT_S=300 python3 -m {M} --pretrain p
        """)
    assert call.ray_address == "http://10.0.0.1:8265"
    assert call.runtime_env == {"working_dir": "/code", "env_vars": {"NCCL_DEBUG": "WARN"}}
    assert call.argv == ["--pretrain", "p"]
    assert has_warning(call, r"--working-dir /code is taken as runtime_env working_dir")
    assert has_warning(call, r"entrypoint sets environment variables before the trainer \(RAY_BACKEND_WORKER_TIMEOUT_S\)")


def test_ray_address_from_the_environment_variable():
    call = parse(f"export RAY_ADDRESS=http://head:8265\nray job submit -- python3 -m {M} --pretrain p\n")
    assert call.ray_address == "http://head:8265"
    assert has_warning(call, "has no --address; using RAY_ADDRESS=http://head:8265")
    call = parse(f"ray job submit -- python3 -m {M} --pretrain p\n")
    assert call.ray_address is None
    assert has_warning(call, "no --address and RAY_ADDRESS is not set")


def test_bad_runtime_env_json_is_a_warning():
    call = parse(f"ray job submit --address=http://h:8265 --runtime-env-json='{{\"working_dir\": }}' -- python3 -m {M} --pretrain p\n")
    assert call.runtime_env is None
    assert has_warning(call, r"--runtime-env-json is not valid JSON")
    call = parse(f"ray job submit --address=http://h:8265 --runtime-env env.yaml -- python3 -m {M} --pretrain p\n")
    assert has_warning(call, "names a YAML file, which is not read")


def test_trainer_inside_bash_c():
    call = parse(f"""\
        R=2.12.0
        srun -N1 -w "$node" bash -c \\
        "pip install ray[default]==$R \\
        && ray job submit --address=http://localhost:8265 \\
            --runtime-env-json='{{\\"working_dir\\": \\"/openrlhf\\"}}' \\
            -- python3 -m {M} --pretrain p --name \\"a b\\"" &>> job.log
        """)
    assert call.argv == ["--pretrain", "p", "--name", "a b"]
    assert call.launcher == "ray job submit"
    assert call.runtime_env == {"working_dir": "/openrlhf"}
    assert call.line == 2
    assert call.warnings == ["line 2: the trainer command is inside a `bash -c` string; read from that string"]


def test_mentions_that_are_not_calls():
    call = parse(f'echo python3 -m {M}\npkill -f {M}\nLOG="running {M}"\npython3 -m {M} --pretrain p\n')
    assert call.line == 4


# ----------------------------------------------------------------------------- errors


def test_no_trainer_call():
    with pytest.raises(ScriptError, match=r"no `openrlhf.cli.train_ppo_ray` call found in lines 1-3"):
        parse("set -x\npython3 -m openrlhf.cli.train_ppo --pretrain p\n")
    with pytest.raises(ScriptError, match=r"line 1 mentions it in a comment"):
        parse(f"# python3 -m {M} --pretrain p\necho nothing\n")
    with pytest.raises(ScriptError, match=r"the here-document at line 2 mentions it"):
        parse(f"cat <<EOF\npython3 -m {M}\nEOF\n")
    with pytest.raises(ScriptError, match=r"line 2 calls it in a branch that does not run"):
        parse(f"if false; then\n  python3 -m {M} --pretrain p\nfi\n")
    with pytest.raises(ScriptError, match=r"line 1 mentions it, but not as `-m"):
        parse(f'python3 -c "import {M}"\n')


def test_two_trainer_calls():
    two = f"python3 -m {M} --pretrain a\n\nray job submit -- python3 -m {M} --pretrain b\n"
    with pytest.raises(ScriptError, match=r"two trainer calls: line 1 and line 3; .* import one with --call N \(1\.\.2\)"):
        parse(two)
    with pytest.raises(ScriptError, match=r"two trainer calls: line 2 and line 4"):
        parse(f'if [ "$X" = 1 ]; then\n  python3 -m {M} --pretrain a\nelse\n  python3 -m {M} --pretrain b\nfi\n')
    second = parse_script(two, pick=2)
    assert (second.argv, second.line, second.launcher) == (["--pretrain", "b"], 3, "ray job submit")
    assert has_warning(
        second, r"^the script runs the trainer twice, at lines 1 and 3; imported call 2 \(line 3\); --call 1 imports the other$"
    )
    with pytest.raises(ScriptError, match=r"--call 3: the script runs the trainer twice \(lines 1 and 3\); pick 1\.\.2"):
        parse_script(two, pick=3)


def test_a_function_called_twice_imports_the_first_call_and_names_both_call_sites():
    """One trainer command in a function the script calls twice: not two calls at the body's line."""
    text = (DATA / "ours-function-called-twice.sh").read_text()
    first, second = parse_script(text), parse_script(text, pick=2)
    assert first.line == second.line == 11  # the command's own line, in the function body
    assert (flag(first, "--pretrain"), flag(first, "--actor_num_nodes"), flag(first, "--vllm_num_engines")) == (
        "Qwen/Qwen2.5-7B-Instruct",
        "1",
        "4",
    )
    assert (flag(second, "--pretrain"), flag(second, "--actor_num_nodes"), flag(second, "--vllm_num_engines")) == (
        "Qwen/Qwen2.5-32B-Instruct",
        "2",
        "8",
    )
    assert has_warning(second, r"called at lines 44 and 45; imported call 2 \(line 45\); --call 1 imports the other")
    assert has_warning(second, r"inside function train, called at line 45")
    assert not any("line 11 and line 11" in w for w in first.warnings + second.warnings)
    with pytest.raises(ScriptError, match=r"--call 3: the script runs the trainer twice \(lines 44 and 45\); pick 1\.\.2"):
        parse_script(text, pick=3)


def test_nested_function_calls_name_the_chain_of_call_sites():
    text = f"f() {{\n  python3 -m {M} --pretrain $1\n}}\ng() {{\n  f $1\n}}\ng a\ng b\nf c\n"
    calls = [parse_script(text, pick=n) for n in (None, 2, 3)]
    assert [c.argv[-1] for c in calls] == ["a", "b", "c"]
    assert has_warning(calls[1], r"runs 3 times, called at lines 7 -> 5, 8 -> 5 and 9; imported call 2 \(line 8 -> 5\); --call N \(1, 3\)")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"X=1\npython3 -m {M} --pretrain 'a\n", r"line 2: unterminated single quote"),
        (f'X=1\n\npython3 -m {M} --pretrain "a \\\n b\n', r"line 3: unterminated double quote"),
        (f"python3 -m {M} --pretrain $(date\n", r"line 1: unterminated command substitution"),
        (f"python3 -m {M} --pretrain ${{X\n", r"line 1: unterminated '\$\{'"),
        (f"python3 -m {M} --pretrain `date\n", r"line 1: unterminated backtick"),
        (f"\nA=(--x 1\npython3 -m {M} --pretrain p\n", r"line 2: unterminated array assignment"),
        (f"f() {{\n  python3 -m {M} --pretrain p\n", r"line 1: function f has no closing '\}'"),
    ],
)
def test_malformed_scripts(text: str, message: str):
    with pytest.raises(ScriptError, match=message):
        parse_script(text)


def test_script_error_is_a_value_error():
    assert issubclass(ScriptError, ValueError)


# ----------------------------------------------------------------------------- against bash itself

_STUBS = ("python", "python3", "ray", "deepspeed", "torchrun", "tee", "cat", "seq", "date", "yes", "mkdir")
_BASH = shutil.which("bash")

BASH_CASES = {
    "continuation_comment": f"python3 -m {M} \\\n  --pretrain a \\\n  # --b \\\n  --c 1\n",
    "variables": f'X=1\nexport Y="two words"\nZ="${{X}}/out"\n: ${{D:=dflt}}\npython3 -m {M} --pretrain $X ${{X}} "$Y" $Y $Z $D ${{U:-u d}} "${{U:-u d}}" ${{E-e}}\n',
    "empty": f'E=\npython3 -m {M} --pretrain x ${{E-e}} ${{E:-f}} "$E" $E ""\n',
    "quotes": f"""python3 -m {M} --pretrain "a b" 'c d' e\\ f "g"'h'i --j="k l" --m=n '' $'x\\ty'\n""",
    "arrays": f'A=(--x 1 # c\n  --y "a b")\nA+=(--z)\npython3 -m {M} --pretrain p "${{A[@]}}" ${{A[@]}} "${{A[*]}}" ${{#A[@]}} ${{A[1]}} ${{A[-1]}} $A\n',
    "operators": f'P=/m/Q-7B/\nQ=${{P%/}}\nS="a-b-c"\npython3 -m {M} --pretrain $Q ${{Q##*/}} ${{S//-/_}} ${{S/-/_}} ${{S^^}} ${{S:2:3}} ${{S: -1}} ${{#S}} ${{S%%-*}}\n',
    "arithmetic": f"N=2\nG=8\npython3 -m {M} --pretrain x $((N*G)) $(( (N+1) * G / 3 )) $((G % 3)) $((2**4)) $((-7/2))\n",
    "known_if": f'B=False\nif [ $B = True ]; then X=2; elif [[ "$B" == False ]]; then X=3; else X=4; fi\npython3 -m {M} --pretrain $X\n',
    "case": f"M=grpo\ncase $M in\n  ppo) E=gae ;;\n  *) E=group_norm ;;\nesac\npython3 -m {M} --pretrain p $E\n",
    "function": f'f() {{\n  local t="$1"\n  python3 -m {M} --pretrain "$t" "$@" $#\n}}\nf "a b" c\n',
    "pipeline": f"yes | ray job submit --address http://h:8265 -- python3 -m {M} --pretrain p 2>&1 | tee x.log\n",
    "splice": f"""W=/w\nray job submit --runtime-env-json='{{"working_dir": "'$W'"}}' -- python3 -m {M} --pretrain p\n""",
    "comment_idioms": f"python3 -m {M} --pretrain p `# note` $(: note) --q 1\n",
    "heredoc": f"cat <<EOF\npython3 -m {M} --pretrain wrong\nEOF\npython3 -m {M} --pretrain right\n",
    "backslash_space": f"python3 -m {M} --pretrain p \\ \n  --x 1\n",
}
OURS = [p for p in SCRIPTS if p.name.startswith("ours-")]


def _bash_argv(text: str, tmp_path: Path, environ: dict[str, str]) -> list[str] | None:
    """The trainer argv bash builds, with every command on PATH a stub that only records its argv."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "argv.log"
    for name in _STUBS:
        stub = stubs / name
        stub.write_text('#!/bin/bash\nprintf "%s\\0" "$@" >> "$ARGV_LOG"; printf "\\1\\0" >> "$ARGV_LOG"\n')
        stub.chmod(0o755)
    script = tmp_path / "script.sh"
    script.write_text(text)
    env = {"PATH": str(stubs), "ARGV_LOG": str(log), **environ}
    assert _BASH is not None
    subprocess.run([_BASH, "--noprofile", "--norc", str(script)], env=env, cwd=tmp_path, capture_output=True, timeout=30)
    if not log.exists():
        return None
    for record in log.read_bytes().decode().split("\x01\x00"):
        argv = record.split("\x00")[:-1]
        if M in argv:
            return argv[argv.index(M) + 1 :]
    return None


@pytest.mark.skipif(_BASH is None or os.name != "posix", reason="needs bash")
@pytest.mark.parametrize(
    "text",
    [pytest.param(t, id=k) for k, t in BASH_CASES.items()] + [pytest.param(p, id=p.name) for p in OURS],
)
def test_matches_bash(text: str | Path, tmp_path: Path):
    source = text.read_text() if isinstance(text, Path) else text
    environ = {"HOME": "/root", "WANDB_KEY": "k"}
    assert parse_script(source, environ=environ).argv == _bash_argv(source, tmp_path, environ)


def test_a_condition_on_a_scheduler_variable_is_never_read_as_unset():
    """Slurm, torchrun, MPI and Ray set these on the nodes: a script picks its layout on them, so
    reading one as unset would write a layout the script never runs with; it stays undecided."""
    text = f"""\
        if [ -n "$SLURM_JOB_ID" ]; then
          NODES=4
        else
          NODES=1
        fi
        python3 -m {M} --actor_num_nodes $NODES
        """
    call = parse(text)
    assert call.argv != ["--actor_num_nodes", "1"]
    assert not has_warning(call, r"reads \$SLURM_JOB_ID as unset")
    assert parse(text, {"SLURM_JOB_ID": "42"}).argv == ["--actor_num_nodes", "4"]
