"""The SSRF guard (freellm.net.ssrf) and the failed-authentication limiter (freellm.server.auth_limit).

The guard's rules are a table; the resolver is driven through aiohttp's own resolver interface with a
fixed answer standing in for a hostile DNS server (the rebinding case, which loopback cannot stage).
"""

from __future__ import annotations

import ipaddress
import socket

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from freellm.net.ssrf import GuardedResolver, HostRefused, Reach, address_refusal, check_url
from freellm.server.auth_limit import AuthFailureLimiter

# ── address rules ──────────────────────────────────────────────────────────────────────────────────

REFUSED_EVERYWHERE = [
    "169.254.169.254",  # the metadata service
    "169.254.170.2",  # ECS task credentials
    "169.254.1.1",  # any link-local
    "fe80::1",
    "fd00:ec2::254",  # AWS metadata over IPv6
    "100.100.100.200",  # Alibaba metadata
    "::ffff:169.254.169.254",  # IPv4-mapped
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
]
LOCAL_BUT_ALLOWED_UPSTREAMS = ["127.0.0.1", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "fd12::1", "100.64.0.1"]
PUBLIC = ["8.8.8.8", "2001:4860:4860::8888", "1.1.1.1"]


@pytest.mark.parametrize("address", REFUSED_EVERYWHERE)
def test_link_local_and_metadata_are_refused_by_both_policies(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert address_refusal(ip, Reach.UPSTREAM) is not None
    assert address_refusal(ip, Reach.PUBLIC) is not None


@pytest.mark.parametrize("address", LOCAL_BUT_ALLOWED_UPSTREAMS)
def test_loopback_and_lan_upstreams_stay_allowed_but_not_for_client_urls(address: str) -> None:
    """Local Ollama / vLLM on 127.0.0.1 or 10.x keep working as run-time providers; a client's image
    URL still may not point into the gateway's network."""
    ip = ipaddress.ip_address(address)
    assert address_refusal(ip, Reach.UPSTREAM) is None
    assert address_refusal(ip, Reach.PUBLIC) is not None


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass_both(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert address_refusal(ip, Reach.UPSTREAM) is None and address_refusal(ip, Reach.PUBLIC) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1%25eth0]:8080/v1",
        "http://[fd00:ec2::254]/",
        "http://[::ffff:a9fe:a9fe]/v1",
        "http://metadata.google.internal/computeMetadata/v1",
        "http://METADATA.Google.Internal./v1",  # case and the trailing root dot
        "http://metadata/v1",
        "http://instance-data/latest",
        "http://2852039166/v1",  # 169.254.169.254 written as one decimal number: resolves to it
        "http://0xa9fea9fe/v1",  # ... and in hex
    ],
)
async def test_run_time_upstream_urls_to_metadata_are_refused(url: str) -> None:
    with pytest.raises(HostRefused):
        await check_url(url, Reach.UPSTREAM)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:11434/v1",
        "http://localhost:8000/v1",
        "http://10.0.0.5:8000/v1",
        "https://api.example.invalid/v1",  # does not resolve now: the connection-time resolver checks it
    ],
)
async def test_run_time_upstream_urls_to_local_services_pass(url: str) -> None:
    await check_url(url, Reach.UPSTREAM)


@pytest.mark.parametrize("url", ["ftp://example.com/", "http:///v1", "http://host:99999/v1"])
async def test_non_http_or_hostless_urls_are_refused(url: str) -> None:
    with pytest.raises(HostRefused):
        await check_url(url, Reach.UPSTREAM)


async def test_client_urls_that_do_not_resolve_are_refused() -> None:
    with pytest.raises(HostRefused, match="does not resolve"):
        await check_url("https://images.example.invalid/cat.png", Reach.PUBLIC)


# ── connection-time resolver (DNS rebinding) ───────────────────────────────────────────────────────


class FixedResolver(AbstractResolver):
    """A DNS server that answers every name with the given addresses."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            ResolveResult(hostname=host, host=a, port=port, family=family, proto=0, flags=socket.AI_NUMERICHOST)
            for a in self.addresses
        ]

    async def close(self) -> None:
        return None


async def test_resolver_refuses_a_name_rebound_to_the_metadata_service() -> None:
    """A name that was public when the admin added it and now answers 169.254.169.254."""
    resolver = GuardedResolver(Reach.UPSTREAM, FixedResolver("93.184.216.34", "169.254.169.254"))
    with pytest.raises(OSError, match=r"link-local|metadata"):
        await resolver.resolve("api.example.com", 443)


async def test_resolver_refuses_metadata_names_before_asking_dns() -> None:
    resolver = GuardedResolver(Reach.UPSTREAM, FixedResolver("93.184.216.34"))
    with pytest.raises(OSError, match="metadata host name"):
        await resolver.resolve("metadata.google.internal", 80)


async def test_resolver_passes_local_and_public_answers_through() -> None:
    resolver = GuardedResolver(Reach.UPSTREAM, FixedResolver("10.0.0.5", "127.0.0.1"))
    got = await resolver.resolve("ollama.lan", 11434)
    assert [r["host"] for r in got] == ["10.0.0.5", "127.0.0.1"]


# ── failed-authentication limiter ──────────────────────────────────────────────────────────────────


def test_limiter_refuses_past_the_limit_and_flags_only_the_first_over() -> None:
    limiter = AuthFailureLimiter(3)
    now = 1_000_040.0  # 20 s into a window that turns at 1_000_080
    verdicts = [limiter.failed("198.51.100.7", now) for _ in range(6)]
    assert [v.limited for v in verdicts] == [False, False, False, True, True, True]
    assert [v.first_over for v in verdicts] == [False, False, False, True, False, False]
    assert verdicts[3].retry_after_s == 40
    assert not limiter.failed("198.51.100.8", now).limited  # another address has its own count


def test_limiter_forgets_when_the_window_turns() -> None:
    limiter = AuthFailureLimiter(1)
    start = 6_000_000.0
    assert not limiter.failed("203.0.113.1", start).limited
    assert limiter.failed("203.0.113.1", start + 1).limited
    after = limiter.failed("203.0.113.1", start + 60)
    assert not after.limited


def test_limiter_is_off_at_zero_and_bounded_in_addresses() -> None:
    assert not any(AuthFailureLimiter(0).failed("203.0.113.1", 1.0).limited for _ in range(100))
    limiter = AuthFailureLimiter(1, max_tracked=2)
    for ip in ("a", "b"):
        limiter.failed(ip, 5.0)
    assert not limiter.failed("c", 5.0).limited and not limiter.failed("c", 5.0).limited  # not tracked
    assert limiter.failed("a", 5.0).limited  # tracked ones still counted
