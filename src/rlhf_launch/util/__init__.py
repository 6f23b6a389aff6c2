"""Small helpers the edges share: waiting with a deadline, file locks."""
