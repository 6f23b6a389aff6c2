"""`rlhf-launch fit CONFIG`: the layouts the launcher accepts on a cluster, fastest first."""

from __future__ import annotations

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
    as_json: bool = options.JSON,
) -> None:
    """Rank the layouts the launcher accepts on a cluster by estimated step time.

    Keeps everything in CONFIG but the layout (per-role GPUs, vLLM engines x TP, colocation,
    Adam offload), keeps only the layouts `plan` accepts on that cluster (OpenRLHF's start-up
    checks, the rules, memory, Ray PACK placement), and ranks them by the step-time estimate,
    ties to fewer GPUs.
    """
    from rlhf_launch.cli import report
    from rlhf_launch.core import presets
    from rlhf_launch.core.config import load_config
    from rlhf_launch.core.launch import prepare
    from rlhf_launch.core.placement import NodeFree
    from rlhf_launch.errors import UserError
    from rlhf_launch.fit import search

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
        live = [NodeFree(n.node_id, n.ip, n.gpus_free, n.cpus_free) for n in sorted(snap.nodes, key=lambda n: (not n.is_head, n.ip))]
        with_gpus = [n for n in snap.nodes if n.gpus > 0]
        if not with_gpus:
            raise UserError(f"the cluster at {cluster.address} has no alive node with GPUs", hint="rlhf-launch status")
        nodes = nodes or len(with_gpus)
        gpus_per_node = gpus_per_node or int(max(n.gpus for n in with_gpus))
    nodes = nodes or cfg.cluster.nodes
    gpus_per_node = gpus_per_node or cfg.cluster.gpus_per_node
    result = search(cfg, nodes, gpus_per_node, lambda launch: launch.estimate.step_s if launch.estimate else float("inf"), live=live)
    own = prepare(load_config(path, [*extra, f"cluster.nodes={nodes}", f"cluster.gpus_per_node={gpus_per_node}"]))  # yours, there
    if not result.layouts:
        reasons = ", ".join(f"{n} for {why}" for why, n in sorted(result.refused.items(), key=lambda kv: -kv[1]))
        raise UserError(
            f"no layout of {cfg.name} is accepted on {nodes} x {gpus_per_node} GPUs ({result.tried} tried: {reasons or 'none'})",
            hint="more nodes, a GPU with more memory (--gpu), or a smaller model",
        )
    best = result.layouts[0]
    if output_file:
        import yaml

        from rlhf_launch.core.config import apply_overrides, read_yaml

        data, _ = read_yaml(path)
        shape = [f"cluster.nodes={nodes}", f"cluster.gpus_per_node={gpus_per_node}", *extra, *best.layout.overrides()]
        header = f"# {cfg.name}: the layout `rlhf-launch fit` ranked first on {nodes} x {gpus_per_node} GPUs: {best.layout.describe()}\n"
        output.write_file(output_file, header + yaml.safe_dump(apply_overrides(data, shape), sort_keys=False), force=force, what="config")
    if as_json:
        output.echo_json(report.fit_json(result, own, nodes, gpus_per_node))
    else:
        output.echo(report.fit_text(result, own, nodes, gpus_per_node, top, live, output_file))
