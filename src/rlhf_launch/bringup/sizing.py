"""What one node of the run asks its scheduler for (Slurm's `--mem`, a KubeRay pod's requests),
from the plan: pure.

Memory: PACK may put the busiest node's roles on any node, so each asks for the plan's busiest
node (core/memory.py host need: offloaded optimizer states, sleeping vLLM weights) plus
HOST_HEADROOM, a process floor per GPU, Ray's own processes, and /dev/shm (a tmpfs counts
against the pod's or the job's memory limit): Ray's object store, set to OBJECT_STORE_GIB,
and SHM_NEED_GIB beside it for NCCL, vLLM and PyTorch (the doctor's pass mark).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlhf_launch.core.launch import Launch
from rlhf_launch.doctor.checks import GIB, HOST_HEADROOM, SHM_GOOD
from rlhf_launch.errors import UserError

SHM_NEED_GIB = SHM_GOOD // GIB  # /dev/shm beside the object store: NCCL, vLLM, torch (the doctor's pass mark)
OBJECT_STORE_GIB = 16  # OpenRLHF moves rollout batches through it (MBs to a few GiB); Ray spills beyond
PROCESS_GIB_PER_GPU = 4  # each GPU's process outside its offloaded states: torch, CUDA and NCCL host memory
RAY_SYSTEM_GIB = 8  # raylet, GCS, dashboard, the job drivers and the supervisor
CPUS_PER_GPU = 8  # a GPU bundle takes 1 CPU; the rest feeds tokenizers, data loaders and reward functions


@dataclass(frozen=True)
class Sizing:
    """What every node (pod) asks for, and why."""

    gpus: int
    cpus: int
    memory_gib: int
    shm_gib: int
    object_store_gib: int
    host_need_gib: float  # the plan's busiest node
    host_per_node: dict[str, float]  # declared node -> the plan's host RAM there (GiB)
    host_sources: dict[str, dict[str, float]]  # declared node -> setting -> GiB

    def why(self) -> str:
        """The memory figure in words: which plan numbers make it."""
        parts = [f"the busiest node's ~{self.host_need_gib:.0f} GiB of host RAM{self._sources()} + {HOST_HEADROOM:.0%}"]
        parts += [
            f"{PROCESS_GIB_PER_GPU} GiB x {self.gpus} GPU processes",
            f"{RAY_SYSTEM_GIB} GiB for Ray",
            f"{self.shm_gib} GiB of /dev/shm (object store {self.object_store_gib} + {self.shm_gib - self.object_store_gib} for NCCL/vLLM)",
        ]
        return " + ".join(parts)

    def _sources(self) -> str:
        if not self.host_per_node:
            return ""
        busiest = max(self.host_per_node, key=lambda n: self.host_per_node[n])
        sources = sorted(self.host_sources.get(busiest, {}).items(), key=lambda kv: -kv[1])
        return f" ({', '.join(f'{k} ~{v:.0f}' for k, v in sources)})" if sources else ""

    def per_node(self) -> str:
        """The plan's host RAM on each declared node, e.g. `node0 0, node1 ~1028 (deepspeed.adam_offload)`."""
        out = []
        for node, gib in self.host_per_node.items():
            sources = ", ".join(k for k, v in sorted(self.host_sources.get(node, {}).items(), key=lambda kv: -kv[1]) if v > 0)
            out.append(f"{node} ~{gib:.0f} GiB" + (f" ({sources})" if sources else ""))
        return ", ".join(out)


def sizing(launch: Launch, cpus: int | None = None) -> Sizing:
    cfg = launch.cfg
    gpus = cfg.cluster.gpus_per_node
    if cpus is not None and cpus < gpus + 1:
        raise UserError(
            f"--cpus {cpus}: each of the {gpus} GPUs' bundles takes a CPU, and the drivers need one more",
            hint=f"--cpus {gpus * CPUS_PER_GPU} (the default)",
        )
    host = dict(launch.memory.host_per_node) if launch.memory is not None else {}
    sources = {k: dict(v) for k, v in launch.memory.host_sources.items()} if launch.memory is not None else {}
    need = max(host.values(), default=0.0)
    shm = OBJECT_STORE_GIB + SHM_NEED_GIB
    memory = math.ceil(need * (1 + HOST_HEADROOM) + PROCESS_GIB_PER_GPU * gpus + RAY_SYSTEM_GIB + shm)
    return Sizing(gpus, cpus or gpus * CPUS_PER_GPU, memory, shm, OBJECT_STORE_GIB, need, host, sources)
