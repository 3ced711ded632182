"""Connection counts and refusals (sans-IO), and the overrides syntax checked at config parse."""
import pytest

from broker_sim.config import BrokerConfig, ConfigError
from broker_sim.server.connection_quotas import WARN_INTERVAL_S, ConnectionQuotas


def test_per_ip_limit_refuses_the_next_and_admits_again_after_a_close():
    quotas = ConnectionQuotas(100, 2)
    assert quotas.admit("10.0.0.1") is None and quotas.admit("10.0.0.1") is None
    assert "max.connections.per.ip=2" in quotas.admit("10.0.0.1")
    assert quotas.admit("10.0.0.2") is None  # another IP has its own count
    quotas.release("10.0.0.1")
    assert quotas.admit("10.0.0.1") is None
    assert quotas.total == 3 and quotas.per_ip == {"10.0.0.1": 2, "10.0.0.2": 1}


def test_broker_wide_limit():
    quotas = ConnectionQuotas(2, 100)
    assert quotas.admit("a") is None and quotas.admit("b") is None
    assert "max.connections=2" in quotas.admit("c")
    quotas.release("a")
    assert quotas.admit("c") is None


def test_overrides_raise_or_lower_one_ip_and_names_resolve():
    quotas = ConnectionQuotas(100, 1, {"localhost": 3, "10.0.0.9": 0})
    assert [quotas.admit("127.0.0.1") for _ in range(4)][3] == \
        "max.connections.per.ip.overrides=3 reached for 127.0.0.1"
    assert "overrides=0" in quotas.admit("10.0.0.9")
    assert quotas.admit("10.0.0.1") is None and quotas.admit("10.0.0.1") is not None


def test_counts_stay_exact_under_churn():
    quotas = ConnectionQuotas(1000, 1000)
    for round_ in range(50):
        for i in range(20):
            assert quotas.admit(f"10.0.0.{i % 3}") is None
        for i in range(20):
            quotas.release(f"10.0.0.{i % 3}")
    assert quotas.total == 0 and quotas.per_ip == {}


def test_refusals_are_logged_at_most_once_per_interval_per_ip():
    now = [0.0]
    quotas = ConnectionQuotas(0, 0, clock=lambda: now[0])
    assert quotas.refusal_to_log("a", "full") == "refused connection from a: full"
    assert [quotas.refusal_to_log("a", "full") for _ in range(100)] == [None] * 100
    assert quotas.refusal_to_log("b", "full") is not None
    now[0] += WARN_INTERVAL_S
    assert quotas.refusal_to_log("a", "full") == "refused connection from a: full (100 more refused since the last warning)"


def test_overrides_syntax_is_checked_at_config_parse():
    assert BrokerConfig({"max.connections.per.ip.overrides": "host1:5, 10.0.0.1:0,[::1]:7"}).get(
        "max.connections.per.ip.overrides") == {"host1": 5, "10.0.0.1": 0, "::1": 7}
    for bad in ("host1", "host1:x", "host1:-1", ":5"):
        with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
            BrokerConfig({"max.connections.per.ip.overrides": bad})


def test_connection_rates_kept_per_ip_are_bounded_when_every_ip_is_busy():
    """A default IP quota (ips/<default>) gives every source address a rate: connections from more addresses
    than MAX_IP_RATES, all within the window, keep at most MAX_IP_RATES rates (the oldest go first)."""
    from broker_sim.server.connection_quotas import MAX_IP_RATES

    quotas = ConnectionQuotas(10 * MAX_IP_RATES, 10, clock=lambda: 1000.0)
    quotas.ip_rate = lambda ip: 100.0
    for i in range(MAX_IP_RATES + 500):
        assert quotas.admit(f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}") is None
    assert len(quotas._rates) <= MAX_IP_RATES
    assert quotas.admit("10.0.0.1") is None   # a dropped address starts a rate again
