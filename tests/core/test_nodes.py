"""Which node died, when and why, from Ray's node table (core/nodes.py)."""

from __future__ import annotations

import time

from rlhf_launch.core import nodes
from rlhf_launch.util.when import moment

DIED = time.mktime((2025, 5, 1, 12, 3, 41, 0, 0, -1))
NODE_ID = "3f2a1b2c" + "0" * 48


def rows():
    return [
        {"node_id": "a" * 56, "node_ip": "127.0.0.1", "is_head_node": True, "state": "ALIVE", "resources_total": {"GPU": 8.0}},
        {
            "node_id": NODE_ID,
            "node_ip": "127.0.0.4",
            "is_head_node": False,
            "state": "DEAD",
            "state_message": "Unexpected termination: health check failed due to missing too many heartbeats",
            "resources_total": {"GPU": 8.0, "CPU": 16.0},
            "start_time_ms": int((DIED - 600) * 1000),
            "end_time_ms": int(DIED * 1000),
        },
        {"node_id": "b" * 56, "node_ip": "127.0.0.3", "state": "DEAD", "end_time_ms": int((DIED - 3600) * 1000), "resources_total": {}},
    ]


def test_dead_nodes_are_read_with_address_id_time_and_reason_most_recent_first():
    dead = nodes.dead_nodes(rows())
    assert [n.ip for n in dead] == ["127.0.0.4", "127.0.0.3"]
    first = dead[0]
    assert (first.node_id, first.gpus, first.died_at) == (NODE_ID, 8.0, DIED)
    assert first.text(now=DIED + 5) == (
        "node 127.0.0.4 (id 3f2a1b2c, 8 GPUs) died 12:03:41: Unexpected termination: health check failed due to missing too many heartbeats"
    )
    assert nodes.alive_gpus(rows()) == 8.0


def test_a_death_on_another_day_carries_its_date():
    assert moment(DIED, now=DIED + 2 * 86400) == "2025-05-01 12:03:41"


def test_what_a_run_waits_for_names_the_nodes_that_died_since_its_attempt_started():
    dead = nodes.died_since(nodes.dead_nodes(rows()), since=DIED - 60)
    assert [n.ip for n in dead] == ["127.0.0.4"]  # the node dead an hour before is not this run's loss
    text = nodes.waiting_text(16, 8, dead, now=DIED)
    assert text == (
        "waiting for 16 GPUs (alive nodes have 8): node 127.0.0.4 (id 3f2a1b2c, 8 GPUs) died 12:03:41: "
        "Unexpected termination: health check failed due to missing too many heartbeats"
    )
    assert nodes.waiting_text(16, 8, [], now=DIED).endswith("no node died since the attempt started")


def test_many_deaths_are_summed_up():
    many = [nodes.DeadNode(f"{i:056x}", f"10.0.0.{i}", died_at=DIED - i) for i in range(5)]
    assert nodes.deaths_text(many, now=DIED).endswith("; and 2 more dead nodes")
