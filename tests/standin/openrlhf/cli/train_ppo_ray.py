"""Stand-in for `python3 -m openrlhf.cli.train_ppo_ray` on a cluster without GPUs.

- parses argv with the real flag set of the release in STANDIN_OPENRLHF_VERSION, exactly as
  the trainer's argparse would (unknown flag: usage and exit 2);
- reserves the placement groups the real trainer reserves, in its order (and fails instead
  of hanging if they do not come up within STANDIN_PLACEMENT_TIMEOUT);
- fails, as the real trainer does when its actors die with a node, when a node it holds
  GPUs on is lost (with STANDIN_WATCH_NODES=1 it keeps one tiny actor per node, as the
  trainer keeps its model actors, and notices in seconds);
- "trains" STANDIN_STEPS steps of STANDIN_STEP_SECONDS, writing OpenRLHF's checkpoint layout
  every --save_steps; with the load flag it continues from `_actor/latest`;
- records the actor's and critic's DP size in each checkpoint and, as DeepSpeed's ZeRO loader
  does, refuses one saved at another DP size ("The checkpoint being loaded used a DP world
  size of X but the current world size is Y ...") unless the universal-load flag is given, in
  which case it loads the tag `latest_universal` names (and fails, as DeepSpeed does, without
  that file); tests/standin/deepspeed/checkpoint/ds_to_universal.py writes such tags;
- crashes at step STANDIN_CRASH_AT_STEP, STANDIN_CRASH_TIMES times over the run (counted in
  a file under ckpt_path), to test resumes (a list `3,5,7`: the n-th crash at the n-th step), printing what a real failure of class
  STANDIN_CRASH_CLASS prints (the first excerpt of that class in tests/data/diagnose/corpus.yaml;
  default nccl, a collective timeout);
- hangs forever where STANDIN_HANG says: `before_placement`, `after_placement`, or
  `after_step:N`, as a trainer does on a dead vLLM actor or a placement that never comes;
- prints OpenRLHF-style progress: the args Namespace, a model actor's first line once the
  groups are placed, an `Episode [...]` bar and a `✨ Global step N: {...}` line per step
  (through OpenRLHF's logger; from 0.9.6 with the trainer's `timing/*` keys, as ppo_trainer.py
  prints them: the step's sleep split 40 % generation, 20 % make_experience, 35 % ppo_train,
  5 % broadcast, and their sum as step_total).
Each attempt appends what it saw to <ckpt_path>/.standin.jsonl.
"""

import json
import os
import sys
import time

from rlhf_launch.openrlhf.flagset import load, version_key

fs = load(os.environ.get("STANDIN_OPENRLHF_VERSION", "0.11.2"))
args = fs.parser(as_trainer=True).parse_args()


def arg(dotted, flat):
    return getattr(args, dotted if fs.dotted else flat)


import ray  # noqa: E402
from ray.util.placement_group import placement_group  # noqa: E402

ckpt = arg("ckpt.path", "ckpt_path")
save_steps = arg("ckpt.save_steps", "save_steps")
max_num = arg("ckpt.max_num", "max_ckpt_num")
save_hf = arg("ckpt.save_hf", "save_hf_ckpt")
load_flag = arg("ckpt.load_enable", "load_checkpoint")
kl = arg("algo.kl.init_coef", "init_kl_coef")
critic_on = arg("algo.advantage.estimator", "advantage_estimator") == "gae"
remote_reward = arg("reward.remote_url", "remote_rm_url")
colocate_all = arg("train.colocate_all", "colocate_all_models")
colocate_ar = arg("train.colocate_actor_ref", "colocate_actor_ref")
colocate_cr = arg("train.colocate_critic_reward", "colocate_critic_reward")
engines = arg("vllm.num_engines", "vllm_num_engines") or 0
tp = arg("vllm.tensor_parallel_size", "vllm_tensor_parallel_size")
async_train = arg("train.async_enable", "async_train")
universal = arg("ds.use_universal_ckpt", "use_ds_universal_ckpt")
steps = int(os.environ.get("STANDIN_STEPS", "6"))
crash_class = os.environ.get("STANDIN_CRASH_CLASS", "nccl")
hang = os.environ.get("STANDIN_HANG", "")
rollout_batch = arg("rollout.batch_size", "rollout_batch_size")
new_era = version_key(fs.version) >= version_key("0.9.1")  # the episode bar counts prompts, not batches
step_seconds = float(os.environ.get("STANDIN_STEP_SECONDS", "0.5"))
crash_steps = [int(s) for s in os.environ.get("STANDIN_CRASH_AT_STEP", "0").split(",")]
crash_times = int(os.environ.get("STANDIN_CRASH_TIMES", "1"))
placement_timeout = float(os.environ.get("STANDIN_PLACEMENT_TIMEOUT", "60"))


