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
from rlhf_launch.runs import diagnose as dx
from rlhf_launch.runs.diagnose import PHASES, FailureClass, classify, diagnose_file, redact_line

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
    hints |= {rule.hint for rule in dx.RULES if isinstance(rule.hint, str)}
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
