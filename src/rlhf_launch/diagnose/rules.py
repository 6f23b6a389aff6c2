"""The rules, as data: one `Rule` record per failure signature, tried in table order (the
first that matches wins, so a root cause comes before its symptoms). Adding a class or a
signature is one entry here plus corpus cases (tests/data/diagnose/corpus.yaml).

A record's fields:
  name         unique; reported as `Diagnosis.rule`
  cls          the FailureClass
  pattern      a regex searched in each candidate line
  anchors      literal substrings: only lines holding one are candidates (every line the
               pattern can match must hold one; a test reads every line to check)
  retriable    a bool, or `retriable_by`: the name of a predicate in checks.PREDICATES
  hint         the text, or `hint_by`: the name of a function in checks.HINTS
  phase        a fixed phase, or `phase_by`: a function in checks.PHASE_OF (it sees the
               phase inferred from the traceback / progress lines); neither: inferred
  when         a predicate that must also hold; `exclude`: a regex that vetoes the line
  deep         also looked for before the tail, back to the last step (causes that leave
               survivors hanging: their aftermath can fill the tail)

Every name is checked once, at import: an unknown class, phase or function, a bad regex
or a duplicate rule name raises here, not when a log happens to reach the rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rlhf_launch.diagnose import checks
from rlhf_launch.diagnose.taxonomy import PHASES, FailureClass

__all__ = ["ALL_ANCHORS", "DEEP_ANCHORS", "DEEP_RULES", "FALLBACK_ANCHORS", "FALLBACK_EXCEPTION", "RULES", "Rule"]


@dataclass(frozen=True, kw_only=True)
class Rule:
    name: str
    cls: FailureClass
    pattern: str
    anchors: tuple[str, ...]
    retriable: bool | None = None
    retriable_by: str = ""
    hint: str = ""
    hint_by: str = ""
    phase: str | None = None
    phase_by: str = ""
    when: str = ""
    exclude: str = ""
    deep: bool = False
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)
    veto: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    needles: tuple[bytes, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"rule {self.name!r}"
        if not isinstance(self.cls, FailureClass):
            raise ValueError(f"{where}: cls must be a FailureClass, got {self.cls!r}")
        if (self.retriable is None) == (not self.retriable_by):
            raise ValueError(f"{where}: give exactly one of retriable / retriable_by")
        if bool(self.hint) == bool(self.hint_by):
            raise ValueError(f"{where}: give exactly one of hint / hint_by")
        if self.phase is not None and self.phase_by:
            raise ValueError(f"{where}: give at most one of phase / phase_by")
        if self.phase is not None and self.phase not in PHASES:
            raise ValueError(f"{where}: unknown phase {self.phase!r} (known: {', '.join(PHASES)})")
        for name, table in ((self.retriable_by, checks.PREDICATES), (self.when, checks.PREDICATES), (self.hint_by, checks.HINTS)):
            if name and name not in table:
                raise ValueError(f"{where}: no function {name!r} in checks (known: {', '.join(sorted(table))})")
        if self.phase_by and self.phase_by not in checks.PHASE_OF:
            raise ValueError(f"{where}: no phase function {self.phase_by!r} in checks")
        if not self.anchors or not all(self.anchors):
            raise ValueError(f"{where}: needs non-empty anchors")
        object.__setattr__(self, "regex", re.compile(self.pattern))
        object.__setattr__(self, "veto", re.compile(self.exclude) if self.exclude else None)
        object.__setattr__(self, "needles", tuple(a.encode() for a in self.anchors))


C = FailureClass

RULES: tuple[Rule, ...] = (
    # ------------------------------------------------------------ config
    Rule(
        name="argparse",
        cls=C.CONFIG,
        pattern=r"(?<![\w.-])[\w.-]+(?:\.py)?: error: "
        r"(?:unrecognized arguments|argument |the following arguments are required|ambiguous option)"
        r"|Some specified arguments are not used by the HfArgumentParser",
        anchors=("rror", "HfArgumentParser"),
        retriable=False,
        hint_by="argparse_hint",
        phase="startup",
    ),
    Rule(
        name="deepspeed_batch",
        cls=C.CONFIG,
        pattern=r"train_batch_size is not equal to micro_batch_per_gpu \* gradient_acc_step \* world_size",
        anchors=("train_batch_size is not equal",),
        retriable=False,
        hint="`train.train_batch_size` must equal `train.micro_train_batch_size` x gradient accumulation x the actor's GPUs "
        "(`placement.actor`): make it a multiple of micro batch x GPUs",
        phase="model_load",
    ),
    Rule(
        name="trainer_assert",
        cls=C.CONFIG,
        pattern=r"\b(?:AssertionError|ValueError): \S",
        anchors=("rror",),
        retriable=False,
        hint="OpenRLHF's start-up check refused the arguments (see the evidence); `rlhf-launch plan` runs the same checks",
        phase="startup",
        when="in_trainer_frame",
        exclude=r"(?i)runtime.?env",
    ),
    Rule(
        name="wandb_auth",
        cls=C.CONFIG,
        pattern=r"(?i)wandb.*(?:\b40[13]\b|unauthori[sz]ed|api_key not configured|invalid api key)|UsageError: api_key",
        anchors=("rror", "ERROR"),
        retriable=False,
        hint="W&B refused the key: export a valid WANDB_API_KEY where you run rlhf-launch (it travels in the job's runtime_env)",
        phase="startup",
    ),
    Rule(
        name="deepspeed_batch_zero",
        cls=C.CONFIG,
        pattern=r"(?:Micro batch size per gpu|Train batch size): -?\d+ has to be greater than 0",
        anchors=("has to be greater than 0",),
        retriable=False,
        hint="DeepSpeed computed a batch size of 0: `train.train_batch_size` must be at least `train.micro_train_batch_size` "
        "x the actor's GPUs (`placement.actor`)",
        phase="model_load",
    ),
    Rule(
        name="vllm_tp_heads",
        cls=C.VLLM,
        # vLLM's check of tensor parallelism against the model's shape (before the general size check)
        pattern=r"(?i)(?:attention|query|key[- ]value|kv) heads \(\d+\) must be divisible by tensor parallel size",
        anchors=("heads",),
        retriable=False,
        hint="`placement.vllm.tensor_parallel_size` must divide the model's attention heads and KV heads",
        phase="model_load",
    ),
    Rule(
        name="size_divisible",
        cls=C.CONFIG,
        # a trainer's or engine's start-up check on batch / parallel sizes (verl, TRL, vLLM word it so)
        pattern=r"(?i)\b(?:must|should|has to|needs to) be (?:evenly |exactly )?(?:divisible by|a multiple of|divided by)"
        r"|\bis not (?:evenly )?divisible by|\bnot (?:evenly )?divisible by",
        anchors=("ivisible", "multiple of", "divided by"),
        retriable=False,
        hint="a batch or parallel size does not divide another (see the evidence): `train.train_batch_size`, "
        "`train.micro_train_batch_size`, `train.rollout_batch_size`, the GPUs per role (`placement.*`) and "
        "`placement.vllm.tensor_parallel_size` must divide as the trainer requires",
        phase="startup",
        when="sizes_named",
    ),
    Rule(
        name="dtype_unsupported",
        cls=C.CONFIG,
        pattern=r"Bfloat16 is only supported on GPUs with compute capability"
        r"|(?:bf16|bfloat16)[^\n]*(?:not supported|requires)[^\n]*(?:GPU|compute capability)",
        anchors=("loat16", "bf16"),
        retriable=False,
        hint="the GPUs cannot run bfloat16 (compute capability < 8.0): set `deepspeed.bf16=false` and a dtype the GPUs support",
        phase="model_load",
        when="error_line",
    ),
    Rule(
        name="structured_config",
        cls=C.CONFIG,
        # OmegaConf / Hydra configs (verl-style trainers) and config dataclasses refusing a key or a value
        pattern=r"\bomegaconf\.errors\.\w+|\b(?:ConfigAttributeError|ConfigKeyError|ConfigTypeError|ConfigValueError"
        r"|MissingMandatoryValue|ReadonlyConfigError|InterpolationKeyError|InterpolationResolutionError"
        r"|ConfigCompositionException|OverrideParseException)\b|Key '[^']+' is not in struct|Could not override '[^']+'"
        r"|\bhydra\.errors\.\w+|validation errors? for \w*(?:Config|Arguments)\b|Error merging (?:override|'[^']+')"
        r"|Could not append to config|Key '[^']+' not in '\w+'|\bDeepSpeedConfigError\b",
        anchors=(
            "rror",
            "xception",
            "not in struct",
            "override",
            "MissingMandatoryValue",
            "validation error",
            "merging",
            "append to config",
        )
        + ("Key '",),
        retriable=False,
        hint="the trainer's structured config refused a key or a value (see the evidence): the key is unknown to this "
        "release or misspelt; fix it in `extra_args` or set `openrlhf.version` to the release the cluster runs",
        phase="startup",
    ),
    # ------------------------------------------------------------ runtime_env
    Rule(
        name="env_too_large",
        cls=C.RUNTIME_ENV,
        pattern=r"Request Entity Too Large|RequestEntityTooLarge|Payload Too Large|exceeds the maximum size of",
        anchors=("Large", "xceeds the maximum"),
        retriable=False,
        hint="the working_dir upload is too large (Ray: 100 MiB through the dashboard, 512 MiB per package): add the big files "
        "to `runtime_env.excludes` or point `runtime_env.working_dir` at a smaller directory",
        phase="startup",
    ),
    Rule(
        name="env_merge",
        cls=C.RUNTIME_ENV,
        pattern=r"Failed to merge the Job's runtime env",
        anchors=("ailed",),
        retriable=False,
        hint="`runtime_env.env_vars` sets a key OpenRLHF's own ray.init sets (TOKENIZERS_PARALLELISM, NCCL_DEBUG, "
        "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS): remove it, or add RAY_OVERRIDE_JOB_RUNTIME_ENV=1",
        phase="startup",
    ),
    Rule(
        name="env_packages",
        cls=C.RUNTIME_ENV,
        pattern=r"(?i)gone wrong while installing the runtime_env|Failed to install (?:pip|conda|uv)|pip install .* (?:failed|error)"
        r"|CondaEnvException|CondaValueError|Pip subprocess error|No matching distribution found for"
        r"|Could not find a version that satisfies the requirement",
        anchors=("rror", "ailed", "xception", "distribution", "satisfies"),
        retriable=False,
        hint="the runtime env's packages failed to install: bake them into the cluster image",
        phase="startup",
    ),
    Rule(
        name="env_setup",
        cls=C.RUNTIME_ENV,
        pattern=r"RuntimeEnvSetupError|Failed to set ?up runtime env|runtime env failed to be created|Failed to upload working_dir"
        r"|Failed to (?:create|download) (?:the )?runtime env|runtime env setup error",
        anchors=("rror", "ailed"),
        retriable_by="env_transient",
        hint_by="runtime_env_hint",
        phase_by="runtime_env_phase",
    ),
    # ------------------------------------------------------------ import
    Rule(
        name="module_not_found",
        cls=C.IMPORT,
        pattern=r"ModuleNotFoundError|No module named '",
        anchors=("rror",),
        retriable=False,
        hint="a module is missing on the cluster (the driver or a worker's environment): install it in the image every node runs",
        phase_by="import_phase",
    ),
    Rule(
        name="undefined_symbol",
        cls=C.IMPORT,
        # a compiled library missing or built against another ABI / glibc
        pattern=r"undefined symbol: |\.so[\w.]*: cannot open shared object file|version `(?:GLIBC|GLIBCXX|CXXABI)_[\d.]+' not found",
        anchors=("symbol", "shared object", "' not found"),
        retriable=False,
        hint="a compiled extension (flash-attn, vLLM) was built for another torch: install wheels matching the image's torch "
        "(`rlhf-launch versions` lists OpenRLHF's pins)",
        phase_by="import_phase",
    ),
    Rule(
        name="import_error",
        cls=C.IMPORT,
        pattern=r"\bImportError\b|Failed to import (?:from )?[\w.]+",
        anchors=("rror", "ailed to import"),
        retriable=False,
        hint="an import failed on the cluster: the image's packages do not match OpenRLHF's pins (`rlhf-launch versions`)",
        phase_by="import_phase",
    ),
    Rule(
        name="extension_build",
        cls=C.IMPORT,
        # a native op (DeepSpeed's FusedAdam, CPUAdam, flash-attn) that could not be built or loaded
        pattern=r"Error building extension '[\w.]+'|op_builder[/\\]builder\.py\S*, line \d+, in jit_load",
        anchors=("building extension", "jit_load"),
        retriable=False,
        hint="a native extension could not be built or loaded on the cluster: the image's CUDA toolkit, compiler "
        "or torch does not match what the package was built for (`rlhf-launch versions`)",
        phase="startup",
    ),
    Rule(
        name="module_attribute",
        cls=C.IMPORT,
        pattern=r"AttributeError: module '(?:torch|vllm|transformers|deepspeed|ray|flash_attn|numpy|accelerate|peft|trl|datasets"
        r"|openrlhf|triton|xformers|huggingface_hub|safetensors|bitsandbytes|apex|pydantic|packaging)(?:\.[\w.]+)?' has no attribute"
        r"|\bVersionConflict\b|is not compatible with the installed",
        anchors=("rror", "VersionConflict", "compatible"),
        retriable=False,
        hint="a library is not the version its caller expects (an attribute or API it lacks): pin the versions "
        "`rlhf-launch versions` lists for `openrlhf.version`",
        phase_by="import_phase",
    ),
    Rule(
        name="image_hardware_mismatch",
        cls=C.IMPORT,
        # the image's CUDA build does not fit the node's driver or GPU
        pattern=r"NVIDIA driver on your system is too old|CUDA driver version is insufficient for CUDA runtime version"
        r"|no kernel image is available for execution on the device|sm_\d+ is not compatible with the current PyTorch installation",
        anchors=("too old", "insufficient", "no kernel image", "not compatible"),
        retriable=False,
        hint="the image's CUDA build does not fit the nodes (driver too old, or no kernels for this GPU): use an image built "
        "for the nodes' driver and GPU architecture",
        phase_by="import_phase",
    ),
    Rule(
        name="version_mismatch",
        cls=C.IMPORT,
        # a library calling another with an argument that release does not take
        pattern=r"TypeError: (?:[\w.<>]+\(\) got an u|U)nexpected keyword argument",
        anchors=("rror",),
        retriable=False,
        hint="two libraries disagree (a version mismatch, e.g. vLLM newer than this OpenRLHF supports): pin the versions "
        "`rlhf-launch versions` lists for `openrlhf.version`",
        phase_by="import_phase",
    ),
    # ------------------------------------------------------------ model_or_data
    Rule(
        name="hf_gated",
        cls=C.MODEL_OR_DATA,
        pattern=r"GatedRepoError|gated repo|is gated\. You must|is restricted\. You must|\b40[13] Client Error",
        anchors=("rror", "gated", "estricted"),
        retriable=False,
        hint="the model is gated or private: accept its licence on the Hub and put HF_TOKEN in `runtime_env.env_vars` "
        "(or the nodes' environment)",
        phase="model_load",
        exclude=r"(?i)wandb",
    ),
    Rule(
        name="hf_missing",
        cls=C.MODEL_OR_DATA,
        pattern=r"is not a local folder and is not a valid model identifier|RepositoryNotFoundError|Repository Not Found"
        r"|\b404 Client Error|does not appear to have a file named|Can't load (?:the )?(?:tokenizer|config|model)"
        r"|Incorrect path_or_model_id|We couldn't connect to 'https://huggingface\.co'"
        r"|no file named [\w.]+\.(?:bin|safetensors|h5|json|msgpack|index)\b|\bHFValidationError\b|Repo id must (?:be in the form|use)"
        r"|\bLocalEntryNotFoundError\b|outgoing traffic has been disabled|Unrecognized model in |Should have a `model_type` key"
        r"|Unable to load weights from|host='huggingface\.co', port=\d+\): (?:Max retries exceeded|Read timed out)",
        anchors=("rror", "outgoing traffic", "Unrecognized model", "model_type", "Unable to load weights", "huggingface.co"),
        retriable=False,
        hint="`models.actor` (or reward/critic) is neither a directory present on every node nor a Hub id reachable from them: "
        "use a path on shared storage",
        phase="model_load",
    ),
    Rule(
        name="model_file_corrupt",
        cls=C.MODEL_OR_DATA,
        pattern=r"Error while deserializing header|HeaderTooLarge|MetadataIncompleteBuffer|UnpicklingError: invalid load key"
        r"|PytorchStreamReader failed reading zip archive",
        anchors=("deserializing", "HeaderTooLarge", "MetadataIncomplete", "invalid load key", "zip archive"),
        retriable=False,
        hint="a model file is not what its name says (a Git LFS pointer, a truncated download): re-fetch `models.actor` "
        "(or the reward / critic model) onto storage every node reads",
        phase="model_load",
    ),
    Rule(
        name="chat_template",
        cls=C.MODEL_OR_DATA,
        pattern=r"chat_template is not set|Cannot use chat template",
        anchors=("rror",),
        retriable=False,
        hint="`data.apply_chat_template` is on but the tokenizer has no chat template: turn it off or use an instruct model",
        phase="startup",
    ),
    Rule(
        name="dataset_missing",
        cls=C.MODEL_OR_DATA,
        pattern=r"DatasetNotFoundError|Couldn't find (?:a dataset script|any data file)|doesn't exist on the Hub"
        r"|FileNotFoundError: .*(?:[Dd]ataset|\.jsonl?\b|\.parquet\b|\.csv\b|\.arrow\b)",
        anchors=("rror",),
        retriable=False,
        hint="`data.prompt_dataset` cannot be loaded where the trainer runs: a path on shared storage or a Hub id",
        phase="startup",
    ),
    Rule(
        name="dataset_format",
        cls=C.MODEL_OR_DATA,
        pattern=r"\bArrowInvalid\b|\bArrowTypeError\b|Parquet magic bytes not found|\bDatasetGenerationError\b"
        r"|Error creating dataset|JSON parse error|Couldn't cast array of type|\bCastError\b",
        anchors=("rror", "Arrow", "arquet", "Couldn't cast"),
        retriable=False,
        hint="`data.prompt_dataset` cannot be parsed (a corrupt or Git LFS pointer file, or the wrong format for its "
        "extension): fetch the real files or fix the format",
        phase="startup",
    ),
    Rule(
        name="dataset_key_bare",
        cls=C.MODEL_OR_DATA,
        pattern=r"(?m)^\s*['\"](?P<key>[A-Za-z_]\w*)['\"]\s*$",
        anchors=("'", '"'),
        retriable=False,
        hint_by="dataset_key_hint",
        phase="startup",
        when="key_subscripted",
    ),
    Rule(
        name="dataset_key",
        cls=C.MODEL_OR_DATA,
        pattern=r"KeyError: ['\"](?P<key>[^'\"]*)['\"]|Column .* not in the dataset",
        anchors=("rror",),
        retriable=False,
        hint_by="dataset_key_hint",
        phase="startup",
        when="dataset_key_context",
    ),
    # ------------------------------------------------------------ gpu_oom
    Rule(
        # torch's OOM line with far more free than it asked for: no shortage, the allocator failed (vLLM's
        # sleep-mode cumem allocator, a memory pool of another process): the engine's fault when vLLM sleeps
        name="oom_not_shortage",
        cls=C.VLLM,
        pattern=checks.OOM_FREE_LINE,
        anchors=("Tried to allocate",),
        retriable=False,
        hint="not a memory shortage: the GPU had far more free than the allocation asked for, so vLLM's sleep-mode "
        "allocator (cumem) failed: use a vLLM release with the fix, or run without `placement.vllm.enable_sleep`",
        when="free_far_over_request_with_vllm_sleep",
        deep=True,
    ),
    Rule(
        name="oom_not_shortage_other",
        cls=C.UNKNOWN,
        pattern=checks.OOM_FREE_LINE,
        anchors=("Tried to allocate",),
        retriable=False,
        hint="not a memory shortage: the GPU had far more free than the allocation asked for; an allocator or "
        "driver failure reported as out-of-memory (read the lines before it)",
        when="free_far_over_request",
        deep=True,
    ),
    Rule(
        name="cuda_oom",
        cls=C.GPU_OOM,
        pattern=r"CUDA out of memory|(?i:cuda(?: driver)? error): out of memory|torch\.(?:cuda\.)?OutOfMemoryError"
        r"|HIP out of memory|Cuda failure 'out of memory'|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY"
        r"|CUBLAS_STATUS_ALLOC_FAILED|cuda(?:Malloc|MemAlloc)\w*[^\n]*out of memory|out of memory on device"
        r"|Error \[CUDA\]: out of memory|\bOutOfMemoryError: .*Tried to allocate|cuMem\w+[^\n]*out of memory",
        anchors=("memory", "MemoryAllocation", "OUT_OF_MEMORY", "ALLOC_FAILED"),
        retriable=False,
        hint_by="gpu_oom_hint",
        phase_by="gpu_oom_phase",
        deep=True,
    ),
    # ------------------------------------------------------------ gpu_fault
    Rule(
        name="gpu_hardware",
        cls=C.GPU_FAULT,
        pattern=r"NVRM: Xid\b|\bX(?:id|ID) \(?(?:PCI:[^)]*\): )?\d+|fallen off the bus|uncorrectable ECC error"
        r"|ECC errors? (?:encountered|detected)"
        r"|cudaErrorECCUncorrectable|CUDA_ERROR_ECC_UNCORRECTABLE|uncorrectable NVLink error|ERROR_GPU_IS_LOST|GPU is lost"
        r"|[Rr]ow ?[Rr]emapp\w* (?:failure|pending)|double[- ]bit ECC|NVMLError_GpuIsLost|GPU requires reset"
        r"|Unable to determine the device handle for GPU|NVLink (?:fatal|uncorrectable)|RmInitAdapter failed",
        anchors=("Xid", "XID", "fallen off", "ECC", "NVLink", "GPU_IS_LOST", "GPU is lost", "emapp", "GpuIsLost", "requires reset")
        + ("device handle", "RmInitAdapter"),
        retriable=True,
        hint_by="gpu_fault_hint",
        when="hardware_fault",
        deep=True,
    ),
    # ------------------------------------------------------------ weight_sync (causes)
    Rule(
        name="sync_ipc",
        cls=C.WEIGHT_SYNC,
        pattern=r"pidfd_open syscall needed to use IPC|\bpidfd_(?:open|getfd)\b|IPC for CUDA tensors",
        anchors=("rror", "pidfd"),
        retriable=False,
        hint="CUDA-IPC weight sync (vLLM colocated) is blocked by the host: drop expandable_segments from PYTORCH_CUDA_ALLOC_CONF "
        "in `runtime_env.env_vars` (old kernels) or set kernel.yama.ptrace_scope=0 on the nodes",
        phase="weight_sync",
    ),
    Rule(
        name="sync_device",  # vLLM's PyNcclCommunicator check (device_communicators/pynccl.py)
        cls=C.WEIGHT_SYNC,
        pattern=r"this nccl communicator is created to work on \S+",  # the message may wrap before ", but the input tensor is on"
        anchors=("nccl communicator is created",),
        retriable=False,
        hint="the weight-update communicator was built on one GPU and given tensors on another: the trainer's device for "
        "the update group does not match (CUDA_VISIBLE_DEVICES / the rank's device)",
        phase="weight_sync",
    ),
    Rule(
        name="sync_dtype",
        cls=C.WEIGHT_SYNC,
        pattern=r"mismatch dtype: src",
        anchors=("rror",),
        retriable=False,
        hint="the trainer's and vLLM's weight dtypes differ (LoRA, fp32 weights): keep `deepspeed.bf16=true`",
        phase="weight_sync",
    ),
    Rule(
        name="sync_param_name",
        cls=C.WEIGHT_SYNC,
        # the engine has no parameter of the trainer's name: a model or version pairing the update cannot map
        pattern=r"KeyError: '[\w.]+\.(?:weight|bias|scale)\w*'",
        anchors=("KeyError",),
        retriable=False,
        hint="vLLM's model has no parameter of a name the trainer sends (see the evidence): the model class or the "
        "vLLM / transformers versions do not match the trainer's; pin the versions `rlhf-launch versions` lists",
        phase="weight_sync",
        when="sync_context",
    ),
    # ------------------------------------------------------------ vllm (start-up)
    Rule(
        name="vllm_cache_blocks",
        cls=C.VLLM,
        pattern=r"No available memory for the cache blocks|(?i:insufficient (?:GPU )?(?:memory for (?:the )?)?KV cache)"
        r"|(?i:not enough (?:GPU )?memory for (?:the )?KV cache)|KV cache (?:memory )?is (?:too small|insufficient|not enough)"
        # vLLM's own profile of the cache it could make: none (older and newer wordings), or the
        # cache set-up itself failing on a worker
        r"|# (?:GPU|cuda) blocks: 0\b|reserved for KV [Cc]ache is -\d|Error executing method '?initialize_cache\b",
        anchors=("memory", "KV cache", "kv cache", "KV Cache", "blocks: 0", "initialize_cache"),
        retriable=False,
        hint="vLLM has no room for its KV cache after the weights: raise `placement.vllm.gpu_memory_utilization` or "
        "`placement.vllm.tensor_parallel_size`",
        phase="model_load",
    ),
    Rule(
        name="vllm_kv_too_small",
        cls=C.VLLM,
        pattern=r"larger than the (?:available KV cache memory|maximum number of tokens that can be stored in KV cache)",
        anchors=("stored in KV cache", "memory"),
        retriable=False,
        hint="the longest sequence (`data.prompt_max_len` + `data.generate_max_len`) does not fit vLLM's KV cache: raise "
        "`placement.vllm.gpu_memory_utilization` / `placement.vllm.tensor_parallel_size` or shorten them",
        phase="model_load",
    ),
    Rule(
        name="vllm_max_len",
        cls=C.VLLM,
        pattern=r"User-specified max_model_len \(\d+\) is greater than the derived max_model_len"
        r"|max_num_batched_tokens \(\d+\) is smaller than max_model_len",
        anchors=("max_model_len",),
        retriable=False,
        hint="vLLM's max length (`data.prompt_max_len` + `data.generate_max_len`) exceeds what the model supports or what "
        "vLLM batches: shorten them",
        phase="model_load",
    ),
    Rule(
        name="vllm_free_memory",
        cls=C.VLLM,
        pattern=r"Free memory on device .* is less than desired GPU memory utilization",
        anchors=("memory",),
        retriable=False,
        hint="another process holds GPU memory (colocated models, a previous attempt not gone): lower "
        "`placement.vllm.gpu_memory_utilization`",
        phase="model_load",
    ),
    Rule(
        name="vllm_init",
        cls=C.VLLM,
        pattern=r"Engine core initialization failed|EngineCore failed to start|Engine process failed to start",
        anchors=("ailed",),
        retriable=False,
        hint="a vLLM engine failed to start: its root cause is in the EngineCore lines above the evidence",
        phase="model_load",
    ),
    # ------------------------------------------------------------ reward_remote (definite)
    Rule(
        name="reward_func_missing",
        cls=C.REWARD_REMOTE,
        pattern=r"has no attribute 'reward_func'|Reward function is not implemented",
        anchors=("rror",),
        retriable=False,
        hint="the reward-function file (`models.reward_func`) must define `reward_func(queries, prompts, labels)`",
        phase="model_load",
    ),
    # ------------------------------------------------------------ host_oom (Ray's memory monitor, the kernel)
    Rule(
        name="host_oom_monitor",
        cls=C.HOST_OOM,
        pattern=r"Task was killed due to the node running low on memory|killed due to memory pressure \(OOM\)"
        r"|how to address the out of memory issue|Out of memory: Killed process|Memory cgroup out of memory"
        r"|invoked oom-killer|oom-kill:|\bOOMKilled\b|\[ray state\].*\b(?:OUT_OF_MEMORY|oom_context)\b"
        r"|exit type: NODE_OUT_OF_MEMORY|\bObjectStoreFullError\b|insufficient shared memory \(shm\)|oom[-_]kill events?\b"
        r"|workers are out of shared memory"
        r"|low on resource: memory|exceeds the memory usage threshold|Ray killed this worker",
        anchors=("memory", "killed this worker", "oom-kill", "oom_kill", "[ray state]", "OOMKilled", "OUT_OF_MEMORY", "ObjectStoreFull"),
        retriable_by="host_oom_retriable",
        hint_by="host_oom_hint",
        deep=True,
    ),
    # ------------------------------------------------------------ node_lost
    Rule(
        name="gcs_unreachable_at_start",
        cls=C.NODE_LOST,
        pattern=r"Failed to connect to GCS at address :\d+|Failed to get cluster ID from GCS server"
        r"|Could not find any running Ray instance",
        anchors=("ailed", "running Ray instance"),
        retriable=False,
        hint="the head node is not reachable at start-up: check `cluster.address` and that the head is up",
        phase="startup",
    ),
    Rule(
        name="node_died",
        cls=C.NODE_LOST,
        pattern=r"has bee[nm] marked (?:as )?dead|marked dead because the (?:detector|monitor) has missed"
        r"|(?:its|the actor's|Owner's) node (?:has died|has crashed|was preempted)|node was terminated (?:expectedly|unexpectedly)"
        r"|node it was running on is dead|mistakenly been marked as dead by the GCS|NodeDiedError|LocalRayletDiedError"
        r"|Health check failed for node|raylet exited immediately because|GCS may have been killed"
        r"|Failed to connect to GCS within \d+ seconds|\[ray state\].*\bNODE_DIED\b"
        r"|Raylet is terminated|Terminated Raylet\b|Raylet received SIGTERM|(?i:the raylet|raylet) (?:has )?(?:died|crashed|exited)"
        r"|(?i:raylet (?:is )?shutting down|shutting down (?:the )?raylet)|Raylet connection closed"
        r"|Running ray stop on|No available node types can fulfill resource request \{'node:"
        r"|Task failed due to the node (?:dying|\(where this task was running\))"
        r"|(?i:(?:cluster|node|instance|VM|pod)(?: [\w.:-]+)? (?:is|was|has been) preempted)"
        r"|[Pp]reemption notice|[Ss]pot instance interruption"
        r"|CANCELLED AT \S+ DUE TO (?:PREEMPTION|NODE FAILURE)"
        r"|AUTOSCALER_DRAIN_\w+|DRAIN_NODE_REASON_\w+|terminated by the autoscaler"
        r"|(?i:autoscaler)\b.*\b(?:[Tt]erminat\w+|[Ss]hut(?:ting)? ?down|[Dd]rain\w*|[Rr]emov\w+|[Ss]topp\w+)"
        r"(?: \d+)? (?:the )?(?:node|worker|instance)s?\b|(?i:draining node|node \S+ (?:is being|was|has been) drained)",
        anchors=("dead", "died", "ailed", "rror", "ERROR", "[ray state]", "aylet", "Running ray stop", "node types", "DRAIN")
        + ("the node dying", "where this task was running")
        + ("utoscaler", "terminated", "reempt", "interruption", "CANCELLED"),
        retriable=True,
        hint_by="node_lost_hint",
        exclude=r"(?i)\bidle\b|_IDLE\b",  # an idle node scaled down ran nothing of the run's
        deep=True,
    ),
    # ------------------------------------------------------------ weight_sync (symptoms of a failed update)
    Rule(
        name="sync_rpc",
        cls=C.WEIGHT_SYNC,
        pattern=r"Error executing method '?update_weight|Invocation of collective_rpc method failed"
        r"|Worker failed with error '(?:NCCL|ncclInvalid|.*nccl)"
        r"|ray::(?:\w*LLMRayActor|RolloutRayActor)\.(?:init_process_group|update_weight\w*)\(\)",
        anchors=("rror", "ailed"),
        retriable_by="weight_sync_retriable",
        hint_by="sync_rpc_hint",
        phase_by="sync_rpc_phase",
        deep=True,
    ),
    Rule(
        name="sync_rendezvous",
        cls=C.WEIGHT_SYNC,
        pattern=r"client socket has timed out after \d+ ?m?s while trying to connect to|client socket has failed to connect to",
        anchors=("timed out", "failed to connect"),
        retriable=False,
        hint="the two sides of the weight update cannot reach each other's rendezvous address: set NCCL_SOCKET_IFNAME / "
        "GLOO_SOCKET_IFNAME to a routable interface in `runtime_env.env_vars`",
        phase="model_load",  # the update group's rendezvous happens once, when the models are set up
        when="sync_setup",
    ),
    Rule(
        name="sync_failure",
        cls=C.WEIGHT_SYNC,
        # anything failing inside the trainer -> engine weight update: the fabric, NCCL, CUDA, the engine's update API
        pattern=r"NET/IB ?: Got completion|IBV_WC_\w+_ERR|\bibv_\w+ (?:failed|error)|mlx5\w*:.*(?:[Ee]rror|CQE|syndrome)"
        r"|transport retry counter exceeded|catastrophic error|IBV_EVENT_\w+_ERR|local (?:length|protection|QP operation) error"
        r"|NCCL error|Failed to load NCCL library"
        r"|ncclCommInit\w* failed|NCCL WARN .*(?:[Ff]ail|[Ee]rror|[Tt]imeout|[Aa]bort)|CUDA error: (?!out of memory)"
        r"|HTTPError|\b5\d\d Server Error|Internal Server Error|\bInvalid (?:object|request|argument)s?\b",
        anchors=("NET/IB", "IBV_WC", "ibv_", "mlx5", "retry counter", " error", "NCCL", "rror", "Invalid"),
        retriable_by="sync_transient",
        hint_by="sync_failure_hint",
        phase_by="nccl_phase",
        when="sync_context",
        deep=True,
    ),
    # ------------------------------------------------------------ vllm (crash)
    Rule(
        name="vllm_crash",
        cls=C.VLLM,
        pattern=r"EngineDeadError|Engine loop has died|EngineCore encountered an issue|Got fatal signal from worker processes"
        r"|\bEngineCore\w* (?:died|dead)|Background loop has errored already|\bEngineGenerateError\b",
        anchors=("rror", "died", "atal"),
        retriable_by="not_at_startup",
        hint_by="vllm_crash_hint",
        deep=True,
    ),
    # ------------------------------------------------------------ reward_remote (server, reward code)
    Rule(
        name="reward_request",
        cls=C.REWARD_REMOTE,
        pattern=r"Request error, please check|Request error for \d+ times|Failed to fetch reward from remote RM",
        anchors=("rror", "ailed"),
        retriable=True,
        hint="the reward server at `models.reward_remote_url` did not answer (it must be reachable from every node): "
        "start it or fix the address, then resume",
        phase_by="reward_phase",
    ),
    Rule(
        name="reward_server",
        cls=C.REWARD_REMOTE,
        # the reward / judge server timing out or refusing, seen by its HTTP client (openai, httpx, requests, aiohttp)
        pattern=r"\b(?:openai\.)?(?:APITimeoutError|APIConnectionError|InternalServerError|RateLimitError|APIStatusError"
        r"|BadRequestError|AuthenticationError|PermissionDeniedError|UnprocessableEntityError)\b"
        r"|\bhttpx\.(?:\w*Timeout|ConnectError|RemoteProtocolError|ReadError)\b|aiohttp\.client_exceptions\.\w+"
        r"|\b(?:ReadTimeout|ConnectTimeout|NewConnectionError|ConnectionRefusedError|ServerDisconnectedError)\b"
        r"|Max retries exceeded with url|Connection refused|Request timed out|\basyncio\.(?:exceptions\.)?TimeoutError\b",
        anchors=("rror", "imeout", "Max retries", "refused", "timed out"),
        retriable_by="reward_server_retriable",
        hint="the reward / judge server (`models.reward_remote_url`, or the API the reward code calls) did not answer "
        "in time or refused: check it is up and reachable from every node, then resume",
        phase_by="reward_server_phase",
        when="reward_context",
    ),
    Rule(
        name="reward_http_frames",
        cls=C.REWARD_REMOTE,
        pattern=r'File "[^"]*/(?:requests|httpx|urllib3|aiohttp|openai)/[^"]*"',
        anchors=('File "',),
        retriable_by="reward_server_retriable",
        hint="the reward code's call to its server failed (see the evidence): check the server is up and reachable from "
        "every node (`models.reward_remote_url`)",
        phase_by="reward_server_phase",
        when="reward_frames_before",
    ),
    Rule(
        name="reward_traceback",
        cls=C.REWARD_REMOTE,
        pattern=r"\b\w*reward_f(?:n|unc)\w*\(",
        anchors=("reward_f",),
        retriable=False,
        hint="the custom reward function raised: fix the file `models.reward_func` names",
        when="after_frame",
    ),
    # ------------------------------------------------------------ unknown, with evidence
    Rule(
        name="submit_agent",
        cls=C.UNKNOWN,
        pattern=r"No available agent to submit job",
        anchors=("rror",),
        retriable=True,
        hint="the dashboard's job agent was not ready: submit again",
        phase="startup",
    ),
    Rule(
        name="nccl_crash",
        cls=C.NCCL,
        pattern=r"\*\*\* SIG(?:SEGV|ABRT|BUS) received|Fatal Python error: (?:Segmentation fault|Aborted)|Segmentation fault",
        anchors=("SIG", "atal", "egmentation"),
        retriable=False,
        hint="a process crashed inside NCCL (see the evidence): match NCCL / torch / vLLM to OpenRLHF's pins "
        "(`rlhf-launch versions`) and check the NCCL settings in `runtime_env.env_vars`",
        when="nccl_stack",
    ),
    Rule(
        name="vllm_segfault",
        cls=C.VLLM,
        pattern=r"\*\*\* SIG(?:SEGV|ABRT|BUS) received|Fatal Python error: (?:Segmentation fault|Aborted)|Segmentation fault",
        anchors=("SIG", "atal", "egmentation"),
        retriable_by="mid_run",
        hint_by="vllm_crash_hint",
        when="vllm_stack",
    ),
    Rule(
        name="vllm_port_race",
        cls=C.VLLM,
        pattern=r"EADDRINUSE|Address already in use",
        anchors=("EADDRINUSE", "already in use"),
        retriable=True,
        hint="a vLLM engine lost the port it picked to another process (a start-up race between engines): resubmitting "
        "passes; stagger engine start-up if it recurs",
        phase="model_load",
        when="vllm_nearby",
    ),
    Rule(
        name="cuda_fault",
        cls=C.UNKNOWN,
        pattern=r"CUDA error: (?!out of memory)|device-side assert(?!ions)|an illegal memory access|DeferredCudaCallError"
        r"|Assertion `.*` failed\.|Fatal Python error|Segmentation fault"
        r"|\*\*\* SIG(?:SEGV|ABRT|BUS|FPE)|received signal SIG(?:SEGV|ABRT|BUS)",
        anchors=("rror", "ailed", "atal", "egmentation", "SIG"),
        retriable_by="after_a_step",
        hint_by="unknown_fault_hint",
        phase_by="unknown_fault_phase",
        deep=True,
    ),
    # ------------------------------------------------------------ host_oom (weak: Ray's generic worker death)
    Rule(
        name="worker_sigkill",
        cls=C.HOST_OOM,
        pattern=r"(?<!process is )killed by SIGKILL|died with <Signals\.SIGKILL|exit code 137\b|exitcode: -9\b"
        r"|(?i:exits? with return ?code ?=? ?-9)\b",
        anchors=("SIG", "code 137", "exitcode: -9", "code = -9", "code -9", "code=-9"),
        retriable_by="host_oom_retriable",
        hint_by="worker_sigkill_hint",
        deep=True,
    ),
    Rule(
        name="worker_system_error",  # Ray's generic worker death (the OOM killer its first guess), unless a collective failed first
        cls=C.HOST_OOM,
        pattern=r"Worker exit type: SYSTEM_ERROR",
        anchors=("SYSTEM_ERROR",),
        retriable_by="host_oom_retriable",
        hint_by="worker_sigkill_hint",
        when="no_collective_failure_before",
        deep=True,
    ),
    # ------------------------------------------------------------ nccl
    Rule(
        name="nccl_error",
        cls=C.NCCL,
        pattern=r"Watchdog caught collective operation timeout|Some NCCL operations have failed or timed out|(?i:NCCL error)"
        r"|nccl(?:Remote|Internal|System|UnhandledCuda|InvalidUsage|InvalidArgument)Error|DistBackendError|NCCL communicator was aborted"
        r"|failure detected by watchdog|Process group watchdog thread terminated|Exception raised from checkTimeout"
        r"|Timeout at NCCL work|due to collective timeout|Received a (?:global )?dump signal"
        r"|watchdog got stuck|Heartbeat monitor timed out|Timed out waiting \d+ ?ms for (?:recv|send) operation"
        r"|NET/IB ?: Got completion|IBV_WC_\w+_ERR|\bibv_\w+ (?:failed|error)|mlx5\w*:.*(?:[Ee]rror|CQE|syndrome)"
        r"|transport retry counter exceeded|catastrophic error|IBV_EVENT_\w+_ERR"
        r"|gloo/transport/\S+\] (?:Connection closed by peer|Connection reset by peer|Timed out)",
        anchors=(
            "NCCL",
            "nccl",
            "rror",
            "watchdog",
            "checkTimeout",
            "collective timeout",
            "dump signal",
            "gloo/transport",
            "eartbeat monitor",
            "Timed out waiting",
            "IBV_WC",
            "ibv_",
            "mlx5",
            "retry counter",
        ),
        retriable_by="nccl_retriable",
        hint_by="nccl_hint",
        phase_by="nccl_phase",
        exclude=r"destroy_process_group\(\) was not called",
    ),
    Rule(
        name="c10d_timeout",
        cls=C.NCCL,
        pattern=r"client socket has timed out after \d+s while trying to connect to|TCPStore\b.*(?:timed out|Timeout|reset)"
        r"|client socket has failed to connect to"
        r"|\bDistStoreError\b|waiting for workers\. \d+/\d+ workers joined|\bRendezvous\w*(?:Connection|Timeout|Closed)Error\b"
        r"|\[c10d\].*timed out after \d+ ?ms|server socket has failed to listen|\bDistNetworkError\b",
        anchors=("timed out", "TCPStore", "rror", "waiting for workers", "failed to listen", "failed to connect"),
        retriable_by="rendezvous_retriable",
        hint_by="nccl_hint",
        phase_by="nccl_phase",
    ),
    Rule(
        name="nccl_warn",
        cls=C.NCCL,
        # a failing call (`init.cc:1815 -> 5`) or a failure word; not the harmless plugin notices
        pattern=r"(?m)NCCL WARN (?!NET/Plugin|.*Could not find)"
        r"(?:.*-> \d+[ \t]*$|.*(?:[Ff]ail|[Ee]rror|[Tt]ime(?:d )?out|[Aa]bort|[Uu]nhandled|completion|[Cc]losed|[Rr]eset by))",
        anchors=("NCCL",),
        retriable_by="nccl_retriable",
        hint_by="nccl_hint",
        phase_by="nccl_phase",
    ),
    # ------------------------------------------------------------ weak: warnings and waits, only when nothing else explains the end
    Rule(
        name="placement_infeasible",  # vLLM warns, then waits for a placement group that never comes
        cls=C.CONFIG,
        pattern=r"required GPUs exceeds the total number of available GPUs|(?:exceeds|more than) the (?:total )?number of available GPUs",
        anchors=("GPUs",),
        retriable=False,
        hint="the layout asks for more GPUs than its placement group (or the cluster) holds: fix `placement.*` "
        "(`rlhf-launch plan` shows the GPUs per role)",
        phase="placement",
    ),
    Rule(
        name="vllm_prompt_too_long",
        cls=C.VLLM,
        pattern=r"Input prompt \(\d+ tokens\) is too long and exceeds limit of \d+"
        r"|prompt \(length \d+\) is longer than the maximum model length|(?i:prompt|input) .*(?:longer|larger) than (?:the )?"
        r"(?:maximum model length|max_model_len|max model len)|maximum context length is \d+ tokens\. However, you requested",
        anchors=("too long", "longer than", "larger than", "maximum context length"),
        retriable=False,
        hint="prompts are longer than vLLM's max model length: `data.prompt_max_len` + `data.generate_max_len` must fit it "
        "(shorten them, or give vLLM a longer max length)",
        phase="generate",
    ),
    Rule(
        name="vllm_server_unreachable",
        cls=C.VLLM,
        pattern=r"vllm_client\b.*(?:not up|[Rr]etrying|refused|[Tt]imed? ?out|unreachable)"
        r"|(?i:vllm) server (?:is )?(?:not (?:up|reachable|available|responding)|unreachable)",
        anchors=("vllm_client", "server"),
        retriable=False,
        hint="the trainer cannot reach its vLLM generation server: start it first and check its host / port",
        phase="startup",
    ),
    # ------------------------------------------------------------ fallbacks: the exception type alone decides
    # (only when no rule above matched: the message may be worded in a way no rule knows)
    Rule(
        name="type_http_client",
        cls=C.REWARD_REMOTE,
        # an HTTP client timing out or refused inside the run: in an RLHF job the reward / judge server
        pattern=r"\bopenai\.(?:APITimeoutError|APIConnectionError|InternalServerError|RateLimitError|APIStatusError|BadRequestError"
        r"|AuthenticationError|PermissionDeniedError|NotFoundError|UnprocessableEntityError)\b"
        r"|\bhttpx\.(?:\w*Timeout|ConnectError|RemoteProtocolError|ReadError|HTTPStatusError)\b"
        r"|\baiohttp\.(?:client_exceptions\.)?(?:ServerTimeoutError|ClientConnectorError|ServerDisconnectedError|ClientResponseError"
        r"|ClientOSError|ConnectionTimeoutError|SocketTimeoutError)\b"
        r"|\brequests\.exceptions\.(?:ReadTimeout|ConnectTimeout|ConnectionError|Timeout|HTTPError)\b"
        r"|\bhttpcore\.(?:\w*Timeout|ConnectError|RemoteProtocolError|ReadError)\b"
        r"|\burllib3\.exceptions\.(?:ReadTimeoutError|ConnectTimeoutError|MaxRetryError|NewConnectionError|ProtocolError)\b"
        # an OpenAI-compatible server's error body (vLLM, SGLang, lmdeploy serving the reward / judge model)
        r'|"object": ?"error".*"type": ?"\w+Error"',
        anchors=("openai.", "httpx.", "aiohttp.", "requests.exceptions.", '"object"', "httpcore.", "urllib3.exceptions."),
        retriable_by="reward_server_retriable",
        hint="an HTTP call from the run (the reward / judge server, or an API the reward code calls) timed out or was refused: "
        "check the server (`models.reward_remote_url`) is up and reachable from every node, then resume",
        phase_by="reward_server_phase",
        when="no_other_client",
    ),
    Rule(
        name="type_ray_oom",
        cls=C.HOST_OOM,
        # Ray's own OutOfMemoryError (its memory monitor), raised or wrapped in a task error; a CUDA OOM
        # (torch's OutOfMemoryError wraps the same way) matched cuda_oom above by its message
        pattern=r"\bray\.exceptions\.OutOfMemoryError\b|\bray\.exceptions\.ObjectStoreFullError\b|RayTaskError\(OutOfMemoryError\)",
        anchors=("ray.exceptions.", "RayTaskError(OutOfMemoryError)"),
        retriable_by="host_oom_retriable",
        hint_by="host_oom_hint",
    ),
    Rule(
        name="type_torch_dist",
        cls=C.NCCL,
        pattern=r"\btorch\.distributed\.(?:DistBackendError|DistNetworkError|DistStoreError|DistError)\b|\bc10::Dist\w*Error\b",
        anchors=("torch.distributed.", "c10::Dist"),
        retriable_by="nccl_retriable",
        hint_by="nccl_hint",
        phase_by="nccl_phase",
    ),
    Rule(
        name="vllm_actor_init",  # Ray's death cause: the engine actor's constructor raised (its cause, if known, matched above)
        cls=C.VLLM,
        pattern=r"creation task.*ray::(?:\w*LLMRayActor|RolloutRayActor|\w*vLLM\w*|\w*Vllm\w*)\.__init__\(\)",
        anchors=("creation task",),
        retriable=False,
        hint="a vLLM engine actor failed in its constructor: its root cause is in the actor's lines above the evidence",
        phase="model_load",
    ),
    Rule(
        name="type_actor_unavailable",  # Ray's ActorUnavailableError: the actor's node or process is unreachable
        cls=C.NODE_LOST,
        pattern=r"\bActorUnavailableError\b|The actor \w+ is unavailable\b",
        anchors=("ActorUnavailable", "is unavailable"),
        retriable=True,
        hint_by="node_lost_hint",
    ),
    Rule(
        name="nccl_init_frame",  # a traceback cut inside NCCL's communicator set-up
        cls=C.NCCL,
        pattern=r'File "[^"]+", line \d+, in ncclCommInit\w*',
        anchors=("ncclCommInit",),
        retriable=False,
        hint_by="nccl_hint",
        phase="model_load",
    ),
    Rule(
        name="type_vllm_engine",
        cls=C.VLLM,
        pattern=r"\bvllm\.[\w.]*exceptions\.\w*Engine\w*Error\b",
        anchors=("vllm.",),
        retriable_by="not_at_startup",
        hint_by="vllm_crash_hint",
    ),
)

# When no rule matched: the last exception line (and Ray's job failure line) is the evidence.
FALLBACK_EXCEPTION = re.compile(r"\b(?:[\w.]+\.)?\w*(?:Error|Exception)\b(?:\([\w.]*\))?: \S|Job '[\w-]+' failed|\bTraceback \(most recent")
FALLBACK_ANCHORS = (b"rror", b"xception", b"failed", b"Traceback")

# Beyond the tail only lines holding one of these are read (each anchor costs a pass over
# the bytes: ~0.1 s per 100 MB): every deep rule's usual line has one (`...Error`, vLLM's
# and Ray's `ERROR`, out of memory, dead / died nodes and actors, the kernel's Xid lines, a
# raylet's end, InfiniBand completion errors).
DEEP_ANCHORS = (b"rror", b"ERROR", b"memory", b"dead", b"died", b"Xid", b"fallen off", b"Raylet", b"NET/IB")


def _check(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    names = [rule.name for rule in rules]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"rule names used twice: {', '.join(twice)}")
    return rules


def _minimal(anchors: list[bytes]) -> tuple[bytes, ...]:
    """Drop anchors that contain another anchor (the shorter one finds their lines too)."""
    kept: list[bytes] = []
    for anchor in sorted(set(anchors), key=len):
        if not any(k in anchor for k in kept):
            kept.append(anchor)
    return tuple(kept)


RULES = _check(RULES)
ALL_ANCHORS = _minimal([a for rule in RULES for a in rule.needles] + list(FALLBACK_ANCHORS) + [b"[ray state]"])
DEEP_RULES = tuple(rule for rule in RULES if rule.deep)
