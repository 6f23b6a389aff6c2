"""Issue 28, "One CLI" and "Messages": one meaning per option across verbs, one file writer,
exit 4 for the cluster, a JSON error object under --json, `logs --attempt`, `diagnose --log
DIR`, one message for a resume without checkpoint, a dry run that says so, the closest ids by
similarity, secrets redacted in every message, an unknown id named. Run in-process (fakes)."""

from __future__ import annotations

import json
import time

import pytest
from support.fakes import FakeCluster, FakeJobs, running_run

from rlhf_launch.cli.app import main, verb_command
from rlhf_launch.cluster.jobs import JobStatus
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Attempt, Run
from rlhf_launch.runs.status import AttemptStatus, RunStatus

UNREACHABLE = "http://127.0.0.1:9"  # nothing listens on port 9: refused at once


@pytest.fixture(autouse=True)
def no_cluster_env(monkeypatch):
    for name in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS", "WANDB_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def no_network(monkeypatch):
    from rlhf_launch.cluster.connection import Cluster

    def refuse(*args, **kwargs):
        raise AssertionError("a network call was made")

    monkeypatch.setattr(Cluster, "at", classmethod(refuse))


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def record(run_id: str, address: str = UNREACHABLE) -> Run:
    run = Run(
        run_id=run_id,
        name=run_id.split("-")[0],
        created=time.time(),
        address=address,
        openrlhf_version="0.11.2",
        config={},
        config_hash="0",
        config_source="x.yaml",
        overrides=[],
        argv=[],
        runtime_env={},
        ckpt_path="/ckpt",
        attempts=[Attempt(1, f"{run_id}-1", "submit", False, time.time() - 60, AttemptStatus.FAILED)],
        status=RunStatus.FAILED,
        gpus_required=16,
    )
    runs.save(run)
    return run


# ------------------------------------------------------------------ one meaning per option


def _params(verb: str) -> dict[str, object]:
    return {param.name: param for param in verb_command(verb).params}


@pytest.mark.parametrize("verb", ["import", "slurm", "k8s"])
def test_o_is_output_with_force_in_every_verb_that_writes_a_file(verb):
    params = _params(verb)
    out = next(p for p in params.values() if "-o" in p.opts)
    assert out.opts == ["--output", "-o"] or sorted(out.opts) == ["--output", "-o"]
    assert "--force" in params["force"].opts


@pytest.mark.parametrize("verb", ["logs", "watch", "submit", "resume"])
def test_f_is_follow_in_every_verb_that_follows(verb, capsys):
    follow = _params(verb)["follow"]
    assert "-f" in follow.opts and "--follow" in follow.opts
    assert cli(capsys, verb, "--help")[0] == 0
    assert not any("-f" in p.opts for p in _params("import").values())  # never --force


def test_auto_resume_has_one_default_in_every_verb():
    defaults = {verb: _params(verb)["auto_resume"].default for verb in ("submit", "slurm", "k8s")}
    assert defaults == {"submit": 0, "slurm": 0, "k8s": 0}


@pytest.mark.parametrize(
    "verb, args",
    [
        ("slurm", ["tiny-1node"]),
        ("k8s", ["llama70b-2node-hybrid", "--pvc", "ckpt"]),
    ],
)
def test_slurm_and_k8s_refuse_to_overwrite_without_force(verb, args, tmp_path, capsys):
    target = tmp_path / "out.txt"
    target.write_text("mine\n")
    code, out, err = cli(capsys, verb, *args, "--output", str(target))
    assert code == 2 and target.read_text() == "mine\n"
    assert f"{target} already exists" in err and "--force" in err
    code, _, err = cli(capsys, verb, *args, "-o", str(target), "--force")
    assert code == 0, err
    assert target.read_text() != "mine\n"
    code, _, err = cli(capsys, verb, *args, "--output-file", str(tmp_path / "old-name.txt"))  # the old name still works
    assert code == 0 and (tmp_path / "old-name.txt").is_file()


