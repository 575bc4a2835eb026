"""check_limits: the RPM/RPD/TPM/TPD gate (spec §2 "Rate limiting"), table-driven."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from freellm.config import ModelLimits
from freellm.routing.limits import ALLOWED, LimitVerdict, check_limits
from freellm.store.base import UsageSnapshot

M = 1_700_000_100.0  # minute window frees
D = 1_700_050_000.0  # day window frees


@dataclass(frozen=True)
class Case:
    id: str
    limits: ModelLimits
    usage: UsageSnapshot
    estimate: int
    want: LimitVerdict
    note: str = field(default="")


def lim(
    rpm: int | None = None, rpd: int | None = None, tpm: int | None = None, tpd: int | None = None
) -> ModelLimits:
    return ModelLimits(rpm=rpm, rpd=rpd, tpm=tpm, tpd=tpd)


def use(
    rm: int = 0, rd: int = 0, tm: int = 0, td: int = 0, lr: int = 0, lt: int = 0, timed: bool = True
) -> UsageSnapshot:
    return UsageSnapshot(
        requests_minute=rm,
        requests_day=rd,
        tokens_minute=tm,
        tokens_day=td,
        leased_requests=lr,
        leased_tokens=lt,
        minute_frees_at=M if timed and (rm or tm) else None,
        day_frees_at=D if timed and (rd or td) else None,
    )


def deny(reason: str, retry_at: float | None) -> LimitVerdict:
    return LimitVerdict(ok=False, reason=reason, retry_at=retry_at)  # type: ignore[arg-type]


CASES = [
    # -- unknown limits are unlimited
    Case("no-limits", lim(), use(rm=10_000, rd=10**6, tm=10**9, td=10**12, lr=500, lt=10**9), 10**6, ALLOWED),
    Case("empty-usage", lim(rpm=1, rpd=1, tpm=10, tpd=10), use(), 10, ALLOWED),
    # -- requests: used + leases >= limit denies
    Case("rpm-below", lim(rpm=30), use(rm=29, rd=29), 100, ALLOWED),
    Case("rpm-at", lim(rpm=30), use(rm=30, rd=30), 100, deny("rpm", M)),
    Case("rpm-over", lim(rpm=30), use(rm=45, rd=45), 100, deny("rpm", M)),
    Case("rpm-leases-tip", lim(rpm=30), use(rm=28, rd=28, lr=2), 100, deny("rpm", M)),
    Case("rpm-leases-only", lim(rpm=2), use(lr=2), 100, deny("rpm", None), "nothing ages out"),
    Case("rpm-leases-fill-alone", lim(rpm=2), use(rm=1, rd=1, lr=2), 1, deny("rpm", None)),
    Case("rpm-one-lease-below", lim(rpm=2), use(lr=1), 1, ALLOWED),
    Case("rpm-zero", lim(rpm=0), use(), 1, deny("rpm", None), "a zero limit never passes"),
    Case("rpd-below", lim(rpd=1000), use(rm=3, rd=999), 1, ALLOWED),
    Case("rpd-at", lim(rpd=1000), use(rm=3, rd=1000), 1, deny("rpd", D)),
    Case("rpd-leases-tip", lim(rpd=1000), use(rd=998, lr=2), 1, deny("rpd", D)),
    # -- tokens: used + leased + estimate > limit denies (equal is fine)
    Case("tpm-fits-exactly", lim(tpm=6000), use(rm=1, rd=1, tm=4000, td=4000, lt=1000), 1000, ALLOWED),
    Case("tpm-one-over", lim(tpm=6000), use(rm=1, rd=1, tm=4000, td=4000, lt=1000), 1001, deny("tpm", M)),
    Case("tpm-estimate-alone-over", lim(tpm=6000), use(rm=1, tm=10), 6001, deny("tpm", None)),
    Case("tpm-leases-and-estimate", lim(tpm=6000), use(lt=5500), 501, deny("tpm", None)),
    Case("tpm-no-usage-fits", lim(tpm=6000), use(), 6000, ALLOWED),
    Case("tpd-fits", lim(tpd=500_000), use(rd=10, td=499_000), 1000, ALLOWED),
    Case("tpd-over", lim(tpd=500_000), use(rd=10, td=499_000), 1001, deny("tpd", D)),
    # -- precedence: daily over minute, requests over tokens; retry_at is the latest freeing window
    Case("rpm-and-rpd", lim(rpm=10, rpd=100), use(rm=10, rd=100), 1, deny("rpd", D)),
    Case("rpm-and-tpm", lim(rpm=10, tpm=100), use(rm=10, rd=10, tm=100, td=100), 1, deny("rpm", M)),
    Case("tpm-and-tpd", lim(tpm=100, tpd=1000), use(rm=1, rd=1, tm=100, td=1000), 1, deny("tpd", D)),
    Case("rpm-and-tpd", lim(rpm=10, tpd=1000), use(rm=10, rd=10, tm=10, td=1000), 1, deny("tpd", D)),
    Case(
        "rpd-leases-only-and-rpm",
        lim(rpm=5, rpd=2),
        use(rm=5, rd=0, lr=2),
        1,
        deny("rpd", M),
        "rpd can't age out; the minute window still bounds the retry from below",
    ),
    Case("all-four", lim(rpm=1, rpd=1, tpm=1, tpd=1), use(rm=1, rd=1, tm=1, td=1), 1, deny("rpd", D)),
    Case(
        "only-minute-limits-day-heavy",
        lim(rpm=60, tpm=10_000),
        use(rm=1, rd=50_000, tm=10, td=10**8),
        10,
        ALLOWED,
    ),
    # -- a store that gives no timestamps: still a verdict, no retry hint
    Case("untimed-store", lim(rpm=1), use(rm=1, rd=1, timed=False), 1, deny("rpm", None)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_check_limits(case: Case) -> None:
    assert check_limits(case.limits, case.usage, case.estimate) == case.want


def test_allowed_is_shared() -> None:
    v = check_limits(lim(rpm=10), use(rm=1, rd=1), 1)
    assert v is ALLOWED and v.ok and v.reason is None and v.retry_at is None


def test_verdict_is_frozen() -> None:
    v = check_limits(lim(rpm=1), use(rm=1, rd=1), 1)
    with pytest.raises(AttributeError):
        v.ok = True  # type: ignore[misc]
