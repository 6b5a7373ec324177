"""Ranks that outnumber the cores under them (issue 20, part 3): hosts reporting the same
kernel boot id are one machine; the probe reads this machine's boot id and CPU quota; the
doctor's report says how close allreduce comes to the links and names the oversubscription."""

import re
import types

from horovod.runner import oversubscription, probe
from horovod.runner.task import network_report


def p(boot, cpus):
    return {"boot_id": boot, "cpus": cpus}


def test_containers_of_one_machine_are_summed_against_its_cores():
    probes = {"w1": p("b", 2), "w2": p("b", 2), "w3": p("b", 2)}
    found = oversubscription.find(probes, {"w1": 1, "w2": 1, "w3": 1})
    assert found == [(["w1", "w2", "w3"], 2, 3)]
    text = oversubscription.describe(found)
    assert "hosts w1, w2, w3 share one machine with 2 core(s) and 3 rank(s)" in text
    assert "mpi_yield_when_idle 1" in text
    assert oversubscription.mpirun_args(found, "") == ["--mca", "mpi_yield_when_idle", "1"]
    # the user's own setting wins, and is named instead
    assert oversubscription.mpirun_args(found, "--mca mpi_yield_when_idle 0") == []
    assert "--mpi-args sets" in oversubscription.describe(found, user_set=True)


def test_machines_with_room_are_not_named():
    probes = {"a": p("m1", 4), "b": p("m2", 4)}
    assert oversubscription.find(probes, {"a": 2, "b": 4}) == []
    # two machines, one of them crowded
    assert oversubscription.find(probes, {"a": 5, "b": 1}) == [(["a"], 4, 5)]


def test_a_host_under_a_cpu_quota_is_crowded_on_its_own():
    probes = {"a": p("m", 8), "b": p("m", 1)}  # b: compose `cpus: 1` on an 8-core machine
    assert oversubscription.find(probes, {"a": 2, "b": 3}) == [(["b"], 1, 3)]


def test_unknown_boot_id_counts_each_host_alone():
    probes = {"a": p(None, 2), "b": p(None, 2)}
    assert oversubscription.find(probes, {"a": 2, "b": 2}) == []
    assert oversubscription.find(probes, {"a": 3, "b": 1}) == [(["a"], 2, 3)]


def test_probe_reports_boot_id_and_usable_cpus():
    info = probe.probe()
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert info["boot_id"] == f.read().strip()
    assert 1 <= info["cpus"] <= len(__import__("os").sched_getaffinity(0))


def test_report_compares_allreduce_with_the_slowest_link():
    checker = types.SimpleNamespace(
        hosts=["w1", "w2"], size=2, seconds=0.5, ranks_of={"w1": [0], "w2": [1]}
    )
    bw = {("w1", "w2"): 1.0e9, ("w2", "w1"): 0.8e9, ("w1", "w1"): 5e9, ("w2", "w2"): 5e9}
    allreduce = {4 << 10: (0.001, 1e6), 64 << 20: (0.1, 0.2e9)}
    plan = {
        "network": "10.0.0.0/24",
        "oversubscribed": oversubscription.describe([(["w1", "w2"], 2, 3)]),
    }
    text = network_report.report(checker, {}, bw, allreduce, {}, plan, 0)
    assert "allreduce reaches 25% of what the links allow" in text, text
    assert "slowest link 0.80 GB/s" in text, text
    assert "oversubscribed: hosts w1, w2 share one machine with 2 core(s) and 3 rank(s)" in text
    assert re.search(
        r"^verdict: WARN: allreduce reaches 25% of what the links allow \(1 likely cause",
        text,
        re.M,
    ), text


def _two_by_two(ranks_of, plan_extra=None, busbw=0.2e9, hierarchical="auto"):
    checker = types.SimpleNamespace(
        hosts=sorted(ranks_of),
        size=sum(map(len, ranks_of.values())),
        seconds=0.5,
        ranks_of=ranks_of,
    )
    bw = {(a, b): 1e9 for a in ranks_of for b in ranks_of}
    allreduce = {4 << 10: (0.001, 1e6), 64 << 20: (0.1, busbw)}
    plan = {"network": "10.0.0.0/24", **(plan_extra or {})}
    return network_report.report(checker, {}, bw, allreduce, {}, plan, 0, hierarchical)