def test_init_refuses_to_overwrite_without_force_too(tmp_path, capsys):
    target = tmp_path / "mine.yaml"
    target.write_text("mine\n")
    code, _, err = cli(capsys, "init", "tiny-1node", str(target))
    assert code == 2 and target.read_text() == "mine\n" and "--force" in err
    code, _, err = cli(capsys, "init", "tiny-1node", str(target), "--force")
    assert code == 0, err
    assert "name: tiny-1node" in target.read_text()


def test_the_slurm_script_keeps_its_mode_when_written_by_the_one_writer(tmp_path, capsys):
    target = tmp_path / "run.sbatch"
    assert cli(capsys, "slurm", "tiny-1node", "-o", str(target))[0] == 0
    assert target.stat().st_mode & 0o777 == 0o755


# ------------------------------------------------------------------ exit codes


def test_an_unreachable_cluster_exits_4_not_2(capsys):
    code, _, err = cli(capsys, "status", "--address", UNREACHABLE)
    assert code == 4
    assert "cannot reach the Ray dashboard" in err


def test_a_config_error_still_exits_2(capsys):
    code, out, _ = cli(capsys, "plan", "tiny-1node", "train.train_batch_size=7")
    assert code == 2 and "error" in out


def test_help_documents_every_exit_code(capsys):
    for args in (["--help"], ["submit", "--help"]):
        code, out, _ = cli(capsys, *args)
        assert code == 0
        text = " ".join(out.split())
        assert "4 the cluster is unreachable, timed out or refused" in text and "130 Ctrl-C" in text
    code, out, _ = cli(capsys, "--help")
    assert "-f is always --follow" in " ".join(out.split())


# ------------------------------------------------------------------ --json: an error object


