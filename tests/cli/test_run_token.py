"""The token given at `submit --token-file` is remembered with the run (its path, never the
token): `logs`, `stop`, `diagnose`, `watch`, `resume` of that run find it without being told
again, unless they are given a token themselves or the environment names one."""

from __future__ import annotations

from pathlib import Path

from test_ctrl_c import healthy_run

from rlhf_launch.cli import options


def test_a_run_uses_the_token_file_it_was_submitted_with(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    token = tmp_path / "token"
    token.write_text("abc123\n")
    run = healthy_run()
    assert options.run_token(run, None) is None  # nothing remembered: Ray's default place
    run.token_file = str(token)
    assert options.run_token(run, None) == str(token)
    # the token reaches the cluster client
    record, cluster = run, options.cluster(None, options.run_token(run, None), configured=run.address)
    assert cluster.token is not None and cluster.token.value == "abc123"
    # a token given now wins; so does one the environment names
    assert options.run_token(record, "/other/token") == "/other/token"
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "env-token"))
    assert options.run_token(record, None) is None
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH")
    # a remembered file that is gone is not an error of its own: Ray's default place is tried
    token.unlink()
    assert options.run_token(record, None) is None


def test_runs_asks_each_cluster_with_the_token_its_runs_were_submitted_with(tmp_path: Path, monkeypatch):
    from rlhf_launch.runs import overview

    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    token = tmp_path / "token"
    token.write_text("abc123\n")
    run = healthy_run()
    run.token_file = str(token)
    found = overview._token_for(run.address, [run], None)
    assert found is not None and found.value == "abc123"
    other = overview._token_for("http://10.9.9.9:8265", [run], None)  # another cluster: not this run's token
    assert other is None or other.value != "abc123"
    given = tmp_path / "given"
    given.write_text("given\n")
    assert overview._token_for(run.address, [run], str(given)).value == "given"  # --token-file wins


def test_a_remembered_token_file_emptied_since_falls_back_to_rays_default(tmp_path: Path, monkeypatch):
    from rlhf_launch.runs import overview

    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    token = tmp_path / "token"
    token.write_text("")
    run = healthy_run()
    run.token_file = str(token)
    assert options.run_token(run, None) is None  # no "token file ... is missing or empty" for a file the user did not pass
    found = overview._token_for(run.address, [run], None)  # nor does `runs` fail on it
    assert found is None or found.path != token
