"""The runs edge: records, statuses, submission, resume, stop, supervision, checkpoints, logs."""
