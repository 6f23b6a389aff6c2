"""Which OpenRLHF release is the default, and what each release pins.

`DEFAULT` is the release a config without `openrlhf.version` targets, the one the shipped
presets, the Docker image and scripts/run-node.sh are built for. It is set by
`python scripts/gen_flagsets.py VERSION --default`, which also rewrites those files; a test
checks that they agree with it.
"""

from __future__ import annotations

DEFAULT = "0.11.2"
