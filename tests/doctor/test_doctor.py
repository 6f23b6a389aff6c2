"""doctor's judgement (doctor/checks.py) on node facts shaped as the node probe reports them,
and the probe's own look at this machine (cluster/probes/doctor.py `facts`): no Ray."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from rlhf_launch.cluster.doctor import probe_code
from rlhf_launch.core.config import load_config
from rlhf_launch.core.launch import prepare
from rlhf_launch.doctor import checks, parse_skip, spec
from rlhf_launch.doctor.checks import Node, Status
from rlhf_launch.errors import UserError

from conftest import ROOT

STANDIN = ROOT / "tests" / "standin"
PROBE = probe_code()  # the node probe as the cluster runs it
GIB = 1024**3


def launch_of(tmp_path: Path, *overrides: str):
    cfg = load_config(
        ROOT / "configs" / "tiny-1node.yaml",
        [
            f"models.actor={STANDIN / 'models' / 'tiny-actor'}",
            f"models.reward={STANDIN / 'models' / 'tiny-rm'}",
            f"data.prompt_dataset={STANDIN / 'data' / 'prompts.jsonl'}",
            f"checkpoint.ckpt_path={tmp_path / 'ckpt'}",
            f"runtime_env.env_vars.PYTHONPATH={STANDIN}",
            *overrides,
        ],
    )
    return prepare(cfg)


def local_facts(launch, **spec_changes) -> dict:
    """What the node probe reports on this machine, for this launch."""
    request = spec.build(launch, nonce="n0", version="test")
    request.update(spec_changes)
    return PROBE["facts"](request)


def nodes_of(*facts: dict) -> list[Node]:
    return [Node(f"node{i:02d}" + "0" * 30, f"10.0.0.{i + 1}", f) for i, f in enumerate(facts)]


def judge(launch, *facts, skip=()):
    return checks.judge(spec.needs(launch), nodes_of(*facts), skip=skip)


def statuses(report, check):
    return [report.cells[(check, n.node_id)] for n in report.nodes]


def failing(report, check):
    return [f for f in report.findings if f.check == check and f.status is Status.FAIL]


# ---------------------------------------------------------------- the probe, on this machine


def test_the_probe_reads_this_machine_without_importing_the_packages(tmp_path):
    launch = launch_of(tmp_path)
    facts = local_facts(launch)
    json.dumps(facts)  # it travels as JSON
    assert facts["packages"]["vllm"]["version"] == "0.29.0"  # the stand-in image's metadata
    assert facts["packages"]["openrlhf"]["module"] and facts["packages"]["openrlhf"]["version"] is None
    assert facts["models"]["actor"]["kind"] == "local" and facts["models"]["actor"]["config"]
    assert facts["models"]["actor"]["chat_template"] is True
    assert facts["datasets"]["data.prompt_dataset"][0]["missing_keys"] == []
    assert "lo" in facts["interfaces"] and "127.0.0.1" in facts["addresses"]["lo"]
    assert set(facts["addresses"]) <= set(facts["interfaces"])
    assert facts["memory"]["total"] > 0 and facts["shm"]["bytes"] > 0
    assert facts["disk"]["writable"] and facts["disk"]["free_bytes"] > 0
    assert facts["seconds"] < 5


def test_a_healthy_node_passes_every_check_it_can_report(tmp_path):
    launch = launch_of(tmp_path)
    facts = local_facts(launch)
    report = judge(launch, facts, copy.deepcopy(facts))
    assert report.ok, [f.text() for f in report.failed()]
    for check in ("models", "data", "shm", "memory"):
        assert set(statuses(report, check)) == {Status.PASS}, check


def test_missing_shard_and_missing_tokenizer_are_named(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text((STANDIN / "models" / "tiny-actor" / "config.json").read_text())
    (model / "model-00001-of-00002.safetensors").write_bytes(b"x")
    weight_map = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    launch = launch_of(tmp_path, f"models.actor={model}")
    report = judge(launch, local_facts(launch))
    texts = [f.found for f in failing(report, "models")]
    assert any("model-00002-of-00002.safetensors" in t for t in texts), texts
    assert any("no tokenizer" in t for t in texts), texts
    assert any("no chat template" in t for t in texts), texts


def test_a_model_on_one_node_only_fails_on_the_other(tmp_path):
    launch = launch_of(tmp_path)
    good = local_facts(launch)
    bad = copy.deepcopy(good)
    bad["models"]["actor"] = {"kind": "local", "path": "/models/x", "exists": False}
    report = judge(launch, good, bad)
    [finding] = failing(report, "models")
    assert finding.node == "10.0.0.2" and "does not exist on this node" in finding.found
    assert statuses(report, "models") == [Status.PASS, Status.FAIL]


def test_dataset_records_without_the_input_key(tmp_path):
    data = tmp_path / "p.jsonl"
    data.write_text(json.dumps({"prompt": "hi"}) + "\n")
    launch = launch_of(tmp_path, f"data.prompt_dataset={data}", "data.label_key=answer")
    [finding] = failing(judge(launch, local_facts(launch)), "data")
    assert "context_messages" in finding.found and "answer" in finding.found and "prompt" in finding.found


def test_software_other_release_between_nodes_and_pins(tmp_path):
    launch = launch_of(tmp_path)
    good = local_facts(launch)
    good["packages"]["openrlhf"] = {"version": "0.11.2", "module": True}
    other = copy.deepcopy(good)
    other["packages"]["openrlhf"] = {"version": "0.9.1", "module": True}
    other["packages"]["vllm"] = {"version": "0.8.5", "module": True}
    report = judge(launch, good, copy.deepcopy(good), other)
    found = [f for f in failing(report, "software")]
    assert {f.node for f in found} == {"10.0.0.3"}, [f.text() for f in found]
    assert any("openrlhf 0.9.1 is installed" in f.found for f in found)
    assert any(f.found.startswith("vllm 0.8.5, but") for f in found)
    warned = [f for f in report.findings if f.check == "software" and f.status is Status.WARN]
    assert any("vllm 0.8.5 (openrlhf 0.11.2 pins 0.29.0)" in f.found for f in warned)


def test_a_package_missing_fails_and_a_broken_import_fails(tmp_path):
    launch = launch_of(tmp_path)
    facts = local_facts(launch)
    facts["packages"]["deepspeed"] = {"version": None, "module": False}
    facts["imports"] = {"flash-attn": "ImportError: flash_attn_2_cuda.so: undefined symbol: _ZN3c105ErrorC2E"}
    texts = [f.found for f in failing(judge(launch, facts), "software")]
    assert "deepspeed is not installed" in texts
    assert any("undefined symbol" in t for t in texts)


@pytest.mark.parametrize(
    ("value", "names", "selects"),
    [
        ("eth0", ["eth0", "lo"], True),
        ("eth", ["eth0", "lo"], True),  # a prefix
        ("=eth", ["eth0", "lo"], False),  # exact
        ("ib0,eth", ["eth1"], True),
        ("^lo,docker", ["lo", "docker0"], False),
        ("^lo", ["lo", "eth0"], True),
        ("ib9", ["eth0", "lo"], False),
    ],
)
def test_nccl_interface_lists(value, names, selects):
    assert bool(checks._matches(value, names)[0]) is selects


def test_interfaces_hcas_and_unroutable_addresses(tmp_path):
    launch = launch_of(tmp_path, "runtime_env.env_vars.NCCL_SOCKET_IFNAME=ib9")
    facts = local_facts(launch)
    [finding] = failing(judge(launch, facts), "network")
    assert "NCCL_SOCKET_IFNAME=ib9 selects no interface" in finding.found
    ib = copy.deepcopy(facts)
    ib["env"] = {"NCCL_IB_HCA": "mlx5_4"}
    ib["hcas"] = ["mlx5_0", "mlx5_1"]
    [finding] = failing(judge(launch, ib), "network")
    assert "mlx5_4" in finding.found and "mlx5_0" in finding.found
    none = copy.deepcopy(ib)
    none["hcas"] = []
    assert not failing(judge(launch, none), "network")  # no IB at all: NCCL uses sockets, a warning
    # nodes on two machines, one of them advertising loopback
    a, b = copy.deepcopy(none), copy.deepcopy(none)
    a["env"] = b["env"] = {}
    b["host"] = "another-machine"
    nodes = [Node("a" * 32, "127.0.0.1", a), Node("b" * 32, "10.0.0.9", b)]
    report = checks.judge(spec.needs(launch), nodes)
    [finding] = failing(report, "network")
    assert finding.node == "127.0.0.1"
    same_host = [Node("a" * 32, "127.0.0.2", a), Node("b" * 32, "127.0.0.3", copy.deepcopy(a))]
    assert not failing(checks.judge(spec.needs(launch), same_host), "network")  # the local test clusters


def test_small_shm_low_ulimit_and_host_ram(tmp_path):
    launch = launch_of(tmp_path)
    facts = local_facts(launch)
    facts["shm"] = {"bytes": 64 * 1024**2}
    facts["limits"] = {"nofile": 1024, "nproc": None}
    facts["memory"] = {"total": 16.0}
    report = checks.judge(spec.needs(launch), nodes_of(facts), host_need={"node00" + "0" * 30: 120.0})
    assert "64.0 MiB" in failing(report, "shm")[0].found
    assert "ulimit -n is 1024" in failing(report, "limits")[0].found
    assert "16 GiB host RAM, but the plan puts ~120 GiB here" in failing(report, "memory")[0].found


def test_logical_gpus_are_a_warning_not_a_pass(tmp_path):
    launch = launch_of(tmp_path)
    facts = local_facts(launch)
    facts["gpu"] = {"reported": False, "why": "no nvidia-smi on this node"}
    report = judge(launch, facts)
    assert statuses(report, "gpu") == [Status.WARN]
    facts["gpu"] = {"reported": True, "gpus": [{"name": "A100-40GB", "memory_gib": 40.0}]}
    report = judge(launch, facts)
    assert statuses(report, "gpu") in ([Status.FAIL], [Status.WARN])
    assert any("40 GiB" in f.found for f in report.findings if f.check == "gpu")


def test_disk_budget_and_shared_storage(tmp_path):
    launch = launch_of(tmp_path, "cluster.nodes=2")
    facts = local_facts(launch)
    need = dataclass_replace(spec.needs(launch), storage_bytes=2 * 1024**4)
    facts["disk"] = {"base": "/mnt/shared", "writable": True, "free_bytes": 500 * GIB}
    report = checks.judge(need, nodes_of(facts))
    assert "500.0 GiB free at /mnt/shared, but the checkpoints need 2.0 TiB" in failing(report, "disk")[0].found
    a, b = copy.deepcopy(facts), copy.deepcopy(facts)
    nodes = nodes_of(a, b)
    a["shared"] = {"write_error": "", "sees": [nodes[0].node_id, nodes[1].node_id]}
    b["shared"] = {"write_error": "", "sees": [nodes[1].node_id]}
    report = checks.judge(spec.needs(launch), nodes)
    [finding] = failing(report, "shared")
    assert finding.node == "10.0.0.2" and "10.0.0.1" in finding.found and "is not shared" in finding.found


def dataclass_replace(obj, **changes):
    import dataclasses

    return dataclasses.replace(obj, **changes)


def test_a_node_that_does_not_answer_fails_every_check(tmp_path):
    launch = launch_of(tmp_path)
    report = judge(launch, local_facts(launch), {"error": "no answer in 30s"})
    assert not report.ok
    assert [f for f in report.failed() if f.check == "node"][0].node == "10.0.0.2"
    assert all(report.cells[(c, report.nodes[1].node_id)] is Status.FAIL for c in checks.NAMES)


def test_findings_alike_on_many_nodes_are_said_once_naming_them(tmp_path):
    launch = launch_of(tmp_path, "runtime_env.env_vars.NCCL_SOCKET_IFNAME=ib9")
    facts = local_facts(launch)
    report = judge(launch, *(copy.deepcopy(facts) for _ in range(6)))
    [finding] = failing(report, "network")
    assert finding.node.startswith("6 nodes (10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4, ...")


def test_skip_check_names_are_checked():
    assert parse_skip("gpu, shm") == ("gpu", "shm")
    with pytest.raises(UserError, match="unknown check gpus"):
        parse_skip("gpus")


def test_no_secret_travels_to_the_nodes(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    launch = launch_of(tmp_path, "runtime_env.env_vars.HF_TOKEN=hf_secret_value")
    request = spec.build(launch, nonce="n", version="v")
    assert "hf_secret_value" not in json.dumps(request) and "k" * 40 not in json.dumps(request)


def test_the_node_environment_is_the_trainers(tmp_path, monkeypatch):
    monkeypatch.setenv("RLHF_TEST_BASE", "/base")
    env = PROBE["effective_env"]({"PYTHONPATH": "/x:${RLHF_TEST_BASE}", "HF_HOME": "/hf"})
    assert env["PYTHONPATH"] == "/x:/base" and env["HF_HOME"] == "/hf"
    assert os.environ.get("HF_HOME") != "/hf"


def test_a_cpu_only_head_is_not_asked_for_models_or_gpus(tmp_path):
    launch = launch_of(tmp_path)
    facts = local_facts(launch)
    head = copy.deepcopy(facts)
    head["models"]["actor"] = {"kind": "local", "path": "/nowhere", "exists": False}
    head["gpu"] = {"reported": False, "why": "no nvidia-smi on this node"}
    nodes = [Node("h" * 32, "10.0.0.1", head, gpus=0.0), Node("w" * 32, "10.0.0.2", facts, gpus=8.0)]
    report = checks.judge(spec.needs(launch), nodes)
    assert report.cells[("models", "h" * 32)] is Status.NA and report.cells[("gpu", "h" * 32)] is Status.NA
    assert report.cells[("software", "h" * 32)] is not Status.NA  # the driver runs openrlhf there
    assert report.ok


def test_bare_hub_ids_and_dataset_folders_are_read_as_the_trainer_reads_them(tmp_path):
    saved = tmp_path / "saved"  # what datasets' save_to_disk writes
    saved.mkdir()
    (saved / "dataset_info.json").write_text(json.dumps({"features": {}}))
    (saved / "state.json").write_text(json.dumps({"_fingerprint": "x"}))
    (saved / "data-00000-of-00001.arrow").write_bytes(b"ARROW1")
    launch = launch_of(tmp_path, "models.actor=gpt2", f"data.prompt_dataset={saved}")
    facts = local_facts(launch)
    assert facts["models"]["actor"]["kind"] == "hub"  # `gpt2` has no slash: still a hub id
    report = judge(launch, facts)
    assert not failing(report, "data") and not failing(report, "models")


def test_a_local_build_of_the_release_is_not_another_release(tmp_path):
    launch = launch_of(tmp_path)
    facts = local_facts(launch)
    facts["packages"]["openrlhf"] = {"version": "0.11.2+cu128", "module": True}
    assert not failing(judge(launch, facts), "software")
    facts["packages"]["openrlhf"] = {"version": "0.11.1", "module": True}
    assert failing(judge(launch, facts), "software")


def test_a_private_172_address_is_no_failure(tmp_path):
    launch = launch_of(tmp_path)
    a, b = local_facts(launch), local_facts(launch)
    b["host"] = "another-machine"
    nodes = [Node("a" * 32, "172.17.0.5", a), Node("b" * 32, "172.17.0.6", b)]
    assert not failing(checks.judge(spec.needs(launch), nodes), "network")


def test_examine_takes_the_gpus_of_each_node_from_the_snapshot(tmp_path):
    from rlhf_launch.core.placement import NodeFree
    from rlhf_launch.doctor import examine

    launch = launch_of(tmp_path)
    facts = local_facts(launch)
    head = copy.deepcopy(facts)
    head["models"]["actor"] = {"kind": "local", "path": "/nowhere", "exists": False}
    answer = {"h" * 32: {"ip": "10.0.0.1", **head}, "w" * 32: {"ip": "10.0.0.2", **facts}}
    free = [NodeFree("h" * 32, "10.0.0.1", 0.0, 16.0), NodeFree("w" * 32, "10.0.0.2", 8.0, 16.0)]
    report = examine(launch, lambda _request: answer, nodes_free=free)
    assert report.ok and report.cells[("models", "h" * 32)] is Status.NA


# What a GPU node's probe reports: one NIC, loopback, the kernel's traffic-shaping devices (ifb0/1,
# which this machine has too), a Docker bridge and a container's veth, a libvirt bridge, an
# interface holding only a link-local address.
NICS = ["docker0", "enp5s0", "eth0", "ifb0", "ifb1", "lo", "veth1a2b3c", "virbr0", "tun0"]
HELD = {
    "lo": ["127.0.0.1", "::1"],
    "eth0": ["10.0.0.1", "fe80::1"],
    "docker0": ["172.17.0.1"],
    "virbr0": ["192.168.122.1"],
    "enp5s0": ["fe80::2", "169.254.3.4"],
    "veth1a2b3c": ["fe80::3"],
    "tun0": ["10.8.0.5"],
}


def test_the_nccl_fix_suggests_only_interfaces_other_nodes_can_reach(tmp_path):
    launch = launch_of(tmp_path, "runtime_env.env_vars.NCCL_SOCKET_IFNAME=ib0")
    facts = local_facts(launch)
    facts.update(interfaces=NICS, addresses=HELD)
    [finding] = failing(judge(launch, facts), "network")  # node00 is 10.0.0.1, on eth0
    assert "NCCL_SOCKET_IFNAME=ib0 selects no interface" in finding.found
    assert "set NCCL_SOCKET_IFNAME to eth0 " in finding.fix, finding.fix
    for name in ("ifb0", "ifb1", "docker0", "veth", "virbr0", "lo", "enp5s0", "tun0"):
        assert name not in finding.fix, (name, finding.fix)


def test_a_virtual_device_holding_the_ray_address_is_suggested_first():
    node = Node("a" * 32, "10.8.0.5", {"interfaces": NICS, "addresses": HELD})
    assert checks.reachable_interfaces(node) == ["tun0", "eth0"]
    loopback = Node("a" * 32, "127.0.0.2", {"interfaces": NICS, "addresses": {**HELD, "lo": ["127.0.0.1", "127.0.0.2"]}})
    assert checks.reachable_interfaces(loopback)[0] == "lo"  # the local test clusters
    older = Node("a" * 32, "10.0.0.1", {"interfaces": NICS})  # an agent without addresses: by name
    assert checks.reachable_interfaces(older) == ["enp5s0", "eth0"]


def test_deep_imports_every_package_torch_first_and_a_failed_torch_fails_naming_node_and_error(tmp_path):
    """The stand-in image has torch's metadata but no torch module (as a half-removed install):
    `import torch` fails on this machine, and --deep must say so, not pass."""
    launch = launch_of(tmp_path)
    facts = local_facts(launch, deep=True)
    assert facts["packages"]["torch"]["version"] == "2.9.1" and not facts["packages"]["torch"]["module"]
    imports = facts["imports"]
    assert list(imports)[0] == "torch" and set(spec.needs(launch).packages) <= set(imports)
    assert imports["torch"] == "ModuleNotFoundError: No module named 'torch'"
    report = judge(launch, facts, copy.deepcopy(facts))
    failed = [f for f in failing(report, "software") if "import torch" in f.found]
    assert [f.node for f in failed] == ["2 nodes (10.0.0.1, 10.0.0.2)"]  # every node, by name (grouped)
    assert all("(torch) fails: ModuleNotFoundError: No module named 'torch'" in f.found for f in failed)
    assert "pip install --force-reinstall torch" in failed[0].fix
    assert not report.ok


def test_deep_gives_the_probe_time_for_its_imports(tmp_path):
    launch = launch_of(tmp_path)
    assert spec.build(launch, nonce="n", version="v", deep=True)["timeout"] > spec.build(launch, nonce="n", version="v")["timeout"] + 60
