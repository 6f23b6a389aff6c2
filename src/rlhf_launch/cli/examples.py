"""Two or three example lines per verb, shown at the end of its `--help` (as `ray job` and
torchtune do). Data only: cli/app.py turns a verb's rows into its epilog, and a test parses
every line against that verb's real command, so an example cannot name an option that
does not exist. Configs are shipped presets (rlhf-launch presets) or files in configs/;
run ids are prefixes of ids as `submit` makes them (<name>-<date>-<time>-<hex>)."""

from __future__ import annotations

# verb -> [(command line, what it does)], in the order `--help` shows them.
EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "plan": [
        ("rlhf-launch plan tiny-1node", "the layout, findings and trainer command of a shipped preset"),
        ("rlhf-launch plan configs/llama70b-4node.yaml --openrlhf-version 0.10.2", "the same for an older release's flags"),
        ("rlhf-launch plan llama70b-8node --cluster --address http://head:8265", "also check the live cluster has room"),
    ],
    "fit": [
        ("rlhf-launch fit llama70b-4node", "the fastest layouts of a preset on its own 4 x 8 GPUs"),
        ("rlhf-launch fit llama70b-4node --nodes 8 --gpu H100-80GB --top 10", "on 8 nodes of H100s, the ten best"),
        ("rlhf-launch fit qwen2.5-7b-grpo --address http://head:8265 -o fit.yaml", "on the live cluster; write the best"),
    ],
    "submit": [
        ("rlhf-launch submit tiny-1node --dry-run", "what would be submitted, without contacting a cluster"),
        ("rlhf-launch submit llama70b-4node --auto-resume 3 --follow", "submit, resume on failure up to 3 times, stream the logs"),
        ("rlhf-launch submit configs/qwen2.5-7b-grpo.yaml checkpoint.ckpt_path=/mnt/grpo", "a config file, with an override"),
    ],
    "resume": [
        ("rlhf-launch resume", "resubmit the latest run from its latest checkpoint"),
        ("rlhf-launch resume llama70b-4node-2026 --follow", "a run by id prefix, streaming the new attempt's logs"),
    ],
    "logs": [
        ("rlhf-launch logs", "the logs of the latest run's current attempt"),
        ("rlhf-launch logs llama70b-4node-2026 --follow", "stream them (Ctrl-C stops following, not the job)"),
    ],
    "stop": [
        ("rlhf-launch stop", "stop the latest run; returns when its GPUs are free"),
        ("rlhf-launch stop llama70b-4node-2026 --timeout 120 --json", "a run by id prefix, waiting up to 120 s"),
    ],
    "runs": [
        ("rlhf-launch runs", "every run, with status, attempt and progress"),
        ("rlhf-launch runs --address http://head:8265 --json", "the same with another cluster's runs, as JSON"),
        ("rlhf-launch runs llama70b-4node-2026 --print-status", "one run's status word (SUCCEEDED, STOPPED, ...), for scripts"),
    ],
    "doctor": [
        ("rlhf-launch doctor llama70b-4node", "is every node ready for this run?"),
        ("rlhf-launch doctor llama70b-4node --address http://head:8265 --deep", "also import each package on every node"),
        ("rlhf-launch doctor configs/tiny-1node.yaml --skip-check gpu --json", "skip one check, print JSON"),
    ],
    "checkpoints": [
        ("rlhf-launch checkpoints", "the latest run's checkpoints, as every node sees them"),
        ("rlhf-launch checkpoints --ckpt-path /mnt/shared/ckpt --local", "a checkpoint directory, read on this machine"),
    ],
    "diagnose": [
        ("rlhf-launch diagnose", "why the latest run's last attempt failed or stalled"),
        ("rlhf-launch diagnose llama70b-4node-2026 --attempt 1", "an earlier attempt of a run"),
        ("rlhf-launch diagnose --log driver.log --json", "a driver log file, without a run"),
    ],
    "watch": [
        ("rlhf-launch watch", "follow the latest run's supervisor (start one if needed)"),
        ("rlhf-launch watch llama70b-4node-2026 --address http://head:8265", "a run on another cluster"),
    ],
    "supervise": [
        ("rlhf-launch supervise llama70b-4node-2026", "the supervisor loop in the foreground"),
        ("rlhf-launch supervise llama70b-4node-2026 --address http://head:8265", "against a given dashboard"),
    ],
    "up": [
        ("rlhf-launch up --head", "start the Ray head here, token auth on"),
        ("rlhf-launch up --head --num-gpus 8 --ib-hca mlx5_0 --socket-ifname ib0", "with NCCL's InfiniBand settings"),
        ("rlhf-launch up --head --block", "stay in the foreground (a container's command)"),
    ],
    "join": [
        ("rlhf-launch join 10.0.0.1", "join this node to the head at 10.0.0.1"),
        ("rlhf-launch join 10.0.0.1 --token-file /mnt/shared/auth_token --num-gpus 8", "with the head's token file"),
    ],
    "down": [
        ("rlhf-launch down", "stop every Ray process on this machine (as `ray stop`)"),
        ("rlhf-launch down --force", "the same with SIGKILL"),
    ],
    "slurm": [
        ("rlhf-launch slurm llama70b-4node -p gpu -t 2-00:00:00 -o run.sbatch", "write an sbatch script for a partition"),
        ("rlhf-launch slurm llama70b-4node --requeue --submit", "write it and sbatch it; a requeue resumes the run"),
        ("rlhf-launch slurm llama70b-4node --mem plan -o run.sbatch", "ask for the plan's memory per node, not the whole node"),
    ],
    "k8s": [
        ("rlhf-launch k8s llama70b-4node --pvc ckpt -o ray.yaml", "a RayCluster with the checkpoint PVC mounted"),
        ("rlhf-launch k8s llama70b-4node --rayjob --pvc ckpt | kubectl apply -f -", "a RayJob, applied at once"),
        ("rlhf-launch k8s llama70b-4node --pvc ckpt --secret rlhf-keys --hf-cache hf", "tokens from a Secret, a shared HF cache"),
    ],
    "status": [
        ("rlhf-launch status", "alive nodes, GPUs, Ray versions and running jobs"),
        ("rlhf-launch status --wait-nodes 4 --wait-gpus 32 --timeout 600", "first wait until 4 nodes and 32 GPUs are up"),
    ],
    "presets": [
        ("rlhf-launch presets", "the shipped presets, one line each"),
        ("rlhf-launch presets --json", "the same as JSON"),
    ],
    "init": [
        ("rlhf-launch init llama70b-4node", "copy a preset to ./llama70b-4node.yaml to edit"),
        ("rlhf-launch init qwen2.5-7b-grpo my-grpo.yaml", "copy it to a path of your choice"),
    ],
    "import": [
        ("rlhf-launch import train_ppo_ray.sh -o my.yaml", "turn a script that runs the trainer into a config"),
        ("rlhf-launch import train_ppo_ray.sh --var MODEL=/models/llama -o my.yaml", "with a variable it reads"),
    ],
    "versions": [
        ("rlhf-launch versions", "the OpenRLHF releases whose flags are known"),
        ("rlhf-launch versions --json", "the same as JSON"),
    ],
}


def epilog(verb: str) -> str | None:
    """The verb's examples as its help epilog: click keeps a paragraph whose first line is
    `\\b` as written (no rewrapping), so each example stays one line under its comment."""
    rows = EXAMPLES.get(verb)
    if not rows:
        return None
    lines = ["\b", "Examples:"]
    for line, what in rows:
        lines += [f"  # {what}", f"  {line}"]
    return "\n".join(lines)
