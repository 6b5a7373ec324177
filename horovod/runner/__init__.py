"""horovodrun: launch a training script on N processes (single host, through mpirun)."""
