"""Upstream's `HostDiscovery`: the base of a discovery object that the elastic Ray executor
takes as `settings.discovery` with `override_discovery=False`."""


class HostDiscovery:
    def find_available_hosts_and_slots(self):
        """{host: slots} usable now."""
        raise NotImplementedError()