def test_hierarchical_off_is_named_where_it_would_help():
    text = _two_by_two({"w1": [0, 1], "w2": [2, 3]}, hierarchical="0")
    assert "cause: HOROVOD_HIERARCHICAL_ALLREDUCE=0 on 2 hosts of 2 ranks" in text, text
    assert "cause:" not in _two_by_two({"w1": [0, 1], "w2": [2, 3]})
    assert "cause:" not in _two_by_two({"w1": [0], "w2": [1]})  # nothing to gain


def test_uneven_hosts_and_small_shm_are_named():
    text = _two_by_two({"w1": [0, 1], "w2": [2]}, {"small_shm": {"w1": 64 << 20, "w2": 64 << 20}})
    assert "cause: hosts hold 1 to 2 ranks each, so the hierarchical allreduce cannot run" in text
    assert "cause: /dev/shm on w1 is only 64 MiB for its 2 ranks" in text, text
    assert "/dev/shm on w2" not in text  # one rank: no shared memory between ranks there
    assert "(2 likely cause(s) above)" in text, text


def test_fast_enough_allreduce_keeps_the_verdict_ok():
    text = _two_by_two({"w1": [0], "w2": [1]}, busbw=0.9e9)
    assert "allreduce reaches 90% of what the links allow" in text
    ok = r"^verdict: OK: every link between hosts within 1.45x of the median"
    assert re.search(ok, text, re.M), text
    for busbw, pct in ((0.8e9, 80), (0.3e9, 30)):  # the link is not what holds it back
        text = _two_by_two({"w1": [0], "w2": [1]}, busbw=busbw)
        assert (
            f"verdict: WARN: allreduce reaches {pct}% of what the links allow (no cause this "
            in text
        ), text


def _links(rates, ranks_of, busbw, seconds, hierarchical="auto"):
    """The report on links of the given rates (bytes/s per sending host), a 64 MiB allreduce
    taking `seconds` at bus bandwidth `busbw`."""
    hosts = sorted(ranks_of)
    checker = types.SimpleNamespace(
        hosts=hosts, size=sum(map(len, ranks_of.values())), seconds=0.5, ranks_of=ranks_of
    )
    bw = {(a, b): rates[a] for a in hosts for b in hosts if a != b}
    allreduce = {4 << 10: (0.001, 1e6), 64 << 20: (seconds, busbw)}
    return network_report.report(checker, {}, bw, allreduce, {}, {"network": "n"}, 0, hierarchical)


def test_a_host_at_half_the_rate_is_the_slow_link_and_the_reach_is_judged_against_it():
    # Three hosts shaped at 0.05 GB/s, the third at 0.025: its two outgoing links are named,
    # and an allreduce at 0.9 of its rate reaches 90 % (not 45 % of the fast links).
    rates = {"w1": 0.05e9, "w2": 0.05e9, "w3": 0.025e9}
    text = _links(rates, {"w1": [0], "w2": [1], "w3": [2]}, 0.0225e9, 3.98)
    assert re.findall(r"^slow link: (\S+) -> (\S+): 0.025 GB/s, median 0.050", text, re.M) == [
        ("w3", "w1"),
        ("w3", "w2"),
    ], text
    assert "allreduce reaches 90% of what the links allow" in text, text
    assert re.search(r"^verdict: WARN: 2 slow link\(s\), .*most involved: w3\)", text, re.M), text
    assert "allreduce reaches" not in text.split("verdict:")[1], text  # not a cause of its own
    # Two hosts, one at half the other's rate: its link is 1.5x below the median of the two.
    two = _links({"w1": 0.05e9, "w2": 0.025e9}, {"w1": [0], "w2": [1]}, 0.0225e9, 1.49)
    assert re.findall(r"^slow link: (\S+) -> (\S+): ", two, re.M) == [("w2", "w1")], two
    # Evenly shaped, 0.9 of the rate: OK.
    even = _links(dict.fromkeys(rates, 0.05e9), {"w1": [0], "w2": [1], "w3": [2]}, 0.045e9, 2.0)
    assert re.search(r"^verdict: OK", even, re.M), even