@pytest.mark.parametrize(
    "args, code",
    [
        (["plan", "missing.yaml", "--json"], 2),
        (["submit", "missing.yaml", "--dry-run", "--json"], 2),
        (["diagnose", "--log", "/no/such/log", "--json"], 2),
        (["stop", "nope", "--json"], 2),
        (["resume", "nope", "--json"], 2),
        (["status", "--address", UNREACHABLE, "--json"], 4),
        (["submit", "tiny-1node", "--auto-resume", "many", "--json"], 2),  # a usage error
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_json_errors_print_a_json_error_object(args, code, home, capsys):
    record("tiny-20250501-120000-abc123")
    got, out, err = cli(capsys, *args)
    assert got == code
    error = json.loads(out)["error"]
    assert error["exit_code"] == code and error["message"] and "hint" in error and error["type"]
    assert "error" in err.lower()  # the person at the terminal still reads it


# ------------------------------------------------------------------ diagnose --log DIR


def test_diagnose_log_of_a_directory_reads_its_one_driver_log(tmp_path, capsys):
    (tmp_path / "raylet.out").write_text("nothing\n")
    (tmp_path / "job-driver-raysubmit_abc.log").write_text(
        "Traceback (most recent call last):\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    code, out, err = cli(capsys, "diagnose", "--log", str(tmp_path), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["log"].endswith("job-driver-raysubmit_abc.log") and data["class"] == "gpu_oom"


def test_diagnose_log_of_a_directory_without_one_driver_log_says_it_is_a_directory(tmp_path, capsys):
    code, _, err = cli(capsys, "diagnose", "--log", str(tmp_path))
    assert code == 2
    assert f"--log {tmp_path} is a directory" in err and "not found" not in err
    assert "job-driver-" in err and "driver log file" in err
    for name in ("job-driver-a.log", "job-driver-b.log"):
        (tmp_path / name).write_text("x\n")
    code, _, err = cli(capsys, "diagnose", "--log", str(tmp_path))
    assert code == 2 and "holds 2 driver logs (job-driver-a.log, job-driver-b.log)" in err


# ------------------------------------------------------------------ resume without checkpoint


def test_resume_without_a_checkpoint_says_one_thing(home, capsys, monkeypatch):
    from rlhf_launch.cli import options
    from rlhf_launch.runs import checkpoints, resume

    run = record("tiny-20250501-120000-abc123")
    jobs = FakeJobs()
    monkeypatch.setattr(options, "cluster", lambda *a, **k: FakeCluster(jobs))

    def refused(record, overrides, cluster, *, force, allow_fresh, **kwargs):  # what resume() returns at the checkpoint check
        state = checkpoints.CheckpointState("/ckpt", exists=False)
        return resume.Resumed(record, None, state, checkpoints.resume_findings(state, allow_fresh))

    monkeypatch.setattr(resume, "resume", refused)
    code, out, err = cli(capsys, "resume", run.run_id)
    assert code == 2
    assert "fresh start" not in out + err
    assert "checkpoint /ckpt: none yet" in out and "--allow-fresh" in out and "not resumed" in out


# ------------------------------------------------------------------ submit --dry-run


def test_a_dry_run_says_nothing_was_submitted(capsys):
    code, out, err = cli(capsys, "submit", "tiny-1node", "--dry-run")
    assert code == 0
    assert "nothing was submitted" in err
    code, out, err = cli(capsys, "submit", "tiny-1node", "--dry-run", "--json")
    assert code == 0 and json.loads(out)["submitted"] is False


# ------------------------------------------------------------------ logs --attempt


def test_logs_attempt_prints_that_attempts_log(home, capsys, monkeypatch):
    from rlhf_launch.cluster.connection import Cluster
    from rlhf_launch.runs import lifecycle

    jobs = FakeJobs()
    run = running_run(jobs, auto_resume=0)
    first = run.current.job_id
    jobs.set(first, JobStatus.FAILED, log="the first attempt's log\n")
    second = lifecycle.submit_attempt(jobs, run.run_id, "resume", entrypoint="python -m x", runtime_env={}, load_checkpoint=True)
    jobs.set(second.job_id, JobStatus.RUNNING, log="the second attempt's log\n")
    monkeypatch.setattr(Cluster, "at", classmethod(lambda cls, *a, **k: FakeCluster(jobs)))

    code, out, err = cli(capsys, "logs", run.run_id)
    assert code == 0 and "the second attempt's log" in out
    code, out, err = cli(capsys, "logs", run.run_id, "--attempt", "1")
    assert code == 0, err
    assert "the first attempt's log" in out and "second" not in out
    code, out, err = cli(capsys, "logs", run.run_id, "--attempt", "3")
    assert code == 2 and f"run {run.run_id} has no attempt 3" in err and "its attempts: 1, 2" in err


# ------------------------------------------------------------------ closest ids


def test_the_closest_ids_are_the_similar_ones_not_the_first(home, capsys, no_network):
    for run_id in ("aaa-20250501-090000-111111", "aab-20250501-090000-222222", "aac-20250501-090000-333333"):
        record(run_id)
    record("tiny-20250501-120000-abc123")
    code, _, err = cli(capsys, "logs", "tiny-20250501-120000-abc124")
    assert code == 2
    assert "the closest: tiny-20250501-120000-abc123" in err
    assert "aaa-" not in err and "aab-" not in err


def test_closest_by_the_id_s_end_too():
    from rlhf_launch.runs.lookup import closest

    ids = ["a-20250501-090000-111111", "b-20250501-090000-9f8e7d", "c-20250501-090000-333333"]
    assert closest("9f8e7e", ids) == ["b-20250501-090000-9f8e7d"]
    assert closest("zzzz", ids) == []


# ------------------------------------------------------------------ secrets in messages


def test_a_secret_given_as_an_override_is_redacted_in_the_refusal(capsys):
    code, out, err = cli(capsys, "plan", "tiny-1node", "runtime_env.env_vars.WANDB_API_KEY=abc123", "--json")
    assert code == 2
    assert "abc123" not in out + err
    assert "WANDB_API_KEY=<redacted>" in err
    assert "<redacted>" in json.loads(out)["error"]["message"]


# ------------------------------------------------------------------ an unknown id is named


@pytest.mark.parametrize("verb", ["logs", "stop"])
def test_an_unknown_id_with_no_records_and_no_cluster_is_named(verb, home, capsys):
    code, _, err = cli(capsys, verb, "nosuch-run", "--address", UNREACHABLE)
    assert code == 4  # the cluster could not be asked: try again when it is up
    assert "no run 'nosuch-run' on this machine" in err
    assert f"the cluster at {UNREACHABLE} could not be asked" in err
