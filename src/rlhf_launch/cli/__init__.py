"""The command line: one module per verb (app.py lists them), shared options, output, report."""
