"""`rlhf-launch fit CONFIG`: the layouts the launcher accepts on a cluster, fastest first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import typer

from rlhf_launch.cli import options, output


def command(
    config: str = options.CONFIG,
    overrides: list[str] | None = options.OVERRIDES,
    nodes: int | None = typer.Option(None, "--nodes", min=1, help="nodes of the cluster (default: the config's cluster.nodes)"),
    gpus_per_node: int | None = typer.Option(None, "--gpus-per-node", min=1, help="GPUs per node (default: the config's)"),
    gpu: str | None = typer.Option(None, "--gpu", help="GPU type (sets cluster.gpu), e.g. H100-80GB"),
    top: int = typer.Option(5, "--top", min=1, help="how many layouts to show"),
    output_file: str | None = options.OUTPUT,
    force: bool = options.FORCE_WRITE,
    openrlhf_version: str | None = options.VERSION,
    address: str | None = typer.Option(None, "--address", help="fit the live cluster's alive nodes and free GPUs (dashboard URL)"),
    token_file: str | None = options.TOKEN_FILE,
    from_run: str | None = typer.Option(
        None, "--from", metavar="RUN", help="rank with the constants RUN measured (its trainer's timing/*: decode rate, MFUs)"
    ),
    as_json: bool = options.JSON,
) -> None:
    """Rank the layouts the launcher accepts on a cluster by estimated step time.

    Keeps everything in CONFIG but the layout (per-role GPUs, vLLM engines x TP, colocation,
    Adam offload), keeps only the layouts `plan` accepts on that cluster (OpenRLHF's start-up
    checks, the rules, memory, Ray PACK placement), and ranks them by the step-time estimate,
    ties to fewer GPUs. With --from RUN, the estimate's decode rate and MFUs are the ones that
    run measured (its phases against its own plan's estimate), so a project's second run is
    planned on its first one's facts.
    """
    from rlhf_launch.cli import report
    from rlhf_launch.core import presets
    from rlhf_launch.core.config import load_config
    from rlhf_launch.core.launch import prepare
    from rlhf_launch.core.placement import NodeFree
    from rlhf_launch.errors import UserError
    from rlhf_launch.fit import search, step_time

    extra = [*(overrides or []), *([f"cluster.gpu={gpu}"] if gpu else [])]
    if openrlhf_version:
        extra.append(f"openrlhf.version={openrlhf_version}")
    path = presets.config_path(config)
    cfg = load_config(path, extra)
    live: list[NodeFree] | None = None
    if address is not None:
        from rlhf_launch.cluster import snapshot

        cluster = options.cluster(address, token_file, configured=cfg.cluster.address)
        snap = snapshot.read(cluster.dashboard, memory=False)
        live = snap.free_nodes()
        with_gpus = [n for n in snap.nodes if n.gpus > 0]
        if not with_gpus:
            raise UserError(f"the cluster at {cluster.address} has no alive node with GPUs", hint="rlhf-launch status")
        nodes = nodes or len(with_gpus)
        gpus_per_node = gpus_per_node or int(max(n.gpus for n in with_gpus))
    nodes = nodes or cfg.cluster.nodes
    gpus_per_node = gpus_per_node or cfg.cluster.gpus_per_node
    calibration = calibrated(from_run) if from_run else None
    if calibration is None:
        result = search(cfg, nodes, gpus_per_node, step_time, live=live)
    else:
        result = search(cfg, nodes, gpus_per_node, lambda launch: step_s(calibration.restimate(launch)), live=live)
    own = prepare(load_config(path, [*extra, f"cluster.nodes={nodes}", f"cluster.gpus_per_node={gpus_per_node}"]))  # yours, there
    if calibration is not None:  # the table shows the calibrated estimate of each layout
        import dataclasses

        result.layouts = [dataclasses.replace(f, launch=calibration.relaunch(f.launch)) for f in result.layouts]
        own = calibration.relaunch(own)
    if not result.layouts:
        reasons = ", ".join(f"{n} for {why}" for why, n in sorted(result.refused.items(), key=lambda kv: -kv[1]))
        raise UserError(
            f"no layout of {cfg.name} is accepted on {nodes} x {gpus_per_node} GPUs ({result.tried} tried: {reasons or 'none'})",
            hint="more nodes, a GPU with more memory (--gpu), or a smaller model",
        )
    best = result.layouts[0]
    if output_file:
        import yaml

        from rlhf_launch.core.config import apply_overrides, beside, read_yaml

        data, _ = read_yaml(path)
        beside(data, path)  # the config's own relative files (a reward function) stay found from anywhere
        shape = [f"cluster.nodes={nodes}", f"cluster.gpus_per_node={gpus_per_node}", *extra, *best.layout.overrides()]
        header = f"# {cfg.name}: the layout `rlhf-launch fit` ranked first on {nodes} x {gpus_per_node} GPUs: {best.layout.describe()}\n"
        output.write_file(output_file, header + yaml.safe_dump(apply_overrides(data, shape), sort_keys=False), force=force, what="config")
    if as_json:
        output.echo_json(report.fit_json(result, own, nodes, gpus_per_node, calibration.as_json() if calibration else None))
    else:
        output.echo(report.fit_text(result, own, nodes, gpus_per_node, top, live, output_file, calibration.text() if calibration else None))


def step_s(estimate: Any) -> float:
    return estimate.step_s if estimate is not None else float("inf")


@dataclass(frozen=True)
class Calibration:
    """The constants a recorded run measured (core/calibrate.py from_measured) and what they
    rest on: the run, its measured phases and its own plan's estimate of them."""

    run_id: str
    constants: Any  # core.estimate.Constants
    measured: dict[str, float]
    estimated: dict[str, float]
    steps: int | None
    gpu: str

    def restimate(self, launch: Any) -> Any:
        from rlhf_launch.core.estimate import estimate_step

        return estimate_step(launch.cfg, launch.plan, settings=launch.settings, constants=self.constants, version=launch.flags.version)

    def relaunch(self, launch: Any) -> Any:
        import dataclasses

        return dataclasses.replace(launch, estimate=self.restimate(launch))

    def as_json(self) -> dict[str, Any]:
        c = self.constants
        return {
            "run": self.run_id,
            "gpu": self.gpu,
            "steps_measured": self.steps,
            "measured_s": self.measured,
            "estimated_s": {k: round(v, 1) for k, v in self.estimated.items()},
            "constants": {
                "decode_efficiency": round(c.decode_efficiency, 4),
                "decode_step_s": round(c.decode_step_s, 6),
                "prefill_mfu": round(c.prefill_mfu, 4),
                "forward_mfu": round(c.forward_mfu, 4),
                "train_mfu": round(c.train_mfu, 4),
            },
        }

    def text(self) -> str:
        c = self.constants
        ratios = ", ".join(
            f"{p} {self.measured[p]:,.0f}/{self.estimated[p]:,.0f} s"
            for p in ("generate", "make_experience", "train")
            if p in self.measured
        )
        beyond = c.decode_efficiency > 1 or c.forward_mfu > 1 or c.train_mfu > 1
        return (
            f"calibrated on {self.run_id}'s measured phases ({self.gpu}, median of {self.steps or '?'} steps; "
            f"measured/estimated {ratios}): decode at {c.decode_efficiency:.0%} of HBM bandwidth, forward MFU {c.forward_mfu:.0%}, "
            f"training MFU {c.train_mfu:.0%}"
            + (
                " (over 100%: that run's sequences were shorter than the estimate assumes; the figures are effective rates, "
                "and carry to other layouts of the same data)"
                if beyond
                else ""
            )
        )


def calibrated(run_ref: str) -> Calibration:
    """The constants the run `run_ref` measured: its recorded timing/* medians against its own
    layout's estimate (rebuilt from its record with today's constants)."""
    from rlhf_launch.core.calibrate import from_measured
    from rlhf_launch.core.config import validate
    from rlhf_launch.core.estimate import DEFAULT
    from rlhf_launch.core.launch import prepare
    from rlhf_launch.errors import UserError
    from rlhf_launch.runs import record as runs

    run = runs.find(run_ref)
    seen = (run.progress or {}).get("measured") or {}
    measured = {k: float(v) for k, v in (seen.get("phases_s") or {}).items() if isinstance(v, (int, float))}
    if not measured:
        step = (run.progress or {}).get("step")
        why = (
            "it has reached no step yet"
            if step is None
            else f"its trainer (OpenRLHF {run.openrlhf_version}) printed no timing/* in its step lines (they start at 0.9.6)"
        )
        raise UserError(
            f"run {run.run_id} has no measured phases to calibrate on: {why}",
            hint="fit --from needs a run of OpenRLHF 0.9.6 or later that made a step (rlhf-launch runs shows its steps)",
        )
    launch = prepare(validate(run.config, source=f"run {run.run_id}"), version=run.openrlhf_version)
    base = launch.estimate
    if base is None:
        raise UserError(
            f"run {run.run_id}: its actor's size is unknown, so its phases cannot be compared with an estimate",
            hint="set models.params_billion (or the shape keys) in that run's config",
        )

    def again(constants: Any) -> Any:
        from rlhf_launch.core.estimate import estimate_step

        return estimate_step(launch.cfg, launch.plan, settings=launch.settings, constants=constants, version=launch.flags.version)

    constants = from_measured(DEFAULT, base, measured, source=run.run_id, reestimate=again)
    return Calibration(run.run_id, constants, measured, dict(base.phases_s), seen.get("steps"), base.gpu)
