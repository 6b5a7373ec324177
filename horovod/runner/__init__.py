"""horovodrun, the launcher (launch.py: flags, mpirun command; hosts.py, preflight.py with the
probe.py it runs on each host over ssh, network.py, check_build.py), and, apart from it, what
runs elsewhere: task/ on the ranks (network_check), cluster/ in a cluster's launcher container
before horovodrun (`python -m horovod.runner.cluster`)."""
