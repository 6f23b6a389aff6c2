"""node_lost names the node (issue 28): from the log (Ray's coloured `(raylet, ip=...)` prefix,
a RayActorError block's `ip:` with its `Node Id:`), else from Ray's node table; no evidence
line holds terminal escapes."""

from __future__ import annotations

from rlhf_launch.core.nodes import DeadNode
from rlhf_launch.diagnose import FailureClass, classify
from rlhf_launch.runs.evidence import Evidence, name_lost_node

# Ray colours the prefixes it puts on worker output (`\x1b[36m(raylet, ip=...)\x1b[0m`);
# the message itself: ray-project/ray#29412 (tests/data/diagnose/corpus.yaml).
RAYLET = (
    "\x1b[36m(raylet, ip=10.0.0.31)\x1b[0m [2022-10-27 16:30:03,850 E 98551 98592] (raylet) agent_manager.cc:134: "
    "The raylet exited immediately because the Ray agent failed. The raylet fate shares with the agent.\n"
)
# ray-project/ray#34971, as a coloured trainer actor prints it
ACTOR_BLOCK = (
    "\x1b[36m(PPOTrainer pid=4182)\x1b[0m ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.\n"
    "\x1b[36m(PPOTrainer pid=4182)\x1b[0m \tclass_name: PolicyModelActor\n"
    "\x1b[36m(PPOTrainer pid=4182)\x1b[0m \tip: 10.0.0.42\n"
    "\x1b[36m(PPOTrainer pid=4182)\x1b[0m The actor is dead because its node has died. "
    "Node Id: 2eea4cfb179ce7951c4bbdd5ba3029c3a4dcf7cb66db376084f7c270\n"
)
# ray-project/ray#44680: Ray's own wording with the node left out
UNNAMED = (
    "2024-04-11 16:38:16,464\tWARNING worker.py:2037 -- The node with node id: <node id> and address: <adress> and node name: "
    "<node name> has been marked dead because the detector has missed too many heartbeats from it.\n"
)


def test_a_coloured_raylet_prefix_names_the_node_and_the_evidence_is_plain():
    found = classify(RAYLET)
    assert found.cls is FailureClass.NODE_LOST
    assert found.hint.startswith("node 10.0.0.31 ")
    assert found.evidence and not any("\x1b" in line for line in found.evidence)
    assert found.evidence[0].startswith("(raylet, ip=10.0.0.31) ")


def test_a_node_id_is_named_with_the_ip_of_its_block():
    found = classify(ACTOR_BLOCK)
    assert found.cls is FailureClass.NODE_LOST
    assert found.hint.startswith("node 10.0.0.42 (node id 2eea4cfb179c) ")
    assert not any("\x1b" in line for line in found.evidence)


def test_ray_s_node_table_names_a_node_the_log_does_not():
    dead = [DeadNode("3f2a1b2c" + "0" * 48, "10.0.0.4", gpus=8.0, died_at=100.0, reason="health check failed")]
    found = Evidence("r-1", log=UNNAMED, dead_nodes=dead).diagnosis()
    assert found.cls is FailureClass.NODE_LOST
    assert found.hint.startswith("node 10.0.0.4 (node id 3f2a1b2c0000) ")
    assert name_lost_node("node 3f2a1b2c0000 died or was shut down: x", dead).startswith("node 10.0.0.4 (node id 3f2a1b2c0000) died")
    assert name_lost_node("node 10.9.9.9 died: x", dead) == "node 10.9.9.9 died: x"  # another node: the log's word stands
