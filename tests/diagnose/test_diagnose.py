"""`diagnose`: every excerpt of the corpus (tests/data/diagnose/corpus.yaml) classified as
its class, retriable as labelled, and never in a wrong phase; root cause over symptom;
Ray's state as evidence; redaction; reading a large file from its end."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.secrets import redact_line
from rlhf_launch.diagnose import PHASES, FailureClass, classify
from rlhf_launch.diagnose import reader as dx
from rlhf_launch.diagnose.rules import RULES
from rlhf_launch.runs.logfile import diagnose_file

from conftest import ROOT

CORPUS = yaml.safe_load((ROOT / "tests" / "data" / "diagnose" / "corpus.yaml").read_text())
# Phases the corpus gives from knowledge outside its excerpt (the prose, the title):
# the excerpt alone does not show them, so `phase` may be None there, never another phase.
PHASE_COVERAGE_MIN = 58  # of 71 given; 61 told today


def entry_id(index: int) -> str:
    entry = CORPUS[index]
    return f"{index:02d}-{entry['class']}-{entry['source'].rstrip('/').rsplit('/', 1)[-1][:20]}"


@pytest.mark.parametrize("index", range(len(CORPUS)), ids=entry_id)
def test_corpus_entry(index):
    entry = CORPUS[index]
    found = classify(entry["excerpt"])
    assert (str(found.cls), found.retriable) == (entry["class"], entry["retriable"]), (found.rule, found.evidence)
    assert found.phase in (entry.get("phase"), None), (found.rule, found.phase)
    assert found.phase is None or found.phase in PHASES
    assert found.evidence and found.hint


@pytest.mark.parametrize("index", range(len(CORPUS)), ids=entry_id)
def test_anchors_lose_no_decisive_line(index):
    """Rules only read lines holding one of their anchors: the same answer as reading all."""
    excerpt = CORPUS[index]["excerpt"]
    fast, full = classify(excerpt), classify(excerpt, _every_line=True)
    assert (fast.cls, fast.retriable, fast.phase, fast.rule) == (full.cls, full.retriable, full.phase, full.rule)


def test_the_corpus_has_four_excerpts_per_class_and_phases_are_mostly_told():
    counts = Counter(entry["class"] for entry in CORPUS)
    assert set(counts) == {c.value for c in FailureClass}
    assert min(counts.values()) >= 4, counts
    told = sum(1 for e in CORPUS if e.get("phase") and classify(e["excerpt"]).phase == e["phase"])
    assert told >= PHASE_COVERAGE_MIN, told


def config_paths() -> set[str]:
    paths: set[str] = set()

    def walk(model, prefix: str) -> None:
        for name, info in model.model_fields.items():
            path = f"{prefix}{name}"
            paths.add(path)
            annotation = info.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                walk(annotation, path + ".")

    walk(LaunchConfig, "")
    return paths


def test_hints_name_keys_of_the_config_schema():
    known = config_paths()
    hints = {classify(e["excerpt"]).hint for e in CORPUS}
    hints |= {rule.hint for rule in RULES if rule.hint}
    named = {m.group(1) for hint in hints for m in re.finditer(r"`([a-z_]+(?:\.[a-z_*]+)+)(?:=[^`]*)?`", hint)}
    named = {n for n in named if not n.endswith(".*")}
    assert named and named <= known, named - known


# ---------------------------------------------------------------- root cause over symptom

STEP = "(PPOTrainer pid=4182) INFO 09-14 10:02:11 ppo_trainer.py:551] \u2728 Global step {n}: {{'policy_loss': 0.05, 'kl': 0.01, 'reward': 0.{n}}}"
WATCHDOG = (
    "(PolicyModelActor pid=5120, ip=10.0.0.3) [rank0]:[E1225 12:58:32.712922209 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=17284, OpType=_ALLGATHER_BASE, NumelIn=4152, NumelOut=12457, Timeout(ms)=1800000) "
    "ran for 1800031 milliseconds before timing out."
)
NODE_DEAD = (
    "2024-04-11 16:38:16,464\tWARNING worker.py:2037 -- The node with node id: 8f205b12643d25d8c1ce57c45527a6c912f3479765096718ad2bf0d3 "
    "and address: 10.0.0.7 and node name: 10.0.0.7 has been marked dead because the detector has missed too many heartbeats from it."
)
SYSTEM_ERROR = (
    "(raylet) A worker died or was killed while executing a task by an unexpected system error. Worker exit type: SYSTEM_ERROR "
    "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. "
    "(1) The process is killed by SIGKILL by OOM killer due to high memory usage."
)
CUDA_OOM = "(PolicyModelActor pid=5120) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.19 GiB"
TRAIN_BAR = "(PolicyModelActor pid=5120) Train epoch [1/1]:  50%|#####     | 4/8 [00:13<00:13,  1.6s/it, act_loss=0.7, reward=0.1, kl=0.01]"
JOB_FAILED = "Job 'raysubmit_abc' failed\nStatus message: Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):"


def lines(*parts: str) -> str:
    return "\n".join(parts) + "\n"


def test_nccl_timeouts_after_a_node_death_are_node_lost():
    found = classify(lines(STEP.format(n=11), NODE_DEAD, WATCHDOG, WATCHDOG, JOB_FAILED))
    assert (found.cls, found.retriable, found.step) == (FailureClass.NODE_LOST, True, 11)
    assert "marked dead" in found.evidence[0]


def test_nccl_alone_is_nccl_and_the_shutdown_warning_is_not_nccl():
    assert classify(lines(STEP.format(n=3), TRAIN_BAR, WATCHDOG)).cls is FailureClass.NCCL
    trap = "[rank0]:[W226 11:20:57.850138763 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() was not called before program exit"
    assert classify(lines(STEP.format(n=3), "ValueError: something odd", trap)).cls is FailureClass.UNKNOWN


def test_an_oom_killed_worker_is_host_oom_not_the_nccl_that_follows():
    found = classify(lines(STEP.format(n=20), TRAIN_BAR, SYSTEM_ERROR, WATCHDOG))
    assert (found.cls, found.retriable, found.phase, found.step) == (FailureClass.HOST_OOM, True, "train", 20)


def test_a_worker_that_died_after_a_watchdog_timeout_is_the_timeouts_casualty():
    found = classify(lines(STEP.format(n=20), TRAIN_BAR, WATCHDOG, SYSTEM_ERROR))
    assert (found.cls, found.retriable, found.step) == (FailureClass.NCCL, True, 20)


def test_a_store_that_timed_out_in_the_launcher_before_any_step_is_not_retried():
    log = lines(
        "[W228 18:45:15.741177013 socket.cpp:487] [c10d] waitForInput: socket SocketImpl(fd=11, addr=[host-1]:38674, "
        "remote=[::ffff:10.0.0.2]:23456) timed out after 900000ms",
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/run.py", line 919, in main',
    )
    found = classify(log)
    assert (found.cls, found.retriable) == (FailureClass.NCCL, False)
    # the same words after steps: the ranks had met, a retry may pass
    assert classify(lines(STEP.format(n=3), log)).retriable is True


def test_a_parameter_name_the_engine_lacks_is_a_weight_sync_config_fault():
    log = lines(
        '  File "/work/verl/workers/sharding_manager/fsdp_vllm.py", line 84, in __enter__',
        "    load_dtensor_weights(",
        "KeyError: 'model.embed_tokens.weight'",
    )
    found = classify(log)
    assert (found.cls, found.retriable, found.rule) == (FailureClass.WEIGHT_SYNC, False, "sync_param_name")


def test_host_oom_before_the_first_step_is_sizing():
    loading = "(PolicyModelActor pid=5120) Loading checkpoint shards:  40%|####      | 12/30 [00:33<00:50]"
    found = classify(lines(loading, SYSTEM_ERROR))
    assert (found.cls, found.retriable, found.phase, found.step) == (FailureClass.HOST_OOM, False, "model_load", None)


def test_a_cuda_oom_wins_over_the_actor_deaths_it_causes():
    found = classify(lines(STEP.format(n=5), TRAIN_BAR, CUDA_OOM, SYSTEM_ERROR, WATCHDOG))
    assert (found.cls, found.retriable, found.phase) == (FailureClass.GPU_OOM, False, "train")
    assert "train.micro_train_batch_size" in found.hint


def test_errors_before_the_last_step_were_survived():
    found = classify(lines(CUDA_OOM, STEP.format(n=30), WATCHDOG))
    assert (found.cls, found.step) == (FailureClass.NCCL, 30)


def test_a_resumed_attempt_reports_its_checkpoint_step():
    resume = "(PPOTrainer pid=4182) INFO 09-14 10:01:00 ppo_trainer.py:439] checkpoint_states: {'episode': 0, 'global_step': 12, 'total_consumed_prompts': 1536}"
    assert classify(lines(resume, WATCHDOG)).step == 12
    assert classify(lines(STEP.format(n=1), resume, WATCHDOG)).step == 12


# ---------------------------------------------------------------- Ray's state as evidence


def test_dead_actor_whose_node_died_is_node_lost():
    actor = {
        "class_name": "PolicyModelActor",
        "state": "DEAD",
        "actor_id": "c6b718fb0215a1e6db8ac14403000000",
        "node_id": "2eea4cfb179ce7951c4bbdd5ba3029c3a4dcf7cb66db376084f7c270",
        "death_cause": {
            "actor_died_error_context": {
                "error_message": "The actor died because its node has died. Node Id: 2eea4cfb179c",
                "reason": "NODE_DIED",
                "node_death_info": {"reason": "UNEXPECTED_TERMINATION", "reason_message": "health check failed"},
            }
        },
    }
    found = classify(lines(STEP.format(n=7), WATCHDOG), dead_actors=[actor])
    assert (found.cls, found.retriable, found.step) == (FailureClass.NODE_LOST, True, 7)
    assert found.evidence[0].startswith("[ray state] actor PolicyModelActor")


def test_dead_actor_killed_by_the_memory_monitor_is_host_oom():
    actor = {"class_name": "LLMRayActor", "state": "DEAD", "death_cause": {"oomContext": {"errorMessage": "Task was killed ..."}}}
    assert classify(lines(STEP.format(n=7), WATCHDOG), dead_actors=[actor]).cls is FailureClass.HOST_OOM


def test_runtime_env_failure_from_the_state_api_and_the_job_message():
    actor = {"class_name": "PPOTrainer", "death_cause": {"runtime_env_failed_context": {"error_message": "pip install timed out"}}}
    found = classify("", dead_actors=[actor])
    assert (found.cls, found.retriable) == (FailureClass.RUNTIME_ENV, True)
    message = "Failed to set up runtime environment.\nFailed to upload working_dir /w: Package size (1765.45MiB) exceeds the maximum size of 512.00MiB."
    found = classify("", job_message=message)
    assert (found.cls, found.retriable) == (FailureClass.RUNTIME_ENV, False)
    assert "runtime_env.excludes" in found.hint


def test_pending_placement_and_no_progress_is_placement():
    groups = [{"placement_group_id": "a1b2c3d4e5f6a7b8", "state": "PENDING", "bundles": [{"unit_resources": {"GPU": 1, "CPU": 1}}] * 8}]
    found = classify("Connected to Ray cluster.\n", pending_groups=groups)
    assert (found.cls, found.phase) == (FailureClass.UNKNOWN, "placement")
    assert "pending" in found.hint and "GPU 8" in found.evidence[0]


def test_a_driver_killed_with_137_is_host_oom():
    found = classify(lines(STEP.format(n=2), "some line"), exit_code=137)
    assert (found.cls, found.retriable) == (FailureClass.HOST_OOM, True)


# ---------------------------------------------------------------- redaction and JSON

FAKE_KEY = "0123456789abcdef0123456789abcdef01234567"  # 40 hex, the shape of a W&B key


def test_secrets_never_reach_the_evidence():
    env = {"WANDB_API_KEY": "local-s3cr3tvalue-abc"}
    log = lines(
        f"ModuleNotFoundError: No module named 'x' (key local-s3cr3tvalue-abc, hf token hf_AbCdEfGhIjKlMnOpQrStUv, {FAKE_KEY})",
        "requests.exceptions.HTTPError: 401 Client Error: Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig for url",
        f"train_ppo_ray.py: error: unrecognized arguments: --use_wandb {FAKE_KEY} --pretrain /m",
    )
    text = json.dumps(classify(log, environ=env).as_json())
    for secret in ("local-s3cr3tvalue-abc", "hf_AbCdEfGhIjKlMnOpQrStUv", FAKE_KEY, "eyJhbGciOiJIUzI1NiJ9"):
        assert secret not in text
    assert "<redacted>" in text
    assert redact_line("Namespace(use_wandb='abcdefgh12345', pretrain='/m')") == "Namespace(use_wandb='<redacted>', pretrain='/m')"
    assert redact_line("node id: 8f205b12643d25d8c1ce57c45527a6c912f3479765096718ad2bf0d3") == (
        "node id: 8f205b12643d25d8c1ce57c45527a6c912f3479765096718ad2bf0d3"  # 56-hex Ray ids stay
    )


def test_json_has_the_documented_keys():
    data = classify(CORPUS[0]["excerpt"]).as_json()
    assert list(data) == ["class", "retriable", "phase", "step", "evidence", "hint"]
    assert data["class"] == "config" and json.loads(json.dumps(data)) == data


# ---------------------------------------------------------------- large files, read from the end

IDLE = (
    "(RolloutRayActor pid=48211, ip=10.0.0.2) INFO 09-14 10:02:11 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, GPU KV cache usage: 0.0%\n"
    "(PolicyModelActor pid=5120, ip=10.0.0.3) make_experience:   0%|          | 0/128 [10:02<?, ?it/s]\n"
)


def healthy(steps: int, from_step: int = 1) -> str:
    block = []
    for n in range(from_step, from_step + steps):
        block += [IDLE.replace("0.0 tokens/s", f"{n}.5 tokens/s").rstrip("\n"), TRAIN_BAR, STEP.format(n=n)]
    return lines(*block)


def write_log(path: Path, size: int, decisive: str, after: int, end: str) -> None:
    """`size` bytes of healthy steps, then `decisive`, `after` bytes of idle lines, `end`."""
    body = healthy(200).encode()
    with path.open("wb") as out:
        written = 0
        while written < size - after:
            out.write(body)
            written += len(body)
        out.write(decisive.encode() + b"\n")
        idle = (IDLE * 200).encode()
        written = 0
        while written < after:
            out.write(idle)
            written += len(idle)
        out.write(end.encode())


def test_a_root_cause_far_before_the_end_is_found(tmp_path):
    log = tmp_path / "driver.log"
    write_log(log, 50 << 20, NODE_DEAD, 20 << 20, lines(WATCHDOG, JOB_FAILED))  # 5x the tail window back
    start = time.perf_counter()
    found = diagnose_file(log)
    elapsed = time.perf_counter() - start
    assert (found.cls, found.retriable, found.step) == (FailureClass.NODE_LOST, True, 200)
    assert elapsed < 3.0  # ~0.1 s here; the 1 GB figure is bench/run.py --only diagnose


def test_a_failure_at_the_end_of_a_large_file(tmp_path):
    log = tmp_path / "driver.log"
    write_log(log, 50 << 20, TRAIN_BAR, 0, lines(CUDA_OOM, WATCHDOG, JOB_FAILED))
    found = diagnose_file(log)
    assert (found.cls, found.phase, found.step) == (FailureClass.GPU_OOM, "train", 200)


def test_file_and_memory_agree_whatever_the_chunking(tmp_path, monkeypatch):
    text = healthy(30) + lines(NODE_DEAD) + IDLE * 300 + lines(WATCHDOG, JOB_FAILED)
    log = tmp_path / "driver.log"
    log.write_text(text)
    expected = classify(text)
    assert (expected.cls, expected.step) == (FailureClass.NODE_LOST, 30)
    for tail, chunk in ((1 << 10, 700), (4 << 10, 1 << 10), (300, 97)):  # lines and step lines straddle chunks
        monkeypatch.setattr(dx, "TAIL", tail)
        monkeypatch.setattr(dx, "CHUNK", chunk)
        for found in (diagnose_file(log), classify(text)):
            assert (found.cls, found.step, found.evidence[0]) == (expected.cls, 30, expected.evidence[0]), (tail, chunk)


def test_root_causes_are_looked_for_within_max_back_only(tmp_path, monkeypatch):
    monkeypatch.setattr(dx, "MAX_BACK", 64 << 10)
    monkeypatch.setattr(dx, "TAIL", 8 << 10)
    monkeypatch.setattr(dx, "CHUNK", 16 << 10)
    far = lines(NODE_DEAD) + IDLE * 1000 + lines(WATCHDOG)  # the node death ~190 KB back, no step line
    assert classify(far).cls is FailureClass.NCCL
    assert classify(lines(NODE_DEAD) + IDLE * 100 + lines(WATCHDOG)).cls is FailureClass.NODE_LOST


def test_empty_log():
    found = classify("")
    assert (found.cls, found.retriable, found.step, found.evidence) == (FailureClass.UNKNOWN, False, None, [])


# A start-up that hangs at placement, with the noise a real one prints (Ray, argparse
# Namespace with the W&B key, NCCL and DeepSpeed warnings, HF and W&B lines).
NOISY_START = f"""\
2025-09-14 10:00:00,123\tINFO worker.py:1832 -- Connecting to existing Ray cluster at address: 10.0.0.1:6379...
Namespace(actor_num_nodes=1, pretrain='Qwen/Qwen2.5-7B-Instruct', use_wandb='{FAKE_KEY}', rollout_batch_size=128)
(PolicyModelActor pid=2301) node-0:2301:2400 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>
(PolicyModelActor pid=2301) node-0:2301:2400 [0] NCCL WARN NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.
(PolicyModelActor pid=2301) [rank0]:[W914 10:01:00.000 ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 Rank 0] using GPU 0 to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang.
(PolicyModelActor pid=2301) [2025-09-14 10:01:05,000] [WARNING] [stage3.py:2139:step] 1 pytorch allocator cache flushes since last step. this happens when there is high memory pressure and is detrimental to performance.
(PolicyModelActor pid=2301) You are using a model of type qwen2 to instantiate a model of type llama. This is not supported for all configurations of models and can yield errors.
(PPOTrainer pid=2100) wandb: Currently logged in as: someone. Use `wandb login --relogin` to force relogin
[rank0]:[W914 10:02:00.000 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources.
"""


def test_start_up_noise_is_not_a_failure():
    groups = [{"placement_group_id": "0f0e0d0c0b0a", "state": "PENDING", "bundles": [{"GPU": 1, "CPU": 1}] * 16}]
    found = classify(NOISY_START, pending_groups=groups)
    assert (found.cls, found.phase, found.step) == (FailureClass.UNKNOWN, "placement", None), found.rule
    assert FAKE_KEY not in json.dumps(found.as_json())
    assert classify(NOISY_START).cls is FailureClass.UNKNOWN


# ---------------------------------------------------------------- the class tables, the rule table


def class_tables(text: str) -> list[set[str]]:
    """The classes named in the first column of every markdown table headed `| class | ...`."""
    tables, current = [], None
    for line in text.splitlines():
        if re.match(r"\|\s*class\s*\|", line):
            current = set()
            tables.append(current)
        elif current is not None and line.startswith("|"):
            current.update(re.findall(r"`([a-z_]+)`", line.split("|")[1]))  # a row may name several classes
        else:
            current = None
    return tables


@pytest.mark.parametrize("doc", ["README.md", "docs/diagnose.md"])
def test_the_failure_class_tables_list_exactly_the_enum(doc):
    tables = class_tables((ROOT / doc).read_text())
    assert tables, f"{doc} has no failure-class table"
    for table in tables:
        assert table == {c.value for c in FailureClass}, (doc, table ^ {c.value for c in FailureClass})


def test_a_bad_rule_is_refused_when_the_table_is_built():
    from rlhf_launch.diagnose.rules import Rule

    good = {"name": "x", "cls": FailureClass.NCCL, "pattern": "boom", "anchors": ("boom",), "retriable": True, "hint": "h"}
    assert Rule(**good).regex.search("a boom")
    for bad, message in (
        ({"retriable_by": "no_such_predicate", "retriable": None}, "no function"),
        ({"hint_by": "no_such_hint", "hint": ""}, "no function"),
        ({"hint": ""}, "exactly one of hint"),
        ({"phase": "warmup"}, "unknown phase"),
        ({"phase": "train", "phase_by": "nccl_phase"}, "at most one"),
        ({"pattern": "(unclosed"}, "missing"),
        ({"anchors": ()}, "anchors"),
    ):
        with pytest.raises((ValueError, re.error), match=message):
            Rule(**{**good, **bad})
    assert len({rule.name for rule in RULES}) == len(RULES)


def test_every_registered_function_is_named_by_a_rule():
    from rlhf_launch.diagnose import checks

    named = {name for rule in RULES for name in (rule.retriable_by, rule.when, rule.hint_by, rule.phase_by) if name}
    assert set(checks.PREDICATES) | set(checks.HINTS) | set(checks.PHASE_OF) == named


# ---------------------------------------------------------------- gpu_fault, node_lost, unknown: what they name

XID_LINE = (
    "(raylet, ip=10.0.0.5) [Tue Dec  2 10:00:01 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus."
)
ECC = "(PolicyModelActor pid=5120, ip=10.0.0.3) RuntimeError: CUDA error: uncorrectable ECC error encountered"


def test_a_gpu_fault_outranks_the_nccl_and_cuda_errors_it_causes_and_names_its_node():
    found = classify(lines(STEP.format(n=9), TRAIN_BAR, ECC, WATCHDOG, JOB_FAILED))
    assert (found.cls, found.retriable, found.step) == (FailureClass.GPU_FAULT, True, 9)
    assert "10.0.0.3" in found.hint and "drain" in found.hint
    found = classify(lines(STEP.format(n=9), XID_LINE, WATCHDOG))
    assert found.cls is FailureClass.GPU_FAULT and "10.0.0.5" in found.hint and "0000:3b:00" in found.hint and "Xid 79" in found.hint


def test_an_xid_the_program_caused_is_not_a_gpu_fault():
    app = "NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=python, Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0"
    illegal = "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert classify(lines(STEP.format(n=9), app, illegal)).cls is FailureClass.UNKNOWN


def test_a_gpu_fault_far_before_the_end_is_found(tmp_path):
    log = tmp_path / "driver.log"
    write_log(log, 20 << 20, XID_LINE, 12 << 20, lines(WATCHDOG, JOB_FAILED))
    found = diagnose_file(log)
    assert (found.cls, found.step) == (FailureClass.GPU_FAULT, 200)


@pytest.mark.parametrize(
    "line, node",
    [
        (NODE_DEAD, "10.0.0.7"),
        ("[2025-01-03 10:00:00,000 I 74 74] (raylet, ip=10.0.0.12) node_manager.cc:170: This node has been marked as dead.", "10.0.0.12"),
        (
            "2025-01-03 10:00:00,000\tERROR agent.py:217 -- Raylet is terminated: ip=10.0.0.9, id=5fa7195f6fdcb2f6f9f378604ecc52538"
            "71ddde0dffc54186ee82d09. Termination is unexpected.",
            "10.0.0.9",
        ),
        ("(autoscaler +12m3s) Terminating the node 10.0.0.21 (instance i-0abc): its instance was reclaimed", "10.0.0.21"),
        ("(autoscaler +4h28m31s) Error: No available node types can fulfill resource request {'node:10.0.0.192': 0.01}.", "10.0.0.192"),
        ("2025-01-03 10:00:00,000\tINFO node.py:1 -- Running ray stop on 10.0.0.14 (node_id=4f1c2a9b8e7d6c5b)", "10.0.0.14"),
    ],
)
def test_a_node_lost_names_the_node(line, node):
    found = classify(lines(STEP.format(n=4), line, WATCHDOG, JOB_FAILED))
    assert (found.cls, found.retriable) == (FailureClass.NODE_LOST, True), found.rule
    assert node in found.hint


def test_unknown_names_the_last_exception():
    log = lines(
        STEP.format(n=3), "Traceback (most recent call last):", '  File "x.py", line 1, in f', "ZeroDivisionError: division by zero"
    )
    found = classify(log)
    assert found.cls is FailureClass.UNKNOWN
    assert "ZeroDivisionError: division by zero" in found.hint
    secret = lines("ValueError: bad token hf_AbCdEfGhIjKlMnOpQrStUv")
    assert "hf_AbCd" not in classify(secret).hint
    for entry in CORPUS:  # never tells that resubmitting would fail the same way of an unknown cause
        found = classify(entry["excerpt"])
        if found.cls is FailureClass.UNKNOWN:
            assert not re.search(r"(?i)same way|will (?:likely )?repeat|would fail", found.hint), found.hint


# ---------------------------------------------------------------- families real logs showed (see also test_diagnose_field.py)


@pytest.mark.parametrize(
    "log, cls, retriable",
    [
        # NCCL's watchdog stuck (not a collective timeout), mid-run
        (
            "[rank3]:[E1105 02:11:09.521 ProcessGroupNCCL.cpp:1442] [PG ID 0 PG GUID 0(default_pg) Rank 3] Heartbeat monitor timed out! "
            "Process will be terminated after dumping debug info. workMetaList_.size()=2\n"
            "[rank3]:[E1105 02:11:09.522 ProcessGroupNCCL.cpp:1302] [PG ID 0 Rank 3] ProcessGroupNCCL's watchdog got stuck for 480 "
            "seconds without making progress in monitoring enqueued collectives.",
            FailureClass.NCCL,
            True,
        ),
        # vLLM's KV cache, newer wording
        (
            "(LLMRayActor pid=811) ValueError: To serve at least one request with the models's max seq len (32768), (4.00 GiB KV "
            "cache is needed, which is larger than the available KV cache memory (1.20 GiB).",
            FailureClass.VLLM,
            False,
        ),
        # GPU OOM while vLLM wakes from sleep mode
        (
            '(LLMRayActor pid=811)   File "/usr/lib/python3/site-packages/vllm/entrypoints/llm.py", line 1244, in wake_up\n'
            "(LLMRayActor pid=811) RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
            FailureClass.GPU_OOM,
            False,
        ),
        # an InfiniBand fault during the weight update
        (
            "(PolicyModelActor pid=5120, ip=10.0.0.3) INFO ppo_actor.py:200] update weight: broadcast_to_vllm\n"
            "(PolicyModelActor pid=5120, ip=10.0.0.3) node-1:5120:6001 [0] NCCL WARN NET/IB : Got completion from peer "
            "10.0.0.4<53120> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.3",
            FailureClass.WEIGHT_SYNC,
            True,
        ),
        # a remote judge timing out inside a Ray task
        (
            'ray::RewardWorker.compute_score() (pid=9021, ip=10.0.0.8)\n  File "/app/judge_reward.py", line 40, in compute_score\n'
            "    resp = client.chat.completions.create(model=judge, messages=msgs)\nopenai.APITimeoutError: Request timed out.",
            FailureClass.REWARD_REMOTE,
            True,
        ),
        # an OmegaConf struct config refusing a key at trainer init
        (
            "omegaconf.errors.ConfigAttributeError: Key 'rollout_n' is not in struct\n    full_key: actor_rollout_ref.rollout_n",
            FailureClass.CONFIG,
            False,
        ),
        # a start-up check on sizes, worded by another trainer
        (
            "ValueError: The global train batch size (8 x 1) must be evenly divisible by the number of generations per prompt (16).",
            FailureClass.CONFIG,
            False,
        ),
        # a raylet stopped by `ray stop` on its node
        (
            "(raylet, ip=10.0.0.31) [2025-01-03 10:00:00,000 I 74 74] main.cc:291: Raylet received SIGTERM, shutting down...",
            FailureClass.NODE_LOST,
            True,
        ),
        # a spot node preempted
        ("(autoscaler +3h2m1s) Node 10.0.0.40 was preempted by the cloud provider.", FailureClass.NODE_LOST, True),
        # a model file that is a Git LFS pointer
        (
            "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
            FailureClass.MODEL_OR_DATA,
            False,
        ),
        # a library older than its caller expects
        ("AttributeError: module 'vllm' has no attribute 'LLMEngine'", FailureClass.IMPORT, False),
        # vLLM asked for a longer context than the model has
        (
            "(LLMRayActor pid=811) ValueError: User-specified max_model_len (32768) is greater than the derived max_model_len "
            "(max_position_embeddings=4096 or model_max_length=None in model's config.json).",
            FailureClass.VLLM,
            False,
        ),
        # Ray's memory monitor, as the actor's exit type
        (
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task. The actor is dead because its "
            "worker process has died. Worker exit type: NODE_OUT_OF_MEMORY",
            FailureClass.HOST_OOM,
            True,
        ),
        # the image's CUDA build does not fit the GPU
        ("RuntimeError: CUDA error: no kernel image is available for execution on the device", FailureClass.IMPORT, False),
    ],
    ids=[
        "nccl-stuck",
        "kv-cache",
        "oom-wake-up",
        "ib-weight-sync",
        "judge-timeout",
        "omegaconf",
        "divisible",
        "raylet-sigterm",
        "preempted",
        "lfs-pointer",
        "module-attribute",
        "vllm-max-len",
        "node-out-of-memory",
        "no-kernel-image",
    ],
)
def test_families_real_logs_showed(log, cls, retriable):
    found = classify(lines(STEP.format(n=6), log))
    assert (found.cls, found.retriable) == (cls, retriable), (found.rule, found.evidence)
    full = classify(lines(STEP.format(n=6), log), _every_line=True)
    assert (full.cls, full.rule) == (found.cls, found.rule)


def test_warnings_and_waits_lose_to_a_real_failure_after_them():
    warning = "WARNING 03-30 00:24:16 [_logger.py:72] Input prompt (8128 tokens) is too long and exceeds limit of 6000"
    assert classify(lines(warning)).cls is FailureClass.VLLM  # alone it explains the end
    found = classify(lines(STEP.format(n=5), warning, NODE_DEAD, WATCHDOG))
    assert found.cls is FailureClass.NODE_LOST
    divisible = "WARNING: rollout_batch_size should be divisible by the number of vLLM engines for even load"
    assert classify(lines(STEP.format(n=5), divisible, WATCHDOG)).cls is FailureClass.NCCL
    idle = "(autoscaler +1m2s) Removing 1 nodes of type cpu_worker (idle)."
    assert classify(lines(STEP.format(n=5), idle, CUDA_OOM)).cls is FailureClass.GPU_OOM


def test_reward_words_in_step_lines_do_not_make_a_network_error_reward_remote():
    refused = "(PolicyModelActor pid=5120) node-1:5120:6001 [0] NCCL WARN Net : Connect to 10.0.0.4<53120> failed : Connection refused"
    found = classify(lines(STEP.format(n=5), TRAIN_BAR, refused))
    assert found.cls is FailureClass.NCCL, found.rule


# ---------------------------------------------------------------- round two: fallbacks by exception type, retriable exceptions


@pytest.mark.parametrize(
    "log, cls, retriable, rule",
    [
        # an HTTP client's timeout with no reward word around it: the exception type alone decides
        (
            '  File "/app/custom/scoring.py", line 40, in score\nopenai.APITimeoutError: Request timed out.',
            FailureClass.REWARD_REMOTE,
            True,
            None,
        ),
        (
            '  File "/app/custom/scoring.py", line 12, in ask\nhttpx.ReadTimeout: timed out',
            FailureClass.REWARD_REMOTE,
            True,
            "type_http_client",
        ),
        # a 4xx answer: the request is wrong, resubmitting sends it again
        (
            '  File "/app/custom/scoring.py", line 40, in score\n'
            "openai.BadRequestError: Error code: 400 - {'error': {'message': 'max_tokens is too large'}}",
            FailureClass.REWARD_REMOTE,
            False,
            None,
        ),
        # but the Hub's client errors are not the reward server's
        (
            "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out.",
            FailureClass.MODEL_OR_DATA,
            False,
            "hf_missing",
        ),
        (
            "ray.exceptions.OutOfMemoryError: Task was killed (worded some new way) on node 10.0.0.4",
            FailureClass.HOST_OOM,
            True,
            "type_ray_oom",
        ),
        ("torch.distributed.DistNetworkError: Connection reset by peer", FailureClass.NCCL, True, None),
        # torch's newer watchdog wording, mid-run
        (
            "[rank0]:[E822 16:31:16 ProcessGroupNCCL.cpp:2271] [PG ID 4 Rank 0] failure detected by watchdog at work sequence id: 5730",
            FailureClass.NCCL,
            True,
            "nccl_error",
        ),
        # vLLM V0's async engine, mid-run
        (
            "(LLMRayActor pid=811) vllm.engine.async_llm_engine.AsyncEngineDeadError: Background loop has errored already.",
            FailureClass.VLLM,
            True,
            "vllm_crash",
        ),
        # Ray's memory monitor's error wrapped in a task error; torch's CUDA OOM wraps the same way but says so
        (
            "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_ref_update_actor() (pid=1, ip=10.0.0.5)",
            FailureClass.HOST_OOM,
            True,
            "type_ray_oom",
        ),
        (
            "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.update_actor() (pid=1, ip=10.0.0.5)\n" + CUDA_OOM,
            FailureClass.GPU_OOM,
            False,
            "cuda_oom",
        ),
        # an OpenAI-compatible server's 4xx error body
        (
            '{"object":"error","message":"The model does not support Score API","type":"BadRequestError","param":null,"code":400}',
            FailureClass.REWARD_REMOTE,
            False,
            "type_http_client",
        ),
        (
            "Status message: Unexpected error occurred: The actor 2c52516 is unavailable",
            FailureClass.NODE_LOST,
            True,
            "type_actor_unavailable",
        ),
    ],
    ids=[
        "openai-timeout",
        "httpx-timeout",
        "openai-400",
        "hub-timeout",
        "ray-oom",
        "dist-network",
        "watchdog-newer",
        "vllm-v0-dead",
        "ray-task-oom",
        "cuda-oom-in-a-task",
        "openai-error-body-400",
        "actor-unavailable",
    ],
)
def test_the_exception_type_alone_decides_when_no_rule_knows_the_wording(log, cls, retriable, rule):
    found = classify(lines(STEP.format(n=6), log))
    assert (found.cls, found.retriable) == (cls, retriable), (found.rule, found.evidence)
    assert rule is None or found.rule == rule


def test_nccl_system_error_before_any_step_is_not_retried_but_a_timeout_mid_run_is():
    system = "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details)"
    assert (classify(lines(system)).cls, classify(lines(system)).retriable) == (FailureClass.NCCL, False)
    assert classify(lines(STEP.format(n=6), WATCHDOG)).retriable is True


def test_a_vllm_engine_dead_while_generating_is_retried_but_not_at_start_up():
    dead = "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."
    generating = '  File "/usr/lib/python3/site-packages/vllm/v1/engine/core_client.py", line 883, in get_output_async\n' + dead
    assert classify(lines(generating)).retriable is True
    loading = "(LLMRayActor pid=811) INFO Loading model weights took 14.5 GiB\n" + dead
    found = classify(lines(loading))
    assert (found.cls, found.retriable) == (FailureClass.VLLM, False), (found.rule, found.phase)


@pytest.mark.parametrize(
    "log, cls, retriable",
    [
        # c10d's client refused, not only timing out, before any step
        (
            "[W1225 12:58:32 socket.cpp:752] [c10d] The client socket has failed to connect to [node-1]:29500 (errno: 111 - Connection refused).",
            FailureClass.NCCL,
            False,
        ),
        # Ray's memory monitor, its threshold wording
        (
            "Memory on the node (IP: 10.0.0.4, ID: 8f20) where the task was running was 241.2GB / 251.5GB (0.959), which exceeds "
            "the memory usage threshold of 0.95. Ray killed this worker (ID: 3a1f) because it was the most recently scheduled task.",
            FailureClass.HOST_OOM,
            True,
        ),
        ("deepspeed.runtime.config.DeepSpeedConfigError: zero_optimization.stage must be 0-3", FailureClass.CONFIG, False),
        (
            "ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation task, "
            "ray::LLMRayActor.__init__() (pid=811, ip=10.0.0.3)",
            FailureClass.VLLM,
            False,
        ),
        ("ValueError: Some specified arguments are not used by the HfArgumentParser: ['--foo', '1']", FailureClass.CONFIG, False),
        (
            "requests.exceptions.ConnectionError: (MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Max retries "
            'exceeded with url: /api/models/x"))',
            FailureClass.MODEL_OR_DATA,
            False,
        ),
        ("[   12.3] NVRM: RmInitAdapter failed! (0x26:0x56:1474)", FailureClass.GPU_FAULT, True),
        (
            "ray.exceptions.NodeDiedError: Task failed due to the node (where this task was running) was dead or unavailable.",
            FailureClass.NODE_LOST,
            True,
        ),
        (
            "urllib3.exceptions.ReadTimeoutError: HTTPConnectionPool(host='10.0.0.3', port=5000): Read timed out. (read timeout=60)",
            FailureClass.REWARD_REMOTE,
            True,
        ),
    ],
    ids=[
        "c10d-refused",
        "ray-memory-threshold",
        "deepspeed-config",
        "vllm-actor-init",
        "hf-argparser",
        "hub-unreachable",
        "rm-init-adapter",
        "ray-node-died-task",
        "urllib3-timeout",
    ],
)
def test_other_wordings_of_known_failures(log, cls, retriable):
    text = lines(log) if cls is FailureClass.NCCL else lines(STEP.format(n=6), log)
    found = classify(text)
    assert (found.cls, found.retriable) == (cls, retriable), (found.rule, found.evidence)


def test_library_assertions_and_cut_tracebacks_of_known_families():
    device = "AssertionError:\nthis nccl communicator is created to work on cuda:1,\nbut the input tensor is on cuda:0"
    found = classify(lines(device))
    assert (found.cls, found.retriable, found.phase) == (FailureClass.WEIGHT_SYNC, False, "weight_sync"), found.rule
    cut = (
        '(VllmWorkerProcess pid=5) ERROR   File "/site-packages/vllm/distributed/device_communicators/pynccl_wrapper.py", '
        "line 244, in ncclCommInitRank"
    )
    found = classify(lines(cut))
    assert (found.cls, found.retriable) == (FailureClass.NCCL, False), found.rule
