"""The cluster entrypoint (`python -m horovod.runner.cluster`): what a cluster's launcher
container runs before horovodrun, in compose/compose.yaml and later the Kubernetes chart. Apart
from the launcher package (horovod.runner) it only prepares: key pair (keys), the workers
(discovery), the hostfile horovodrun reads, then the command (entrypoint)."""