def test_the_links_predict_the_time_of_a_large_allreduce():
    # Flat ring, 2 hosts x 1: 64 MiB x 2(n-1)/n over a 0.05 GB/s link = 1342 ms.
    text = _links({"w1": 0.05e9, "w2": 0.05e9}, {"w1": [0], "w2": [1]}, 0.047e9, 1.43)
    assert re.search(
        r"^allreduce of 64 MiB: 1342.2 ms predicted from the slowest link \(flat ring: 2\(n-1\)/n "
        r"of it over each link, n = 2\), 1430.0 ms measured \(1.07x\)$",
        text,
        re.M,
    ), text
    # 2 hosts x 2, hierarchical: each host sends 2(c-1)/c = 1x the buffer: 1342 ms; flat would
    # send 1.5x (2013 ms).
    two_by_two = {"w1": [0, 1], "w2": [2, 3]}
    text = _links({"w1": 0.05e9, "w2": 0.05e9}, two_by_two, 0.07e9, 1.5)
    assert "1342.2 ms predicted from the slowest link (hierarchical: 2(c-1)/c" in text, text
    text = _links({"w1": 0.05e9, "w2": 0.05e9}, two_by_two, 0.047e9, 2.1, hierarchical="0")
    assert "2013.3 ms predicted from the slowest link (flat ring" in text, text


def test_small_messages_far_above_the_link_latency_are_named():
    checker = types.SimpleNamespace(
        hosts=["w1", "w2"], size=2, seconds=0.5, ranks_of={"w1": [0], "w2": [1]}
    )
    bw = {("w1", "w2"): 1e9, ("w2", "w1"): 1e9}
    lat = {("w1", "w2"): 100e-6, ("w2", "w1"): 100e-6}
    slow = {4 << 10: (1600e-6, 1e6), 64 << 20: (0.1, 0.8e9)}
    text = network_report.report(checker, lat, bw, slow, {}, {"network": "n"}, 0)
    assert "small messages: a 4 KiB allreduce takes 1600 us, 16x the slowest link's latency" in text
    fast = {4 << 10: (300e-6, 1e6), 64 << 20: (0.1, 0.8e9)}
    assert "small messages" not in network_report.report(
        checker, lat, bw, fast, {}, {"network": "n"}, 0
    )


def test_links_that_slow_each_other_down_are_named():
    """Links carrying less all at once (as a ring keeps them) than alone: containers on one
    machine. The report compares allreduce with both figures and names the cause."""
    checker = types.SimpleNamespace(
        hosts=["w1", "w2", "w3"], size=3, seconds=0.5, ranks_of={"w1": [0], "w2": [1], "w3": [2]}
    )
    bw = {(a, b): 1.0e9 for a in checker.hosts for b in checker.hosts}
    allreduce = {4 << 10: (0.001, 1e6), 64 << 20: (0.1, 0.3e9)}
    shared = {("w1", "w2"): 0.40e9, ("w2", "w3"): 0.35e9, ("w3", "w1"): 0.45e9}
    text = network_report.report(
        checker, {}, bw, allreduce, {}, {"network": "n"}, 0, "auto", shared
    )
    assert (
        "allreduce reaches 30% of what the links allow (0.30 GB/s bus bandwidth at 64 MiB; " in text
    )
    assert "slowest link 1.00 GB/s), 86% of what they carry all at once" in text, text
    assert (
        "links at once (each host streams to the next while receiving, as a ring does): "
        "slowest 0.35 GB/s (w2 -> w3), 35% of the slowest link alone" in text
    ), text
    assert "cause: the links slow each other down: all busy at once" in text, text
    assert re.search(r"^verdict: WARN: allreduce reaches 30% .* \(1 likely cause", text, re.M), text
    # Separate hosts with full-duplex links: nearly the same figure at once, no cause.
    apart = {k: 0.95e9 for k in shared}
    text = network_report.report(checker, {}, bw, allreduce, {}, {"network": "n"}, 0, "auto", apart)
    assert "95% of the slowest link alone" in text and "slow each other" not in text, text
    assert "(no cause this check can see" in text, text


