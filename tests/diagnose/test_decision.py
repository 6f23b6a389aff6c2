"""The decision on failures no rule names (issue 32): it stands on signals that survive
rewording (diagnose/signals.py: the component that failed, the exception's type and where it
was raised, progress before it), then on the vote of the closest known cases
(diagnose/neighbours.py); and `diagnose --log` says what the supervisor's retry policy would
do with the failure, from the same function."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rlhf_launch.cli.app import main
from rlhf_launch.diagnose import FailureClass, classify, neighbours
from rlhf_launch.diagnose.signals import component_of, exception_type, raised_at
from rlhf_launch.runs import logfile, retry

from conftest import ROOT

STEP = "✨ Global step 12: {'policy_loss': 0.1}\n"
# An exception type and message no rule knows, inside a traceback whose frames say where it was.
VLLM_TB = """Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/vllm/model_executor/layers/frobnicate.py", line 77, in frobnicate
    out = kernel(x)
(LLMRayActor pid=123) FrobnicationError: the frobnicator gave up
"""
TRAINER_TB = """Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/deepspeed/runtime/engine.py", line 2087, in step
    self._take_model_step()
FrobnicationError: the frobnicator gave up
"""


# ---------------------------------------------------------------- signals


@pytest.mark.parametrize(
    ("line", "before", "component"),
    [
        ("(LLMRayActor pid=1) ValueError: x", "", "vllm"),
        ("(EngineCore_DP0 pid=559) ERROR 10-20 03:20:50 [core.py:720] EngineCore encountered a fatal error.", "", "vllm"),
        ("ValueError: x", "ray.exceptions.RayTaskError(ValueError): ray::ActorModelRayActor.fit() (pid=1, ip=10.0.0.1)\n", "trainer"),
        (
            "KeyError: 'answer'",
            'Traceback (most recent call last):\n  File "/w/openrlhf/utils/remote_rm_utils.py", line 9, in f\n',
            "reward",
        ),
        (
            "RuntimeError: x",
            'Traceback (most recent call last):\n  File "/x/site-packages/deepspeed/runtime/zero/stage3.py", line 9, in f\n',
            "trainer",
        ),
        (
            "StopIteration: x",
            'Traceback (most recent call last):\n  File "/x/site-packages/torch/utils/data/dataloader.py", line 9, in f\n',
            "data",
        ),
        ("ERROR 02-21 06:30:25 core.py:291] RuntimeError: boom", "", "vllm"),  # vLLM's own log format
        ("RuntimeError: x", "", None),
    ],
)
def test_the_component_comes_from_prefixes_ray_tasks_frames_and_log_format(line, before, component):
    assert component_of(line, before) == component


def test_where_an_exception_was_raised_and_its_type():
    assert raised_at("FrobnicationError: x", VLLM_TB) == "frobnicate.py:frobnicate"
    assert raised_at("FrobnicationError: x", "") == ""
    assert exception_type("(LLMRayActor pid=123) torch.OutOfMemoryError: CUDA out of memory") == "OutOfMemoryError"
    assert exception_type("ray.exceptions.RayTaskError(ValueError): ray::X.f()") == "RayTaskError"
    assert exception_type("no exception here") == ""


# ---------------------------------------------------------------- the fallback decision


def test_a_stateless_component_failing_mid_run_is_retriable():
    found = classify(STEP + VLLM_TB)
    assert (found.cls, found.retriable, found.rule) == (FailureClass.VLLM, True, "fallback")
    assert "FrobnicationError" in found.hint and "vLLM engine" in found.hint and "frobnicate.py:frobnicate" in found.hint


def test_the_same_failure_before_the_first_step_is_not():
    # raised in the engine actor's constructor: start-up (model load), before any step
    found = classify(
        "Traceback (most recent call last):\n"
        '  File "/x/openrlhf/cli/train_ppo_ray.py", line 9, in train\n'
        "    ray.get(refs)\n"
        "ray.exceptions.RayTaskError(FrobnicationError): ray::LLMRayActor.__init__() (pid=123, ip=10.0.0.1)\n"
        '  File "/usr/lib/python3/site-packages/vllm/worker/worker.py", line 77, in init_device\n'
        "    frobnicate()\n"
        "FrobnicationError: the frobnicator gave up\n"
    )
    assert (found.cls, found.retriable, found.phase) == (FailureClass.VLLM, False, "model_load")
    assert "before the first step" in found.hint


def test_a_stateless_component_failing_with_no_sign_of_start_up_is_retriable():
    # no step, no phase: nothing puts it at start-up, and a fresh engine starts from the weights
    found = classify("(LLMRayActor pid=7) FrobnicationError: the frobnicator gave up\n")
    assert (found.cls, found.retriable, found.phase) == (FailureClass.VLLM, True, None)


def test_a_vllm_engine_being_built_is_at_start_up():
    found = classify(
        "INFO 03-10 08:07:20 [gpu_model_runner.py:1067] Model loading took 0.2389 GB and 0.977005 seconds\n"
        "ERROR 03-10 08:07:20 [core.py:302] EngineCore hit an exception: Traceback (most recent call last):\n"
        'ERROR 03-10 08:07:20 [core.py:302]   File "/x/site-packages/vllm/v1/engine/core.py", line 249, in __init__\n'
        "ERROR 03-10 08:07:20 [core.py:302]     super().__init__(vllm_config, executor_class, log_stats)\n"
    )
    assert (found.cls, found.retriable, found.phase) == (FailureClass.VLLM, False, "model_load")


def test_an_unknown_trainer_failure_after_progress_is_not_retriable_but_auto_resume_retries_it_once(tmp_path):
    found = classify(STEP + TRAINER_TB)
    assert (found.cls, found.retriable, found.step) == (FailureClass.UNKNOWN, False, 12)
    assert "trainer rank" in found.hint
    first = retry.decide([retry.Failure.of(found)], retry.Policy(auto_resume=3))
    assert isinstance(first, retry.Retry) and "retried once" in first.reason
    again = retry.decide([retry.Failure.of(found), retry.Failure("unknown", False, 20, resumed_from=10)], retry.Policy(auto_resume=3))
    assert isinstance(again, retry.Stop)  # once: a second unknown in a row stops


@pytest.mark.parametrize(
    ("log", "cls", "retriable"),
    [
        # the shape of an unresolvable import, whatever prints it (no `ImportError:` prefix)
        (
            "(TemporaryActor pid=1) cannot import name 'Thing' from partially initialized module 'pkg.mod' "
            "(most likely due to a circular import) (/x/pkg/mod.py)\n",
            FailureClass.IMPORT,
            False,
        ),
        # raised while loading a checkpoint: the checkpoint cannot be read as it is
        (
            STEP + 'Traceback (most recent call last):\n  File "/x/trainer.py", line 9, in _load_optimizer_and_scheduler\n'
            "    self.engine.load_checkpoint(path)\nFrobnicationError: shapes differ\n",
            FailureClass.MODEL_OR_DATA,
            False,
        ),
        # the reward server did not answer, mid-run: a resumed run may find it back
        (
            STEP + 'Traceback (most recent call last):\n  File "/w/openrlhf/utils/remote_rm_utils.py", line 29, in request_api\n'
            "    r = session.post(url)\nFrobnicatedConnectionError: peer went away\n",
            FailureClass.REWARD_REMOTE,
            True,
        ),
        # reward code that raises fails the same way again
        (
            STEP + 'Traceback (most recent call last):\n  File "/w/my_reward_fn.py", line 3, in reward_func\n'
            "    return score[label]\nFrobnicationError: no score\n",
            FailureClass.REWARD_REMOTE,
            False,
        ),
        # no exception line at all: the frames before the log's end still name a vLLM engine mid-run
        (
            STEP + '  File "/x/site-packages/vllm/entrypoints/llm.py", line 470, in generate\n'
            "    outputs = self._run_engine(use_tqdm=use_tqdm)\n"
            '  File "/x/site-packages/vllm/engine/llm_engine.py", line 1391, in step\n'
            "    outputs = self.model_executor.execute_model(\n",
            FailureClass.VLLM,
            True,
        ),
    ],
)
def test_signals_decide_what_no_rule_names(log, cls, retriable):
    found = classify(log)
    assert (found.cls, found.retriable, found.rule) == (cls, retriable, "fallback")


def test_a_placement_hang_is_still_read_as_one():
    found = classify("waiting\n", pending_groups=[{"state": "PENDING", "bundles": [{"GPU": 8}]}])
    assert (found.cls, found.phase) == (FailureClass.UNKNOWN, "placement")


# ---------------------------------------------------------------- the closest known cases


def _rules_entries() -> list[dict]:
    entries = list(yaml.safe_load((ROOT / "tests/data/diagnose/corpus.yaml").read_text()))
    for path in sorted((ROOT / "tests/data/diagnose/field/rules").glob("*.yaml")):
        entries += yaml.safe_load(path.read_text()) or []
    return entries


def _held_out_entries() -> list[dict]:
    out: list[dict] = []
    for path in sorted((ROOT / "tests/data/diagnose/field/heldout").glob("*.yaml")):
        out += yaml.safe_load(path.read_text()) or []
    return out


def test_the_shipped_cases_are_the_rules_halves_and_never_a_held_out_thread():
    shipped = json.loads((ROOT / "src/rlhf_launch/diagnose" / neighbours.DATA).read_text())
    assert shipped == json.loads(json.dumps(neighbours.build(_rules_entries(), _held_out_entries()), sort_keys=True)), (
        "known_cases.json is stale: run python scripts/build_known_cases.py"
    )
    held_out = {str(e["source"]).split("#", 1)[0] for e in _held_out_entries()}
    assert not {str(c["source"]).split("#", 1)[0] for c in shipped["cases"]} & held_out
    assert len(shipped["cases"]) > 250


def test_a_known_case_is_its_own_closest_case_and_the_vote_names_it():
    entry = (ROOT / "tests/data/diagnose/field/rules/part-a.yaml").read_text()
    entry = yaml.safe_load(entry)[0]
    found = neighbours.vote(entry["excerpt"])
    assert found is not None and found.similarity == pytest.approx(1.0)
    assert found.closest == entry["source"]
    assert 0 < found.confidence <= 1
    assert neighbours.vote("") is None
    assert neighbours.tokens('File "/a/b/c.py", line 3, in update_weight') >= {"update_weight", "update", "weight"}


# ---------------------------------------------------------------- diagnose --log and the supervisor agree


def _sample() -> list[dict]:
    """Excerpts of every class, retriable and not, from the rules halves (about 40)."""
    seen: dict[tuple[str, bool], int] = {}
    out = []
    for entry in _rules_entries():
        key = (entry["class"], bool(entry["retriable"]))
        if seen.get(key, 0) < 2:
            seen[key] = seen.get(key, 0) + 1
            out.append(entry)
    return out


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out + err


def test_diagnose_log_says_what_the_supervisor_would_do(tmp_path: Path, capsys):
    for n, entry in enumerate([*_sample(), {"excerpt": STEP + TRAINER_TB}, {"excerpt": TRAINER_TB}]):
        path = tmp_path / f"job-{n}.log"
        path.write_text(entry["excerpt"])
        code, out = _cli(capsys, "diagnose", "--log", str(path), "--json")
        assert code == 0, out
        shown = json.loads(out)["auto_resume"]
        # the supervisor: the same log file through the edge's reader, then the retry policy
        decision = retry.decide([retry.Failure.of(logfile.diagnose_file(path))], retry.Policy(auto_resume=1))
        assert shown == {"retry": isinstance(decision, retry.Retry), "reason": decision.reason}, entry.get("source")


def test_diagnose_log_text_says_an_unknown_failure_after_progress_is_resumed_once(tmp_path: Path, capsys):
    path = tmp_path / "job.log"
    path.write_text(STEP + TRAINER_TB)
    code, out = _cli(capsys, "diagnose", "--log", str(path))
    assert code == 0, out
    assert "diagnosis: unknown (not retriable) at step 12" in out
    assert "auto-resume: would resume: unknown at step 12 is retried once" in out
    path.write_text(TRAINER_TB)
    code, out = _cli(capsys, "diagnose", "--log", str(path))
    assert "auto-resume: would stop: unknown failure before the first step" in out


def test_a_folder_named_reward_does_not_make_a_trainer_frame_the_reward_servers():
    from rlhf_launch.diagnose.signals import _by_path

    assert _by_path("/data/reward_exp/openrlhf/trainer/ppo_trainer.py") == "trainer"
    assert _by_path("/w/my_reward_fn.py") == "reward"
    assert _by_path("/w/openrlhf/utils/remote_rm_utils.py") == "reward"


# ---------------------------------------------------------------- start-up read from the log's own times and markers

# A vLLM engine's crash, its lines stamped by vLLM's logger, in a Ray job whose session directory
# names when the cluster began (the shape of lmm-r1#68's log, not its text).
VLLM_CRASH_AT = """(LLMRayActor pid=7) CRITICAL 04-21 {at} [core_client.py:361] Got fatal signal from worker processes, shutting down.
Traceback (most recent call last):
  File "/tmp/ray/session_2025-04-21_10-42-30_288003_91197/runtime_resources/working_dir_files/_ray_pkg_1/openrlhf/cli/train_ppo_ray.py", line 516, in <module>
    train(args)
