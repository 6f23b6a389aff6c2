"""What the tests share: fake job APIs, real local Ray and Slurm clusters, ports, and the
job helpers of the real-cluster tests. Imported as `support.<module>` (tests/ is on the path)."""