def size(role):
    return arg(f"{role}.num_nodes", f"{role}_num_nodes") * arg(f"{role}.num_gpus_per_node", f"{role}_num_gpus_per_node")


# As the real train() does (every release): Ray refuses to merge this with a job runtime_env
# that sets the same variables, unless RAY_OVERRIDE_JOB_RUNTIME_ENV=1.
ray.init(
    runtime_env={
        "env_vars": {
            "TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM", "true"),
            "NCCL_DEBUG": os.environ.get("NCCL_DEBUG", "WARN"),
        }
    }
)
groups = []
if fs.dotted:
    print(f"Namespace(rollout=namespace(batch_size={rollout_batch}, n_samples_per_prompt=1), actor=namespace(num_nodes=1))", flush=True)
else:
    print(f"Namespace(rollout_batch_size={rollout_batch}, n_samples_per_prompt=1)", flush=True)


def hang_here(where):
    if hang == where:
        print(f"(stand-in hangs {where})", flush=True)
        while True:
            time.sleep(60)


hang_here("before_placement")


def reserve(n):
    pg = placement_group([{"GPU": 1, "CPU": 1}] * n, strategy="PACK")
    if not pg.wait(placement_timeout):
        print(f"placement group of {n} GPUs not ready in {placement_timeout}s", flush=True)
        sys.exit(3)
    groups.append(pg)
    return pg


shared = reserve(size("actor")) if (colocate_ar or colocate_all) else None
if engines > 0 and not (colocate_all and not async_train):
    reserve(engines * tp)
if shared is None:
    reserve(size("actor"))
if kl > 0 and shared is None:
    reserve(size("ref"))
pair = reserve(size("critic")) if (critic_on and colocate_cr) else (shared if colocate_all else None)
if critic_on and pair is None:
    reserve(size("critic"))
if not remote_reward and pair is None:
    reserve(size("reward"))
gpus = sum(len(ray.util.placement_group_table(pg)["bundles_to_node_id"]) for pg in groups)
per_group = []
for pg in groups:
    counts = {}
    for node in ray.util.placement_group_table(pg)["bundles_to_node_id"].values():
        counts[node] = counts.get(node, 0) + 1
    per_group.append(sorted(counts.values(), reverse=True))
print(f"reserved {len(groups)} placement groups, {gpus} GPUs", flush=True)
print(f"(PolicyModelActor pid={os.getpid()}) set_seed and load the model ({gpus} GPUs placed)", flush=True)
hang_here("after_placement")


seen_nodes = {node for pg in groups for node in ray.util.placement_group_table(pg)["bundles_to_node_id"].values()}


def lost_nodes():
    alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
    return seen_nodes - alive


@ray.remote(num_cpus=0)
class Holder:
    def ping(self):
        return os.getpid()


holders = []
if os.environ.get("STANDIN_WATCH_NODES") == "1":
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    placed = set()
    for pg in groups:
        for index, node in ray.util.placement_group_table(pg)["bundles_to_node_id"].items():
            if node not in placed:
                placed.add(node)
                strategy = PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=int(index))
                holders.append(Holder.options(scheduling_strategy=strategy).remote())
    ray.get([h.ping.remote() for h in holders], timeout=120)


