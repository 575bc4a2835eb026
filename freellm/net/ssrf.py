"""The SSRF guard: which addresses a URL the gateway fetches on somebody's behalf may reach.

Two kinds of URL reach the gateway from outside its configuration file, and each has its own rule
(:class:`Reach`):

* ``Reach.PUBLIC`` — URLs a *client* puts in a request (remote images the Gemini provider must inline).
  Any client with a key can send one, so only public unicast addresses are fetched: loopback, private
  LAN, link-local, carrier-grade NAT, multicast, reserved and cloud-metadata addresses are refused.
* ``Reach.UPSTREAM`` — provider base URLs added or changed at run time through the admin API. A
  self-hosted gateway's users run Ollama, vLLM or llama.cpp on ``127.0.0.1`` or on a LAN box
  (``10.x``, ``192.168.x``), so loopback and private addresses stay allowed; what is refused is the
  link-local range (``169.254.0.0/16``, ``fe80::/10``) and the cloud-metadata endpoints
  (:data:`METADATA_ADDRESSES`, :data:`METADATA_HOSTS`) — the targets that turn a leaked or phished
  admin key into the host's cloud credentials. ``security.allow_private_upstreams: true`` lifts it.

Provider base URLs in the configuration file are trusted: whoever writes the file owns the host.

A host is checked twice: when the URL is accepted (:func:`check_url`: the literal address, the name
against :data:`METADATA_HOSTS`, then every address the name resolves to), and — for run-time providers —
again at every connection, by :class:`GuardedResolver`, so a name that resolved to a public address when
the admin added it cannot be re-pointed at the metadata service later (DNS rebinding). aiohttp does not
call a resolver for address literals, which is why literals are settled at acceptance, once and for all.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from enum import Enum
from typing import Final
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

__all__ = [
    "METADATA_ADDRESSES",
    "METADATA_HOSTS",
    "GuardedResolver",
    "HostRefused",
    "Reach",
    "address_refusal",
    "check_host",
    "check_url",
    "is_public",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class Reach(Enum):
    """What a URL may reach (see the module doc)."""

    PUBLIC = "public"
    UPSTREAM = "upstream"


class HostRefused(Exception):
    """A host the policy refuses; the message says why (safe to show an admin: it names only the host)."""


METADATA_ADDRESSES: Final[frozenset[IPAddress]] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle, Hetzner instance metadata
        "169.254.170.2",  # AWS ECS task credentials endpoint
        "fd00:ec2::254",  # AWS instance metadata over IPv6 (Nitro)
        "100.100.100.200",  # Alibaba Cloud metadata (inside the carrier-grade NAT range)
        "192.0.0.192",  # Oracle Cloud legacy metadata
        "168.63.129.16",  # Azure WireServer (host agent channel, reachable from every Azure VM)
    )
)
"""Cloud-metadata endpoints, refused by both policies (the link-local ones are refused as link-local too)."""

METADATA_HOSTS: Final[frozenset[str]] = frozenset(
    {
        "metadata.google.internal",  # GCP
        "metadata.goog",  # GCP
        "metadata",  # GCP short name (resolves through the instance's search domain)
        "instance-data",  # AWS EC2
        "instance-data.ec2.internal",  # AWS EC2
        "metadata.azure.internal",  # Azure (documented alias of 169.254.169.254 in some images)
        "metadata.tencentyun.com",  # Tencent Cloud
        "metadata.platformequinix.com",  # Equinix Metal
    }
)
"""Names of metadata services, refused before any resolution (they may resolve only inside the cloud)."""

_NAT64: Final = ipaddress.ip_network("64:ff9b::/96")
"""The well-known NAT64 prefix: ``64:ff9b::a9fe:a9fe`` reaches ``169.254.169.254`` through a NAT64 gateway."""


def _unwrap(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one stands for (IPv4-mapped ``::ffff:a.b.c.d``, NAT64), else ``ip``."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def parse_address(text: str) -> IPAddress | None:
    """``text`` as an IP address (brackets and an IPv6 zone id allowed), or None for a name."""
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def is_public(address: str) -> bool:
    """True for a public unicast address (``Reach.PUBLIC``'s rule). ValueError for a name."""
    ip = parse_address(address)
    if ip is None:
        raise ValueError(f"{address!r} is not an IP address")
    return address_refusal(ip, Reach.PUBLIC) is None


def address_refusal(ip: IPAddress, reach: Reach) -> str | None:
    """Why ``reach`` refuses ``ip`` (a short phrase), or None when it may be reached."""
    ip = _unwrap(ip)
    if ip in METADATA_ADDRESSES:
        return "a cloud-metadata address"
    if ip.is_link_local:
        return "a link-local address"
    if reach is Reach.PUBLIC and not (ip.is_global and not ip.is_multicast):
        return "not a public address"
    return None


def _name_refusal(host: str) -> str | None:
    if host.lower().rstrip(".") in METADATA_HOSTS:
        return "a cloud-metadata host name"
    return None


async def check_host(host: str, port: int | None, reach: Reach, *, unresolvable_ok: bool = False) -> None:
    """Raise :class:`HostRefused` unless ``reach`` allows ``host`` and every address it resolves to.

    ``unresolvable_ok``: a name that does not resolve now passes (``Reach.UPSTREAM``: the connection-time
    :class:`GuardedResolver` checks it again whenever it does); for ``Reach.PUBLIC`` it is refused.
    """
    ip = parse_address(host)
    if ip is not None:
        reason = address_refusal(ip, reach)
        if reason is not None:
            raise HostRefused(f"{host} is {reason}")
        return
    reason = _name_refusal(host)
    if reason is not None:
        raise HostRefused(f"{host} is {reason}")
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port or 443, type=socket.SOCK_STREAM)
    except OSError:
        infos = []
    if not infos:
        if unresolvable_ok:
            return
        raise HostRefused(f"{host} does not resolve")
    for info in infos:
        address = info[4][0]
        resolved = parse_address(address) if isinstance(address, str) else None
        why = "an unparseable address" if resolved is None else address_refusal(resolved, reach)
        if why is not None:
            raise HostRefused(f"{host} resolves to {why}")


async def check_url(url: str, reach: Reach) -> None:
    """:func:`check_host` for an ``http(s)`` URL's host; HostRefused for another scheme or no host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HostRefused("an http(s) URL with a host is required")
    try:
        port = parts.port
    except ValueError:
        raise HostRefused("the URL's port is not a number in 0-65535") from None
    await check_host(parts.hostname, port, reach, unresolvable_ok=reach is Reach.UPSTREAM)


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that refuses, at every connection, names ``reach`` does not allow.

    Wraps aiohttp's default resolver. A name on :data:`METADATA_HOSTS`, or one that resolves to any
    refused address, fails the connection with ``OSError`` (aiohttp reports a connector error, which the
    engine classifies like any unreachable upstream).
    """

    def __init__(self, reach: Reach, inner: AbstractResolver | None = None) -> None:
        self._reach = reach
        self._inner = inner if inner is not None else DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        reason = _name_refusal(host)
        if reason is not None:
            raise OSError(f"{host} is {reason} (security.allow_private_upstreams is false)")
        results = await self._inner.resolve(host, port, family)
        for result in results:
            ip = parse_address(result["host"])
            why = "an unparseable address" if ip is None else address_refusal(ip, self._reach)
            if why is not None:
                raise OSError(f"{host} resolves to {why} (security.allow_private_upstreams is false)")
        return results

    async def close(self) -> None:
        await self._inner.close()
