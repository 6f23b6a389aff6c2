"""Test-only stand-in for DeepSpeed (tests/standin/README.md): just `deepspeed.checkpoint.ds_to_universal`."""
