"""`rlhf-launch versions`: the OpenRLHF releases whose trainer flags are known."""

from __future__ import annotations

from rlhf_launch.cli import options, output


def command(as_json: bool = options.JSON) -> None:
    """List the OpenRLHF releases whose trainer flags rlhf-launch knows."""
    from rlhf_launch.cli import report
    from rlhf_launch.openrlhf import flagset, releases

    known = list(flagset.supported_versions())
    if as_json:
        output.echo_json({"versions": known, "default": releases.DEFAULT, "newest": flagset.newest_version()})
        return
    output.echo(report.versions_text([flagset.load(v) for v in known], releases.DEFAULT))