def holders_lost():
    try:
        ray.get([h.ping.remote() for h in holders], timeout=30)
        return False
    except Exception:
        return True


start = 0
actor_dir = os.path.join(ckpt, "_actor")
if load_flag and os.path.isdir(actor_dir):
    latest_file = os.path.join(actor_dir, "latest")
    if not os.path.isfile(latest_file):
        raise RuntimeError(f"{actor_dir} has no latest file")  # DeepSpeed finds nothing; OpenRLHF then fails
    tag = open(latest_file).read().strip()
    roles = [("_actor", size("actor"))] + ([("_critic", size("critic"))] if critic_on else [])
    for role, world in roles:
        role_dir = os.path.join(ckpt, role)
        if universal:  # DeepSpeed's engine.load_checkpoint with checkpoint.load_universal
            pointer = os.path.join(role_dir, "latest_universal")
            if not os.path.isfile(pointer):
                raise ValueError(f"Invalid for universal checkpoint: {pointer} does not exist")
            tag = open(pointer).read().strip()
            continue
        saved = os.path.join(role_dir, tag, "state.json")
        dp = json.load(open(saved)).get("dp") if os.path.isfile(saved) else None
        if dp is not None and dp != world:  # deepspeed/runtime/zero/stage_1_and_2.py and stage3.py
            raise ValueError(
                f"The checkpoint being loaded used a DP world size of {dp} but the current world size is {world}. "
                "Automatic adjustment of ZeRO's optimizer state partitioning with a new world size is not currently supported."
            )
    start = int(tag.replace("global_step", "").removesuffix("_uni").split("_uni_")[0])
    print(f"resumed from {tag}", flush=True)
    print(f"checkpoint_states: {{'global_step': {start}, 'episode': 0, 'data_loader_state_dict': {{}}}}", flush=True)

os.makedirs(ckpt, exist_ok=True)
with open(os.path.join(ckpt, ".standin.jsonl"), "a") as record:
    record.write(
        json.dumps(
            {
                "argv": sys.argv[1:],
                "start_step": start,
                "wandb_key_in_env": bool(os.environ.get("WANDB_API_KEY")),
                "wandb_flag": arg("logger.wandb.key", "use_wandb"),
                "gpus": gpus,
                "actor_dp": size("actor"),
                "time": time.time(),  # placed and loaded: training starts
                "universal": bool(universal),
                "nodes": len(seen_nodes),
                "per_group": per_group,
            }
        )
        + "\n"
    )


def save(step):
    tag = f"global_step{step}"
    roles = ["_actor"] + (["_critic"] if critic_on else [])
    for role in roles:
        role_dir = os.path.join(ckpt, role)
        os.makedirs(os.path.join(role_dir, tag), exist_ok=True)
        with open(os.path.join(role_dir, tag, "state.json"), "w") as handle:
            json.dump({"step": step, "writer": os.environ.get("RLHF_LAUNCH_JOB", ""), "dp": size(role[1:])}, handle)
        tmp = os.path.join(role_dir, ".latest.tmp")
        with open(tmp, "w") as handle:
            handle.write(tag)
        os.replace(tmp, os.path.join(role_dir, "latest"))
        kept = sorted((e for e in os.listdir(role_dir) if e[11:].isdigit() and e.startswith("global_step")), key=lambda e: int(e[11:]))
        for old in kept[:-max_num]:
            import shutil

            shutil.rmtree(os.path.join(role_dir, old))
    if save_hf:
        os.makedirs(os.path.join(ckpt, f"{tag}_hf"), exist_ok=True)
    print(f"saved checkpoint {tag}", flush=True)


def crash_excerpt(cls):
    """What a real failure of class `cls` prints (attributed in the corpus file)."""
    import yaml

    corpus = os.path.join(os.path.dirname(__file__), "..", "..", "..", "data", "diagnose", "corpus.yaml")
    with open(corpus) as handle:
        entries = yaml.safe_load(handle)
    return next(e["excerpt"] for e in entries if e["class"] == cls)


