"""Framework-neutral parts of Horovod: init/topology, exceptions, reduce ops."""