def test_check_network_program_on_one_machine():
    """The check's own program under real mpirun, each rank called a host of its own (shared
    memory between them): every step runs, the links-at-once step included, and rank 0 reports."""
    import json

    from tests.support import mpi

    for np_ in (2, 3):
        plan = {
            "network": "local",
            "seconds": 0.2,
            "step_timeout": 30,
            "placement": {str(r): f"h{r}" for r in range(np_)},
        }
        rc, out, err = mpi.launch(
            np_,
            "-m",
            "horovod.runner.task.network_check",
            env={"HOROVOD_NETWORK_CHECK_PLAN": json.dumps(plan)},
            timeout=120,
        )
        assert rc == 0, out + err
        ring = " ".join(f"h{r} -> h{(r + 1) % np_}" for r in range(np_))
        found = re.search(
            r"^links at once \(.*\): slowest ([0-9.]+) GB/s \((h\d -> h\d)\), (\d+)% of the "
            r"slowest link alone$",
            out,
            re.M,
        )
        assert found and float(found.group(1)) > 0 and found.group(2) in ring, out + err
        assert re.search(
            r"^allreduce reaches \d+% of what the links allow .*, \d+% of what they "
            r"carry all at once$",
            out,
            re.M,
        ), out
        assert re.search(r"^verdict: ", out, re.M), out


def test_the_verdict_names_slow_links_then_a_faster_interface_then_the_reach():
    # Every host's job interface carries 0.045 GB/s where another carries 0.8 (w2's 1.6), and
    # allreduce reaches 77 % of the links: the interface comes before the reach, and the host
    # named is the one with the most to gain.
    checker = types.SimpleNamespace(
        hosts=["w1", "w2"], size=2, seconds=0.5, ranks_of={"w1": [0], "w2": [1]}
    )
    bw = {("w1", "w2"): 0.045e9, ("w2", "w1"): 0.045e9}
    allreduce = {4 << 10: (0.001, 1e6), 64 << 20: (3.0, 0.0346e9)}

    def interfaces(fast_rates):
        hosts = checker.hosts
        return {
            "slow": {h: ("eth1", f"10.1.0.{i}", 0.045e9, None) for i, h in enumerate(hosts)},
            "fast": {h: ("eth0", f"10.0.0.{i}", fast_rates[h], None) for i, h in enumerate(hosts)},
        }

    ifs = interfaces({"w1": 0.8e9, "w2": 1.6e9})
    text = network_report.report(checker, {}, bw, allreduce, ifs, {"network": "slow"}, 0)
    verdict = re.search(r"^verdict: (.*)$", text, re.M).group(1)
    first = "WARN: a faster interface than the chosen one exists (eth0 on w2); "
    assert verdict.startswith(first), text
    assert "allreduce reaches 77% of what the links allow" in verdict, text
    # One host's links at a twentieth of the others': the slow links lead, then the interface.
    checker.hosts, checker.size = ["w1", "w2", "w3"], 3
    checker.ranks_of = {"w1": [0], "w2": [1], "w3": [2]}
    bw = {(a, b): 0.9e9 for a in checker.hosts for b in checker.hosts if a != b}
    bw[("w3", "w1")] = bw[("w3", "w2")] = 0.045e9
    allreduce = {4 << 10: (0.001, 1e6), 64 << 20: (2.3, 0.049e9)}
    ifs = interfaces({"w1": 0.044e9, "w2": 0.046e9, "w3": 1.1e9})
    text = network_report.report(checker, {}, bw, allreduce, ifs, {"network": "slow"}, 0)
    verdict = re.search(r"^verdict: (.*)$", text, re.M).group(1)
    assert re.match(
        r"WARN: 2 slow link\(s\), .*most involved: w3\).*; a faster interface than "
        r"the chosen one exists \(eth0 on w3\)$",
        verdict,
    ), text