began = time.time()
BLOCKS = " ▏▎▍▌▋▊▉█"  # tqdm's unicode bar


def clock(seconds):
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


def bar(step):
    """tqdm's default meter, as `tqdm(range(N), desc="Episode [1/1]")` draws it with no
    terminal (10 cells): `Episode [1/1]:  38%|███▊      | 3/8 [00:11<00:18,  3.71s/it]`.
    It counts rollout batches before 0.9.1 and prompts after (the trainer's own bar)."""
    scale = rollout_batch if new_era else 1
    n, total = step * scale, steps * scale
    frac = n / total if total else 0.0
    eighths = int(frac * 10 * 8)
    cells = (BLOCKS[-1] * (eighths // 8) + (BLOCKS[eighths % 8] if eighths % 8 else "")).ljust(10)
    elapsed = time.time() - began
    done_now = step - start
    if done_now <= 0 or elapsed <= 0:
        return f"Episode [1/1]: {100 * frac:3.0f}%|{cells}| {n}/{total} [{clock(elapsed)}<?, ?it/s]"
    rate = done_now * scale / elapsed
    speed = f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"
    return f"Episode [1/1]: {100 * frac:3.0f}%|{cells}| {n}/{total} [{clock(elapsed)}<{clock((total - n) / rate)}, {speed}]"


def draw(step):
    """tqdm redraws on stderr with a carriage return and no newline."""
    sys.stderr.write("\r" + bar(step))
    sys.stderr.flush()


def log(message):
    """OpenRLHF's logger (utils/logging_utils.py): stdout, `LEVEL mm-dd HH:MM:SS file:line] msg`."""
    print(f"INFO {time.strftime('%m-%d %H:%M:%S')} ppo_trainer.py:551] {message}", flush=True)


crash_file = os.path.join(ckpt, ".standin_crashes")
draw(start)
timed = version_key(fs.version) >= version_key("0.9.6")  # the step line's `timing/*` keys (ppo_trainer.py:541 in 0.11.0)
for step in range(start + 1, steps + 1):
    step_began = time.time()
    time.sleep(step_seconds)
    if holders_lost() or lost_nodes():
        print(f"lost a node at step {step}", flush=True)
        print(crash_excerpt("node_lost"), flush=True)  # what the real trainer's driver shows then
        sys.exit(1)
    crashes = int(open(crash_file).read()) if os.path.exists(crash_file) else 0
    if step == crash_steps[min(crashes, len(crash_steps) - 1)] and crashes < crash_times:
        with open(crash_file, "w") as handle:
            handle.write(str(crashes + 1))
        print(f"injected crash at step {step}", flush=True)
        print(crash_excerpt(crash_class), flush=True)
        sys.exit(1)
    status = {"policy_loss": round(0.5 / step, 4), "reward": round(0.1 * step, 3), "kl": round(0.001 * step, 4)}
    if timed:  # 0.9.6+: train_step's timers, then fit's generation timer and their sum (ppo_trainer.py)
        took = time.time() - step_began
        split = {"generation": 0.4, "make_experience": 0.2, "ppo_train": 0.35, "broadcast": 0.05}
        status.update({f"timing/{k}": took * split[k] for k in ("make_experience", "ppo_train", "broadcast")})
        status["timing/generation"] = took * split["generation"]
        status["timing/step_total"] = sum(v for k, v in status.items() if k.startswith("timing/"))
    log(f"\u2728 Global step {step}: {status}")
    draw(step)  # the trainer updates its bar after the step's log line
    hang_here(f"after_step:{step}")
    if save_steps > 0 and step % save_steps == 0:
        save(step)
        with open(os.path.join(ckpt, ".standin_saves.jsonl"), "a") as saves:  # who wrote which step, when
            saves.write(json.dumps({"step": step, "job": os.environ.get("RLHF_LAUNCH_JOB", ""), "time": time.time()}) + "\n")
sys.stderr.write("\n")  # the bar closes
sys.stderr.flush()
print(f"training finished at step {steps}", flush=True)
