"""Programs that run on the ranks, started by horovodrun through mpirun (one process per slot):
`python -m horovod.runner.task.network_check` for `horovodrun --check-network`. Unlike the
launcher (horovod.runner), they import a frontend and start the engine."""
