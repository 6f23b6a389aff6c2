"""What a diagnosis says: the failure classes, the phases of a run, and `Diagnosis`.

The classes, in the order their rules are tried (rules.py; a root cause outranks its
symptoms). docs/diagnose.md and the README have them as a table (a test keeps the tables
and this enum the same).

config         the trainer refused its arguments: argparse errors (unknown flag, bad
               value), OpenRLHF's start-up asserts, DeepSpeed's batch-size check, W&B
               refusing the key, OmegaConf/Hydra-style config errors at trainer init.
               Retriable: never (the same arguments fail the same way).
runtime_env    Ray could not set up the job's runtime env: upload too large, an env var
               OpenRLHF's own ray.init also sets, packages that failed to install, a set-up
               that timed out. Retriable: only when it looks transient.
import         a module cannot be imported or does not match another. Retriable: never.
model_or_data  a model, tokenizer or dataset cannot be loaded. Retriable: never.
gpu_oom        CUDA out of memory in any phase (training, vLLM and its wake-up, weight
               sync, save). Retriable: never (the sizing must change).
gpu_fault      the GPU hardware failed: an NVIDIA Xid, an uncorrectable ECC error, a GPU
               "fallen off the bus". Retriable: yes, once the node is drained or the GPU
               replaced (the hint names the node when the log does).
weight_sync    updating vLLM's weights from the trainer failed. Retriable: only a timeout
               or a network (InfiniBand) fault during the sync itself.
vllm           a vLLM engine failed to start (no memory for the KV cache) or crashed.
               Retriable: a crash mid-run; never a start-up failure.
reward_remote  the remote reward / judge server did not answer, or a custom reward function
               failed. Retriable: the server (refused, 5xx, timeouts); never reward code.
host_oom       a worker was killed for host memory. Retriable: unless before the first step.
node_lost      a node or its raylet died or was shut down (missed heartbeats, `ray stop`,
               the autoscaler), an actor died because its node did. Retriable: yes (not a
               wrong head address at start-up).
nccl           NCCL errors, collective timeouts and a stuck watchdog, c10d rendezvous
               timeouts. Retriable: yes, unless the communicators never came up.
unknown        none of the above; the hint names the last exception. Retriable: only when
               the message says to try again (the retry policy may still retry an unknown
               failure that came after progress: runs/retry.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlhf_launch.util.enums import StrEnum

__all__ = ["LOOP", "PHASES", "STARTUP", "Diagnosis", "FailureClass"]

PHASES = ("startup", "placement", "model_load", "generate", "make_experience", "train", "weight_sync", "save")
LOOP = ("generate", "make_experience", "train", "weight_sync", "save")  # the training loop
STARTUP = ("startup", "placement", "model_load")


class FailureClass(StrEnum):
    CONFIG = "config"
    IMPORT = "import"
    MODEL_OR_DATA = "model_or_data"
    GPU_OOM = "gpu_oom"
    GPU_FAULT = "gpu_fault"
    HOST_OOM = "host_oom"
    NCCL = "nccl"
    NODE_LOST = "node_lost"
    VLLM = "vllm"
    WEIGHT_SYNC = "weight_sync"
    RUNTIME_ENV = "runtime_env"
    REWARD_REMOTE = "reward_remote"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Diagnosis:
    """`retriable`: would resubmitting from the latest checkpoint plausibly succeed?
    `phase`: one of PHASES (or None), from the failing call's traceback, else the last
    progress line before the decisive one. `step`: the last global step seen. `evidence`:
    the decisive lines, redacted. `hint`: what to change (config keys by their path)."""

    cls: FailureClass
    retriable: bool
    phase: str | None
    step: int | None
    evidence: list[str]
    hint: str
    rule: str = ""  # which rule decided (for tests and bug reports)

    def as_json(self) -> dict[str, Any]:
        return {
            "class": str(self.cls),
            "retriable": self.retriable,
            "phase": self.phase,
            "step": self.step,
            "evidence": list(self.evidence),
            "hint": self.hint,
        }
