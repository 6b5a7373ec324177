"""horovodrun, the launcher (launch.py: the job's run; flags.py: its flags; command.py: the
mpirun command; supervise.py and job_output.py: mpirun seen through; gloo_launch.py and
gloo_supervise.py: --gloo; elastic_driver.py with elastic_discovery, elastic_blacklist,
elastic_hosts and elastic_channel: elastic mode; network_check_plan.py: --check-network's plan;
hosts.py, preflight.py with the probe.py it runs on each host over ssh, network.py,
check_build.py), and, apart from it, what runs elsewhere: task/ on the ranks (network_check
with network_steps, network_measure and network_report), cluster/ in a cluster's launcher
container before horovodrun (`python -m horovod.runner.cluster`)."""