"""


def test_a_crash_minutes_after_the_ray_session_began_is_start_up_and_not_retried():
    early = classify(VLLM_CRASH_AT.format(at="10:43:16"))
    assert (early.cls, early.phase, early.retriable) == (FailureClass.VLLM, "startup", False)
    # an hour in, the same line is no longer read as start-up: the phase is left unknown
    late = classify(VLLM_CRASH_AT.format(at="11:43:16"))
    assert late.cls is FailureClass.VLLM and late.phase != "startup"
    # with a step logged, the session's time is not read at all
    assert classify(STEP + VLLM_CRASH_AT.format(at="10:43:16")).phase != "startup"


def test_a_rank_killed_during_deepspeeds_engine_set_up_is_sizing_not_retried():
    log = (
        "[2025-03-07 23:53:27,408] [INFO] [real_accelerator.py:222:get_accelerator] Setting ds_accelerator to cuda (auto detect)\n"
        "Parameter Offload: Total persistent parameters: 414720 in 81 params\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 53040)\n"
    )
    found = classify(log)
    assert (found.cls, found.retriable) == (FailureClass.HOST_OOM, False)
    assert found.phase in ("startup", "model_load")
    # the same kill after a step is retried (the node may have been shared)
    assert classify(STEP + log.splitlines(keepends=True)[-1]).retriable is True


def test_a_full_object_store_is_not_retried():
    log = (
        "ray.exceptions.ObjectStoreFullError: Failed to put object ffff in object store because it is full. Object size is 516884584 bytes.\n"
        "The local object store is full of objects that are still in scope and cannot be evicted.\n"
    )
    assert classify(STEP + log).retriable is False


# ---------------------------------------------------------------- wave I (rules half): signals, not wordings


def test_a_fused_workers_rollout_method_names_the_engine_and_the_phase():
    log = (
        "ray.exceptions.RayTaskError(AssertionError): ray::WorkerDict.actor_rollout_generate_sequences() (pid=7, ip=10.0.0.1)\n"
        '  File "/opt/app/verl/single_controller/ray/base.py", line 419, in func\n'
        "    return getattr(self.worker_dict[key], name)(*args, **kwargs)\n"
        "AssertionError: the frobnicator gave up\n"
    )
    found = classify(log)
    assert (found.cls, found.phase, found.retriable) == (FailureClass.VLLM, "generate", True)
    # verl's other fused names read the same way: a role prefix before a known phase's name
    assert classify(log.replace("actor_rollout_generate_sequences", "ref_compute_ref_log_prob")).phase == "make_experience"


def test_an_exception_raised_where_deepspeed_checks_its_config_is_a_config_error():
    log = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/site-packages/deepspeed/runtime/config.py", line 798, in __init__\n'
        "    self._configure_train_batch_size()\n"
        '  File "/usr/lib/python3/site-packages/deepspeed/runtime/config.py", line 981, in _configure_train_batch_size\n'
        "    self._batch_assertion()\n"
        "FrobnicationError: batch sizes do not frobnicate\n"
    )
    assert (classify(log).cls, classify(log).retriable) == (FailureClass.CONFIG, False)


def test_a_vllm_engine_refusing_its_input_before_any_progress_is_not_retried():
    refused = "ERROR 02-28 01:21:51 engine.py:400] ValueError: the frobnicator does not divide the tensor parallel size\n"
    found = classify(refused)
    assert (found.cls, found.retriable) == (FailureClass.VLLM, False)
    # after a step the same engine failure is retried (a new engine starts from the weights)
    assert classify(STEP + refused).retriable is True
    # a runtime crash of the engine with no sign of start-up is retried as before
    assert classify("ERROR 02-28 01:21:51 engine.py:400] RuntimeError: the frobnicator gave up\n").retriable is True


@pytest.mark.parametrize(
    "marker",
    [
        "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:00<00:00, 3.72it/s]",
        "Capturing batches (avail_mem=6.28 GB):   4%|| 1/23 [00:00<00:12, 1.81it/s]",
        "2025-02-11 21:35:17,102 INFO worker.py:1654 -- Connecting to existing Ray cluster at address: 10.0.0.1:6379...",
    ],
)
def test_a_watchdog_timeout_while_engines_load_is_start_up_and_not_retried(marker):
    timeout = (
        "[Rank7]:[E ProcessGroupNCCL.cpp:629] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600066 milliseconds before timing out.\n"
    )
    found = classify(marker + "\n" + timeout)
    assert found.cls is FailureClass.NCCL and found.phase in ("startup", "model_load") and found.retriable is False
    assert classify(STEP + timeout).retriable is True  # mid-run, the same timeout is transient


def test_torchs_advice_to_enable_device_side_assertions_is_no_fault_of_its_own():
    advice = "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
    assert classify(advice, _every_line=True).rule != "cuda_fault"
    assert classify("RuntimeError: CUDA error: device-side assert triggered\n" + advice).rule == "cuda_fault"


# ---------------------------------------------------------------- wave J (rules half): more signals


def test_an_exception_raised_without_a_message_is_still_its_type():
    log = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/site-packages/vllm/engine/frob_engine.py", line 535, in frobnicate_async\n'
        "    raise NotImplementedError\n"
        "NotImplementedError\n"
    )
    found = classify(log)
    assert found.cls is FailureClass.VLLM and found.retriable is False  # an engine refusing, before any progress
    assert "NotImplementedError" in found.hint


def test_a_loader_by_its_name_is_model_or_data():
    log = (
        "Traceback (most recent call last):\n"
        '  File "/opt/app/tuner/core/loader.py", line 213, in load_model_and_tokenizer\n'
        '    assert frobnicated(model), "the frobnicator was not loaded."\n'
        "AssertionError: the frobnicator was not loaded.\n"
    )
    assert (classify(log).cls, classify(log).retriable) == (FailureClass.MODEL_OR_DATA, False)
    # vLLM's `load_weights` is the weight update's, not a loader of this kind
    assert classify(log.replace("load_model_and_tokenizer", "load_weights")).cls is not FailureClass.MODEL_OR_DATA


def test_a_store_that_never_came_up_is_nccl_and_not_retried_before_progress():
    log = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 155, in _create_tcp_store\n'
        "    store = TCPStore(\n"
        "RuntimeError: frobnicated() timed out. Original timeout was 60000 ms.\n"
    )
    assert (classify(log).cls, classify(log).retriable) == (FailureClass.NCCL, False)
    assert classify(STEP + log).retriable is True


def test_a_collective_failing_while_ddp_wraps_the_model_is_start_up():
    log = (
        '[rank3]:   File "/usr/lib/python3/site-packages/torch/distributed/utils.py", line 281, in _verify_param_shape_across_processes\n'
        "[rank3]:     return dist._verify_params_across_processes(process_group, tensors, logger)\n"
        "[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3763, remote process exited or there was a "
        "network error, NCCL version 2.28.8\n"
    )
    found = classify(log)
    assert found.cls is FailureClass.NCCL and found.phase == "model_load" and found.retriable is False


OOM_PLENTY = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 7 has a total capacity of 79.11 GiB "
    "of which {free} is free. Including non-PyTorch memory, this process has 0 bytes memory in use.\n"
)


def test_an_oom_line_with_far_more_free_than_asked_is_no_shortage():
    assert classify(OOM_PLENTY.format(free="15.00 MiB")).cls is FailureClass.GPU_OOM  # a real shortage
    plenty = classify(OOM_PLENTY.format(free="66.43 GiB"))
    assert plenty.cls is FailureClass.UNKNOWN and plenty.retriable is False and "not a memory shortage" in plenty.hint
    asleep = "INFO 08-02 23:48:20 [executor_base.py:227] It took 0.06 seconds to wake up tags ['kv_cache'].\n"
    assert classify(asleep + OOM_PLENTY.format(free="66.43 GiB")).cls is FailureClass.VLLM  # vLLM's sleep allocator


def test_a_crash_after_a_logged_step_is_retried_before_any_step_it_is_not():
    fault = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert classify(fault).retriable is False
    assert classify(STEP + fault).retriable is True


def test_a_vllm_engine_dying_with_no_sign_of_start_up_is_retried():
    dead = "vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished unexpectedly.\n"
    assert (classify(dead).cls, classify(dead).retriable) == (FailureClass.VLLM, True)
    at_start = "INFO 05-06 14:20:15 [loader.py:1] Loading model weights took 3.1 GB\n" + dead
    assert classify(at_start).retriable is False


def test_an_exception_no_rule_names_during_the_weight_update_is_weight_sync():
    log = (
        'INFO:     10.0.0.2:42132 - "POST /init_communicator/ HTTP/1.1" 200 OK\n'
        "Traceback (most recent call last):\n"
        '  File "/opt/app/rollout.py", line 146, in worker\n'
        "    result = await method(*args, **kwargs)\n"
        "FrobnicationError: the frobnicator gave up\n"
    )
    found = classify(log)
    assert (found.cls, found.phase, found.retriable) == (FailureClass.WEIGHT_SYNC, "weight_sync", False)
    assert classify(log.replace("gave up", "timed out")).retriable is True  # a timeout during the update itself
