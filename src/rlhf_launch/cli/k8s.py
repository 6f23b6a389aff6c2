"""`rlhf-launch k8s CONFIG`: the run as KubeRay manifests (bringup/k8s.py): a RayCluster, or with
`--rayjob` a RayJob that runs the launcher's own submit and supervision on its head."""

from __future__ import annotations

import typer

from rlhf_launch.cli import options, output


def command(
    config: str = options.CONFIG,
    overrides: list[str] | None = options.OVERRIDES,
    openrlhf_version: str | None = options.VERSION,
    out: str | None = options.OUTPUT,
    output_file: str | None = options.OUTPUT_FILE,
    force: bool = options.FORCE_WRITE,
    namespace: str | None = typer.Option(None, "--namespace", "-n", help="the manifests' namespace (default: kubectl's)"),
    image: str | None = typer.Option(None, "--image", help="the image of docker/ as the cluster pulls it (default: rlhf-launch:<release>)"),
    ray_version: str | None = typer.Option(None, "--ray-version", help="the image's Ray (default: the release's pin)"),
    pvc: str | None = typer.Option(
        None, "--pvc", help="ReadWriteMany PVC for the checkpoints, mounted on every pod at ckpt_path's directory"
    ),
    rayjob: bool = typer.Option(False, "--rayjob", help="a RayJob whose head runs `submit` and `watch`, not a bare RayCluster"),
    name: str | None = typer.Option(None, "--name", help="the RayCluster / RayJob name (default: the config's name)"),
    auto_resume: int = options.AUTO_RESUME,
    allow_fresh: bool = typer.Option(False, "--allow-fresh", help="with --rayjob: allow --auto-resume without checkpoints"),
    skip_check: str = options.SKIP_CHECK,
    secret: str | None = typer.Option(
        None, "--secret", help="a Secret with HF_TOKEN and WANDB_API_KEY: every pod's env takes them from it (no value in the manifest)"
    ),
    hf_cache: str | None = typer.Option(
        None, "--hf-cache", help="a ReadWriteMany PVC for the HF cache, shared by every pod (default: an emptyDir per pod)"
    ),
    volume: list[str] | None = typer.Option(
        None, "--volume", help="PATH=CLAIM: a path the config names from a PVC, not the node's own path (hostPath); repeat"
    ),
    cpus: int | None = typer.Option(None, "--cpus", min=1, help="CPUs per pod (default: 8 per GPU)"),
    rdma_resource: str | None = typer.Option(
        None,
        "--rdma-resource",
        help="RDMA resource per pod, NAME[=N] (with NCCL_IB_HCA in the config: rdma/rdma_shared_device_a); 'none': no RDMA",
    ),
) -> None:
    """Write KubeRay manifests for CONFIG: a head and a fixed-size GPU worker group sized from the plan,
    token auth, /dev/shm, the checkpoint PVC; with --rayjob, a RayJob that submits and supervises the run.
    """
    from pathlib import Path

    from rlhf_launch import doctor
    from rlhf_launch.bringup.k8s import K8sOptions, manifests
    from rlhf_launch.core import presets
    from rlhf_launch.core.config import read_text
    from rlhf_launch.core.launch import from_config

    doctor.parse_skip(skip_check)
    launch = from_config(config, overrides or [], openrlhf_version)
    if not launch.ok:
        output.show_launch(launch, as_json=False)  # the errors; exits 2
    path = presets.config_path(config)
    is_file = path == Path(config)  # else a preset: the image ships it
    if rayjob:
        from rlhf_launch.runs.submit import check_policy

        check_policy(launch, options.supervision(auto_resume, 10.0, 5.0, "", ""), allow_fresh=allow_fresh)
    opts = K8sOptions(
        config=path.name if is_file else config,
        overrides=tuple(overrides or ()),
        config_text=read_text(path) if is_file and rayjob else None,
        openrlhf_version=openrlhf_version,
        name=name,
        namespace=namespace,
        image=image,
        ray_version=ray_version,
        pvc=pvc,
        rayjob=rayjob,
        auto_resume=auto_resume,
        allow_fresh=allow_fresh,
        skip_check=skip_check,
        cpus=cpus,
        rdma_resource=rdma_resource,
        secret=secret,
        hf_cache=hf_cache,
        volumes=tuple(volume or ()),
    )
    done = manifests(launch, opts)
    out = out or output_file
    if out is not None:  # written before the notes: a refusal (the file exists) is all that is said
        output.write_file(out, done.text, force=force, what="manifest file")
    for note in done.notes:
        output.echo(f"note: {note}", err=True)
    if out is None:
        output.echo(done.text.rstrip("\n"))
        return
    what = "RayJob" if rayjob else "RayCluster"
    output.echo(f"wrote {out}: {what} {done.name}; kubectl apply -f {out}", err=True)
