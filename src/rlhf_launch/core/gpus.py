"""GPU types as data: what the step-time estimate (core/estimate.py) and the memory plan read
from `cluster.gpu`. Pure.

Each figure's source is beside it. Peak bf16 TFLOP/s is the dense figure of the vendor's
datasheet (the "with sparsity" figure halved where only that one is printed). Memory is what
`nvidia-smi --query-gpu=memory.total` reports, in GiB (MiB / 1024): a little under the
marketed GB. NVLink is the datasheet's total per GPU (both directions); the estimate uses
half of it per direction. Inter-node is per GPU, for the usual build of that GPU's servers
(one NIC per GPU: HDR 200 Gb/s for A100/A800 systems, NDR 400 Gb/s for Hopper and Blackwell):
a typical figure, not a datasheet one, marked "typical"; set your own by naming a close type
or by the calibration of a measured run (fit --from, issue 30).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class GpuType:
    name: str
    bf16_tflops: float  # dense bf16 tensor-core peak, TFLOP/s
    hbm_gbps: float  # memory bandwidth, GB/s
    memory_gib: float  # usable memory, GiB
    nvlink_gbps: float  # GPU-to-GPU in a node, GB/s, both directions (PCIe where there is no NVLink)
    internode_gbps: float  # per GPU between nodes, GB/s, one direction (typical)
    pcie_gbps: float = 32.0  # host <-> GPU, GB/s one direction (PCIe Gen4 x16: 32; Gen5: 64)
    source: str = ""


# fmt: off
GPUS: tuple[GpuType, ...] = (
    GpuType(
        name="A100-40GB",
        bf16_tflops=312, hbm_gbps=1555, memory_gib=40.0,  # NVIDIA A100 datasheet (SXM4 40GB): 312 TF bf16, 1,555 GB/s
        nvlink_gbps=600, internode_gbps=25, pcie_gbps=32,  # NVLink 3: 600 GB/s; HDR 200 Gb/s per GPU (typical); PCIe Gen4
        source="NVIDIA A100 Tensor Core GPU datasheet (SXM4 40GB)",
    ),
    GpuType(
        name="A100-80GB",
        bf16_tflops=312, hbm_gbps=2039, memory_gib=80.0,  # A100 datasheet (SXM4 80GB): 312 TF, 2,039 GB/s; nvidia-smi 81,920 MiB
        nvlink_gbps=600, internode_gbps=25, pcie_gbps=32,
        source="NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB)",
    ),
    GpuType(
        name="A800-80GB",
        bf16_tflops=312, hbm_gbps=2039, memory_gib=80.0,  # A800 SXM4 80GB product brief: A100 compute and memory,
        nvlink_gbps=400, internode_gbps=25, pcie_gbps=32,  # NVLink cut to 400 GB/s
        source="NVIDIA A800 SXM4 80GB product brief",
    ),
    GpuType(
        name="H100-80GB",
        bf16_tflops=989, hbm_gbps=3350, memory_gib=79.6,  # H100 datasheet (SXM5): 1,979 TF bf16 with sparsity -> 989 dense,
        nvlink_gbps=900, internode_gbps=50, pcie_gbps=64,  # 3.35 TB/s; NVLink 4 900 GB/s; NDR 400 Gb/s (typical); nvidia-smi 81,559 MiB
        source="NVIDIA H100 Tensor Core GPU datasheet (SXM5)",
    ),
    GpuType(
        name="H800-80GB",
        bf16_tflops=989, hbm_gbps=3350, memory_gib=79.6,  # H800 SXM5: H100 compute and memory,
        nvlink_gbps=400, internode_gbps=50, pcie_gbps=64,  # NVLink cut to 400 GB/s
        source="NVIDIA H800 SXM5 product brief",
    ),
    GpuType(
        name="H20",
        bf16_tflops=148, hbm_gbps=4000, memory_gib=95.6,  # H20 product brief: 148 TF bf16 dense, 4.0 TB/s, 96 GB HBM3
        nvlink_gbps=900, internode_gbps=50, pcie_gbps=64,  # NVLink 900 GB/s; nvidia-smi 97,871 MiB
        source="NVIDIA H20 product brief",
    ),
    GpuType(
        name="H200",
        bf16_tflops=989, hbm_gbps=4800, memory_gib=140.4,  # H200 datasheet (SXM): 989 TF bf16 dense, 4.8 TB/s, 141 GB;
        nvlink_gbps=900, internode_gbps=50, pcie_gbps=64,  # NVLink 900 GB/s; nvidia-smi 143,771 MiB
        source="NVIDIA H200 Tensor Core GPU datasheet (SXM)",
    ),
    GpuType(
        name="B200",
        bf16_tflops=2250, hbm_gbps=8000, memory_gib=179.1,  # HGX B200 datasheet: 2.25 PF bf16 dense per GPU, 8 TB/s,
        nvlink_gbps=1800, internode_gbps=50, pcie_gbps=64,  # 180 GB; NVLink 5 1.8 TB/s; nvidia-smi 183,359 MiB
        source="NVIDIA HGX B200 datasheet (per GPU)",
    ),
    GpuType(
        name="L40S",
        bf16_tflops=362, hbm_gbps=864, memory_gib=45.0,  # L40S datasheet: 362 TF bf16 dense (733 sparse), 864 GB/s GDDR6,
        nvlink_gbps=64, internode_gbps=12.5, pcie_gbps=32,  # 48 GB; no NVLink: PCIe Gen4 x16 64 GB/s; 100 Gb/s (typical)
        source="NVIDIA L40S datasheet",
    ),
    GpuType(
        name="A10",
        bf16_tflops=125, hbm_gbps=600, memory_gib=22.5,  # A10 datasheet: 125 TF bf16 dense (250 sparse), 600 GB/s, 24 GB;
        nvlink_gbps=64, internode_gbps=12.5, pcie_gbps=32,  # PCIe Gen4 only; 100 Gb/s (typical)
        source="NVIDIA A10 datasheet",
    ),
    GpuType(
        name="H100-PCIe",
        bf16_tflops=756, hbm_gbps=2000, memory_gib=79.6,  # H100 datasheet (PCIe): 1,513 TF with sparsity -> 756 dense, 2 TB/s;
        nvlink_gbps=600, internode_gbps=50, pcie_gbps=64,  # NVLink bridge 600 GB/s
        source="NVIDIA H100 Tensor Core GPU datasheet (PCIe)",
    ),
    GpuType(
        name="MI300X",
        bf16_tflops=1307, hbm_gbps=5300, memory_gib=191.5,  # AMD Instinct MI300X datasheet: 1,307 TF bf16 dense, 5.3 TB/s,
        nvlink_gbps=896, internode_gbps=50, pcie_gbps=64,  # 192 GB; Infinity Fabric 896 GB/s peak aggregate
        source="AMD Instinct MI300X datasheet",
    ),
)
# fmt: on

# Names people write for the same part (lower case): only where one part is meant.
ALIASES = {
    "h100": "H100-80GB",
    "h100-sxm": "H100-80GB",
    "h100-sxm5": "H100-80GB",
    "h800": "H800-80GB",
    "a800": "A800-80GB",
    "h200": "H200",
    "h20": "H20",
    "b200": "B200",
    "l40s": "L40S",
    "a10": "A10",
    "mi300x": "MI300X",
}

_BY_NAME = {g.name.lower(): g for g in GPUS}


def names() -> list[str]:
    return [g.name for g in GPUS]


def find(name: str) -> GpuType | None:
    """The GPU type called `name` (any case; a few common short names), or None."""
    key = name.strip().lower()
    return _BY_NAME.get(key) or _BY_NAME.get(ALIASES.get(key, "").lower())


def get(name: str) -> GpuType:
    """The GPU type called `name`; ValueError listing the known names otherwise."""
    gpu = find(name)
    if gpu is None:
        raise ValueError(f"unknown GPU {name!r}; known: {', '.join(names())}")
    return gpu


def from_smi(product: str) -> GpuType | None:
    """The type of an `nvidia-smi --query-gpu=name` product name (e.g. 'NVIDIA H100 80GB HBM3',
    'NVIDIA A100-SXM4-40GB', 'NVIDIA H20'), or None when it is none of the table's."""
    text = product.upper().replace("NVIDIA", "").replace("TESLA", "").strip()
    compact = text.replace(" ", "").replace("-", "")
    if "H100" in compact:
        return find("H100-PCIe") if "PCIE" in compact else find("H100-80GB")
    for family in ("A100", "A800"):
        if family in compact:
            return find(f"{family}-40GB") if "40GB" in compact else find(f"{family}-80GB")
    for name in ("H800", "H200", "B200", "L40S", "MI300X", "H20", "A10"):
        if name in compact and not (name == "A10" and compact.startswith("A100")):
            return find(name)
    return None


# The size the memory plan assumes when neither cluster.gpu nor cluster.gpu_memory_gb is set,
# and the type the estimate assumes then: 80 GB parts are the common case of OpenRLHF's docs.
DEFAULT_GPU = "A100-80GB"
