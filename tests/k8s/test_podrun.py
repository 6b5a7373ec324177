"""The translator of tests/k8s/test_run_rendered.py refuses what it does not translate, so the
chart cannot grow a pod field that no test runs (no docker needed here)."""

import pytest

from tests.support import k8s, podrun


def _translate(values, component="worker", kind="StatefulSet", tmp_path=None):
    obj = k8s.find(k8s.render(values), kind, component)
    return podrun.Translated(k8s.pod_spec(obj), "p", str(tmp_path), {})


@pytest.mark.parametrize(
    "values, field",
    [
        ({"hostNetwork": True}, "'dnsPolicy', 'hostNetwork'"),
        ({"resources": {"limits": {"nvidia.com/gpu": 1}}}, "'resources'"),
        ({"nodeSelector": {"pool": "a"}}, "'nodeSelector'"),
        ({"imagePullSecrets": [{"name": "r"}]}, "'imagePullSecrets'"),
    ],
)
def test_untranslated_fields_fail_by_name(values, field, tmp_path):
    with pytest.raises(pytest.fail.Exception, match=field):
        _translate(values, tmp_path=tmp_path)


def test_a_pulling_policy_fails(tmp_path):
    values = {"image": {"repository": "horovod", "pullPolicy": "Always"}}
    with pytest.raises(pytest.fail.Exception, match="would pull"):
        _translate(values, tmp_path=tmp_path)
