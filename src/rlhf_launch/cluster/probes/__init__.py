"""Small standalone scripts run as Ray jobs on the cluster (they import only ray and stdlib)."""
