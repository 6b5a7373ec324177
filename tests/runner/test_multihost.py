"""horovodrun across hosts, the parts that need no second host: host lists, the network
choice, the mpirun command, ssh error explanations, the cluster launcher's discovery.
(Real ssh, real hosts: tests/cluster.)"""

import os
import socket
import subprocess
import sys
import types

import pytest

from horovod.runner import hosts, launch, links, network, preflight, probe, supervise
from horovod.runner.cluster import discovery, entrypoint
from horovod.runner.task import network_report


def test_host_list():
    assert hosts.parse_hosts("a:2,b,c:3") == [("a", 2), ("b", 1), ("c", 3)]
    assert hosts.parse_hosts("a:1,b:2,a:1") == [("a", 2), ("b", 2)]


@pytest.mark.parametrize("spec", ["a:0", "a:x", ":2", ","])
def test_bad_host_list(spec):
    with pytest.raises(hosts.HostError):
        hosts.parse_hosts(spec)


def test_hostfile(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("# cluster\nw1 slots=2\nw2:3\n\nw3   # one slot\n")
    assert hosts.parse_hostfile(str(f)) == [("w1", 2), ("w2", 3), ("w3", 1)]
    f.write_text("w1 slots=2 colour=blue\n")
    with pytest.raises(hosts.HostError, match="line 1: unknown field 'colour=blue'"):
        hosts.parse_hostfile(str(f))
    with pytest.raises(hosts.HostError, match="No such file"):
        hosts.parse_hostfile(str(tmp_path / "missing"))


def _probe(*ifaces):
    return {
        "interfaces": [
            {"name": n, "address": a, "prefix": p, "speed_mbps": s} for n, a, p, s in ifaces
        ]
    }


LO = ("lo", "127.0.0.1", 8, None)


def test_docker0_and_lo_are_never_chosen():
    """Every Docker host has docker0 = 172.17.0.1/16: same subnet everywhere, connects nothing."""
    probes = {
        "w1": _probe(LO, ("docker0", "172.17.0.1", 16, None), ("eth0", "10.0.0.1", 24, None)),
        "w2": _probe(LO, ("docker0", "172.17.0.1", 16, None), ("ens5", "10.0.0.2", 24, None)),
    }
    c = network.choose(
        probes, {"w1": "10.0.0.1", "w2": "10.0.0.2"}, _probe(LO, ("eth0", "10.0.0.9", 24, None))
    )
    assert c.mpi_value() == "10.0.0.0/24"
    assert c.names() == ["ens5", "eth0"]
    assert c.mpirun_args() == [
        "--mca",
        "btl_tcp_if_include",
        "10.0.0.0/24",
        "--mca",
        "oob_tcp_if_include",
        "10.0.0.0/24",
    ]


def test_same_address_on_two_hosts_is_not_a_network():
    probes = {
        "w1": _probe(("eth1", "192.168.1.1", 24, None), ("eth0", "10.0.0.1", 24, None)),
        "w2": _probe(("eth1", "192.168.1.1", 24, None), ("eth0", "10.0.0.2", 24, None)),
    }
    assert network.choose(probes, {}, _probe()).mpi_value() == "10.0.0.0/24"


def test_prefers_the_subnet_the_names_resolve_to():
    probes = {
        "w1": _probe(("eth0", "10.0.0.1", 24, None), ("eth1", "10.1.0.1", 24, None)),
        "w2": _probe(("eth0", "10.0.0.2", 24, None), ("eth1", "10.1.0.2", 24, None)),
    }
    c = network.choose(probes, {"w1": "10.1.0.1", "w2": "10.1.0.2"}, _probe())
    assert c.mpi_value() == "10.1.0.0/24"
    assert c.launcher_iface is None
    assert "oob_tcp_if_include" not in c.mpirun_args()  # the launcher is not on it


def test_no_shared_subnet_names_every_host():
    probes = {
        "w1": _probe(LO, ("eth0", "10.0.0.1", 24, None)),
        "w2": _probe(LO, ("eth0", "10.9.0.2", 24, None)),
    }
    with pytest.raises(network.NetworkError, match=r"w1: lo 127.0.0.1/8, eth0 10.0.0.1/24; w2: "):
        network.choose(probes, {}, _probe())


def test_requested_interface():
    probes = {
        "w1": _probe(("eth0", "10.0.0.1", 24, None), ("eth1", "10.1.0.1", 24, None)),
        "w2": _probe(("eth0", "10.0.0.2", 24, None)),
    }
    with pytest.raises(
        network.NetworkError, match=r"no such interface on w2 \(has eth0 10.0.0.2/24\)"
    ):
        network.choose(probes, {}, _probe(), "eth1")
    assert network.choose(probes, {}, _probe(), "eth0").mpi_value() == "10.0.0.0/24"
    assert network.choose(probes, {}, _probe(), "10.0.0.0/16").mpi_value() == "10.0.0.0/16"


def test_local_probe_has_this_hosts_facts():
    p = probe.probe()
    assert p["hostname"] == socket.gethostname()
    assert any(i["name"] == "lo" and i["address"] == "127.0.0.1" for i in p["interfaces"])
    assert p["shm_bytes"] and p["cpus"] >= 1


def test_multihost_mpirun_command():
    args = launch.parse_args(["-H", "w1:2,w2:2", "python", "t.py"], env={})
    ssh = preflight.ssh_base(2222, "/k", 10)
    cmd = launch.mpirun_command(
        args,
        {"HOROVOD_X": "1"},
        2,
        True,
        launch.resolve_hosts(args),
        ["--mca", "btl_tcp_if_include", "10.0.0.0/24"],
        ssh,
    )
    assert cmd[:6] == ["mpirun", "--allow-run-as-root", "-np", "4", "-H", "w1:2,w2:2"]
    rsh = cmd[cmd.index("plm_rsh_args") + 1]
    assert "-p 2222 -i /k" in rsh and "BatchMode=yes" in rsh
    assert "--oversubscribe" not in cmd
    assert cmd[-4:] == ["-x", "HOROVOD_X", "python", "t.py"]


def test_knob_flags_become_variables():
    args = launch.parse_args(
        [
            "--fusion-threshold-mb",
            "32",
            "--cycle-time-ms",
            "2",
            "--timeline-filename",
            "/t.json",
            "--no-stall-check",
            "--stall-check-shutdown-time-seconds",
            "30",
            "python",
            "t.py",
        ],
        env={},
    )
    env = launch.knob_env(args, {"HOROVOD_CYCLE_TIME": "9"})
    assert env["HOROVOD_FUSION_THRESHOLD"] == str(32 << 20)
    assert env["HOROVOD_CYCLE_TIME"] == "2"  # the flag wins
    assert env["HOROVOD_TIMELINE"] == "/t.json"
    assert env["HOROVOD_STALL_CHECK_DISABLE"] == "1"
    assert env["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] == "30"


def test_hosts_from_the_environment(tmp_path):
    f = tmp_path / "h"
    f.write_text("w1 slots=2\n")
    args = launch.parse_args(["python", "t.py"], env={"HOROVOD_HOSTFILE": str(f)})
    assert launch.resolve_hosts(args) == [("w1", 2)]
    args = launch.parse_args(["-H", "w9:1", "python", "t.py"], env={"HOROVOD_HOSTFILE": str(f)})
    assert launch.resolve_hosts(args) == [("w9", 1)]


def test_too_many_processes_for_the_slots(capsys):
    assert launch.main(["-np", "5", "-H", "w1:2,w2:2", "true"]) == 2
    assert "-np 5 but the hosts have 4 slots (w1:2,w2:2)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "stderr,fix",
    [
        ("ssh: Could not resolve hostname w9: Name or service not known", "check the name 'w9'"),
        (
            "ssh: connect to host w9 port 2200: Connection refused",
            "start sshd on w9, or give the port",
        ),
        ("root@w9: Permission denied (publickey).", "authorize /k for this user on w9"),
        ("ssh: connect to host w9 port 22: Connection timed out", "w9 does not answer"),
    ],
)
def test_ssh_errors_are_explained(stderr, fix):
    assert fix in preflight._fix_for("w9", stderr, 2200, "/k")


def test_unresolvable_host_fails_preflight_before_ssh():
    with pytest.raises(preflight.PreflightFailed) as e:
        preflight.run(
            [("no-such-host.invalid", 2)], {"no-such-host.invalid": False}, preflight.ssh_base(), 5
        )
    text = str(e.value)
    assert "FAIL  no-such-host.invalid" in text and "does not resolve" in text
    assert "nothing was launched" in text


def test_version_difference_is_an_error():
    rep = preflight.HostReport("w2", 2)
    rep.probe = {
        "horovod": "0.0.9",
        "python": "3.11.2",
        "tensorflow": "2.21.0",
        "openmpi": "4.1.4",
        "shm_bytes": 64 << 20,
    }
    launcher = dict(rep.probe, horovod="0.1.0")
    preflight.compare([rep], launcher)
    assert not rep.ok
    assert rep.errors[0][0] == "versions differ from the launcher's: horovod 0.0.9 (launcher 0.1.0)"
    assert "/dev/shm is only 64 MiB for 2 ranks" in rep.warnings[0][0]


def test_cluster_discovery_finds_a_listening_host():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    try:
        found = discovery.discover("localhost", port, timeout=5)
        assert [ip for _, ip in found] == ["127.0.0.1"]
    finally:
        srv.close()
    with pytest.raises(RuntimeError, match=r"sshd on port \d+ never answered on .*127.0.0.1"):
        discovery.discover("localhost", port, timeout=0.5)
    with pytest.raises(RuntimeError, match="no container answers to the name 'no-such.invalid'"):
        discovery.discover("no-such.invalid", port, timeout=0.3)


def test_rank_placement_follows_map_by_slot():
    assert launch.rank_hosts([("w1", 2), ("w2", 2)], 4) == {0: "w1", 1: "w1", 2: "w2", 3: "w2"}
    assert launch.rank_hosts([("w1", 2), ("w2", 2)], 3) == {0: "w1", 1: "w1", 2: "w2"}
    assert launch.rank_hosts([("w1", 1)], 2) == {}  # oversubscribed: placement unknown
    msg = launch._stuck_message({2, 3}, {0: "w1", 1: "w1", 2: "w2", 3: "w2"})
    assert "run on w2 (ranks 2, 3)" in msg


def test_shared_subnets_are_the_interfaces_to_compare():
    probes = {
        "w1": _probe(
            LO,
            ("docker0", "172.17.0.1", 16, None),
            ("eth0", "10.0.0.1", 24, None),
            ("eth1", "10.1.0.1", 24, None),
        ),
        "w2": _probe(LO, ("docker0", "172.17.0.1", 16, None), ("eth0", "10.0.0.2", 24, None)),
    }
    assert network.shared_subnets(probes) == {
        "10.0.0.0/24": {"w1": ("eth0", "10.0.0.1"), "w2": ("eth0", "10.0.0.2")}
    }


def test_check_network_arguments():
    args = launch.parse_args(
        ["--check-network", "-H", "w1:2,w2:2", "--model-bytes", "1000"], env={}
    )
    assert args.command == ["python", "-m", "horovod.runner.task.network_check"]
    plan = launch.check_plan(args, launch.resolve_hosts(args), None, None)
    assert plan["placement"] == {"0": "w1", "1": "w1", "2": "w2", "3": "w2"}
    assert plan["model_bytes"] == 1000
    # Every step at its bound, plus start-up: 3 host pairs (w1-w1, w2-w2, w1-w2) x 3 steps
    # + 3 allreduces.
    assert launch.check_bound(plan) == 60 + 12 * (10 + 2 * 0.5)
    # The launcher names the hosts whose /dev/shm is small (the ranks' program may not import
    # the launcher's modules, so it gets the verdict, not the threshold).
    probes = {h: {"shm_bytes": b, "interfaces": []} for h, b in (("w1", 64 << 20), ("w2", 1 << 30))}
    plan = launch.check_plan(args, launch.resolve_hosts(args), probes, None)
    assert plan["small_shm"] == {"w1": 64 << 20}, plan
    with pytest.raises(SystemExit):
        launch.parse_args(["--check-network", "python", "x.py"], env={})


def test_check_network_report_uses_the_fusion_threshold_it_is_given():
    # main() passes the engine's parsed HOROVOD_FUSION_THRESHOLD; 64 MiB of gradients is one
    # fused op under the default 128 MiB, eight under 8 MiB: 7 more small-allreduce latencies.
    checker = types.SimpleNamespace(hosts=["w1"], size=2, seconds=0.5, ranks_of={"w1": [0, 1]})
    allreduce = {4 << 10: (0.001, 1e6), 64 << 20: (0.1, 1e9)}
    plan = {"network": "this host", "model_bytes": 64 << 20}

    def predicted_ms(fusion):
        text = network_report.report(checker, {}, {}, allreduce, {}, plan, fusion)
        line = next(ln for ln in text.splitlines() if ln.startswith("model of"))
        return float(line.split("about ")[1].split(" ms")[0])

    assert predicted_ms(8 << 20) - predicted_ms(128 << 20) == pytest.approx(7.0, abs=0.15)
    assert predicted_ms(0) == predicted_ms(128 << 20)  # 0: no fusion, counted as one op


def test_cluster_entrypoint_runs_as_a_module():
    p = subprocess.run(
        [sys.executable, "-m", "horovod.runner.cluster", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0 and "python -m horovod.runner.cluster" in p.stdout, p.stderr


def test_cluster_workers_variable_is_checked(monkeypatch, capsys):
    monkeypatch.setenv("HOROVOD_WORKERS", "two")
    with pytest.raises(SystemExit) as e:
        entrypoint.main(["--timeout", "0.1"])
    assert e.value.code == 2
    assert "argument --expect: $HOROVOD_WORKERS='two' is not an integer" in capsys.readouterr().err


def test_check_network_keeps_the_slowest_link_for_later_jobs(tmp_path, monkeypatch):
    # The report's links line, read by horovodrun's relay from a real child's output, kept per
    # host set; a later job on the same hosts gets it, a job on a subset does not.
    monkeypatch.setenv("HOROVOD_LINKS_FILE", str(tmp_path / "links.json"))
    checker = types.SimpleNamespace(
        hosts=["w1", "w2"], size=2, seconds=0.5, ranks_of={"w1": [0], "w2": [1]}
    )
    bw = {("w1", "w2"): 1.2e9, ("w2", "w1"): 0.97e9, ("w1", "w1"): 5e9}
    allreduce = {64 << 20: (0.3, 0.5e9)}
    at_once = {("w1", "w2"): 0.6e9, ("w2", "w1"): 0.55e9}
    text = network_report.report(
        checker, {}, bw, allreduce, {}, {"network": "n"}, 128 << 20, "auto", at_once
    )
    line = next(ln for ln in text.splitlines() if ln.startswith("links:"))
    assert line.startswith(
        "links: slowest 0.970 GB/s between hosts (w2 -> w1), 0.550 GB/s all at once"
    ), line
    report = {}
    rc = supervise.run([sys.executable, "-c", f"print({line!r})"], dict(os.environ), report=report)
    assert rc == 0 and report["slowest_link_gbps"] == 0.97, report
    assert report["links_at_once_gbps"] == 0.55, report
    hosts_ = [("w1", 2), ("w2", 2)]
    assert links.load(hosts_) is None
    links.save(hosts_, report["slowest_link_gbps"], "eth0", report["links_at_once_gbps"])
    entry = links.load([("w2", 1), ("w1", 1)])  # slots and order do not matter
    assert entry["slowest_gbps"] == 0.97 and entry["interface"] == "eth0", entry
    assert entry["at_once_gbps"] == 0.55, entry
    assert "slowest link between these hosts 0.97 GB/s, 0.55 GB/s all at once" in links.describe(
        entry
    )
    # A report without the at-once figure (one measured before it existed) still reads.
    old = "links: slowest 0.970 GB/s between hosts (w2 -> w1); horovodrun keeps it"
    assert links.REPORT_LINE.match(old).groups() == ("0.970", None)
    assert links.load([("w1", 2)]) is None  # another host set


def test_a_links_file_that_cannot_be_written_or_read_is_no_error(tmp_path, monkeypatch):
    bad = tmp_path / "not-a-dir"
    bad.write_text("")
    monkeypatch.setenv("HOROVOD_LINKS_FILE", str(bad / "links.json"))
    assert links.load([("w1", 1), ("w2", 1)]) is None
    with pytest.raises(OSError):  # launch_job says so and keeps the check's exit status
        links.save([("w1", 1), ("w2", 1)], 1.0, "eth0")
    monkeypatch.setenv("HOROVOD_LINKS_FILE", str(tmp_path / "links.json"))
    (tmp_path / "links.json").write_text("{not json")
    assert links.load([("w1", 1), ("w2", 1)]) is None
    links.save([("w1", 1), ("w2", 1)], 1.0, "eth0")  # replaces the damaged file
    assert links.load([("w2", 1), ("w1", 1)])["slowest_gbps"] == 1.0
