"""One-verb packages that bring a run up where the GPUs are: an sbatch script (slurm) or KubeRay manifests (k8s)."""
