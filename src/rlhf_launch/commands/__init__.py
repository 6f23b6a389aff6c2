"""One module per CLI command: the imperative part of each, called by cli.py."""
