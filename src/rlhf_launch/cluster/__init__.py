"""The cluster edge: the connection (address + token), the dashboard's REST API, Ray jobs,
node start/stop, snapshots, preflight, the reserve check and probe jobs."""
