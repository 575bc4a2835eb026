"""Who sits on a fusion panel (freellm/fusion/panel.py): explicit members resolved through the catalog
and dropped with reasons, the automatic pick, provider/family diversity and model families."""

from __future__ import annotations

import pytest

from freellm.config import ModelLimits, Settings
from freellm.errors import ClientError
from freellm.fusion.panel import Dropped, PanelPlan, automatic_panel, diversify, explicit_panel, model_family
from freellm.routing.catalog import Catalog, ModelRoute


def _route(provider: str, model: str, *, tools: bool = True, vision: bool = False) -> ModelRoute:
    return ModelRoute(
        provider=provider,
        model=model,
        label=f"{provider}/{model}",
        context_window=None,
        tools=tools,
        vision=vision,
        enabled=True,
        limits=ModelLimits(),
        is_local=False,
    )


def _labels(routes: tuple[ModelRoute, ...] | list[ModelRoute]) -> list[str]:
    return [r.label for r in routes]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    """alpha: ``text-a`` (no tools), ``see-a`` (vision), ``shared``, ``off-a`` (disabled);
    beta: ``shared``, ``big-b``; gamma (a disabled provider): ``gone``."""
    return Catalog(
        Settings.model_validate(
            {
                "providers": [
                    {
                        "name": "alpha",
                        "base_url": "http://127.0.0.1:1/v1",
                        "keys": ["k1"],
                        "models": [
                            {"id": "text-a", "tools": False},
                            {"id": "see-a", "vision": True},
                            {"id": "shared"},
                            {"id": "off-a", "enabled": False},
                        ],
                    },
                    {
                        "name": "beta",
                        "base_url": "http://127.0.0.1:2/v1",
                        "keys": ["k2"],
                        "models": [{"id": "shared", "vision": True}, {"id": "big-b"}],
                    },
                    {
                        "name": "gamma",
                        "base_url": "http://127.0.0.1:3/v1",
                        "keys": ["k3"],
                        "enabled": False,
                        "models": [{"id": "gone"}],
                    },
                ]
            }
        )
    )


def _explicit(
    catalog: Catalog,
    names: list[str],
    *,
    k: int = 4,
    cap: int = 8,
    tools: bool = False,
    vision: bool = False,
    allowed: frozenset[str] | None = None,
) -> PanelPlan:
    if allowed is None:
        return explicit_panel(names, catalog.member, k=k, cap=cap, tools=tools, vision=vision)
    return explicit_panel(
        names, catalog.member, k=k, cap=cap, tools=tools, vision=vision, allowed=lambda name: name in allowed
    )


# ---- explicit panels --------------------------------------------------------------------------------


def test_explicit_members_resolve_in_the_order_given(catalog: Catalog) -> None:
    plan = _explicit(catalog, ["beta/big-b", "alpha/text-a", "shared"])
    assert _labels(plan.members) == ["beta/big-b", "alpha/text-a", "alpha/shared"], (
        "a model id: its first route"
    )
    assert plan.pool == ()
    assert plan.dropped == ()


def test_pins_accept_the_colon_form_and_any_case(catalog: Catalog) -> None:
    plan = _explicit(catalog, ["BETA:Shared", "Alpha/See-A"])
    assert _labels(plan.members) == ["beta/shared", "alpha/see-a"]


def test_the_first_k_answer_and_the_next_k_are_the_refill_pool(catalog: Catalog) -> None:
    names = ["alpha/text-a", "alpha/see-a", "alpha/shared", "beta/shared", "beta/big-b"]
    plan = _explicit(catalog, names, k=2)
    assert _labels(plan.members) == ["alpha/text-a", "alpha/see-a"]
    assert _labels(plan.pool) == ["alpha/shared", "beta/shared"]
    assert plan.dropped == (), "a member beyond 2k is neither dispatched nor reported as dropped"


def test_unknown_and_disabled_members_are_dropped_with_reasons(catalog: Catalog) -> None:
    plan = _explicit(catalog, ["nope", "alpha/off-a", "off-a", "gamma/gone", "gone", "beta/big-b", "zeta/x"])
    assert _labels(plan.members) == ["beta/big-b"]
    assert plan.dropped == (
        Dropped("nope", "unknown"),
        Dropped("alpha/off-a", "disabled"),
        Dropped("off-a", "disabled"),
        Dropped("gamma/gone", "disabled"),
        Dropped("gone", "disabled"),
        Dropped("zeta/x", "unknown"),
    )


def test_members_without_a_needed_capability_are_dropped(catalog: Catalog) -> None:
    plan = _explicit(catalog, ["alpha/text-a", "alpha/see-a", "beta/big-b"], tools=True, vision=True)
    assert _labels(plan.members) == ["alpha/see-a"]
    assert plan.dropped == (Dropped("alpha/text-a", "no_tools"), Dropped("beta/big-b", "no_vision"))


def test_capabilities_not_needed_are_not_checked(catalog: Catalog) -> None:
    plan = _explicit(catalog, ["alpha/text-a", "beta/big-b"], tools=False, vision=False)
    assert _labels(plan.members) == ["alpha/text-a", "beta/big-b"]
    assert plan.dropped == ()


def test_members_the_profile_does_not_allow_are_dropped_before_resolution(catalog: Catalog) -> None:
    plan = _explicit(
        catalog, ["beta/big-b", "alpha/see-a", "not-even-known"], allowed=frozenset({"alpha/see-a"})
    )
    assert _labels(plan.members) == ["alpha/see-a"]
    assert plan.dropped == (Dropped("beta/big-b", "not_allowed"), Dropped("not-even-known", "not_allowed"))


def test_duplicates_are_kept_once_silently(catalog: Catalog) -> None:
    plan = _explicit(catalog, ["shared", "alpha/shared", "ALPHA:shared", "beta/big-b", "beta/big-b"])
    assert _labels(plan.members) == ["alpha/shared", "beta/big-b"]
    assert plan.dropped == ()


def test_members_past_the_cap_are_dropped_over_cap(catalog: Catalog) -> None:
    names = ["alpha/text-a", "alpha/see-a", "alpha/shared", "beta/shared", "beta/big-b"]
    plan = _explicit(catalog, names, k=2, cap=3)
    assert _labels(plan.members) == ["alpha/text-a", "alpha/see-a"]
    assert _labels(plan.pool) == ["alpha/shared"]
    assert plan.dropped == (Dropped("beta/shared", "over_cap"), Dropped("beta/big-b", "over_cap"))


def test_a_dropped_member_does_not_use_a_cap_slot(catalog: Catalog) -> None:
    plan = _explicit(catalog, ["nope", "alpha/off-a", "beta/big-b", "beta/shared"], k=2, cap=2)
    assert _labels(plan.members) == ["beta/big-b", "beta/shared"]
    assert [d.reason for d in plan.dropped] == ["unknown", "disabled"]


def test_works_over_plain_routes_and_a_plain_resolver() -> None:
    routes = {r.label: r for r in (_route("p", "one"), _route("q", "two", tools=False))}
    plan = explicit_panel(
        ["p/one", "q/two", "r/three"],
        lambda n: routes.get(n, "unknown"),
        k=1,
        cap=8,
        tools=True,
        vision=False,
    )
    assert _labels(plan.members) == ["p/one"]
    assert plan.pool == ()
    assert plan.dropped == (Dropped("q/two", "no_tools"), Dropped("r/three", "unknown"))


def test_no_member_left_is_a_400_naming_every_dropped_member(catalog: Catalog) -> None:
    with pytest.raises(ClientError) as info:
        _explicit(catalog, ["nope", "alpha/off-a", "alpha/text-a", "beta/big-b"], tools=True, vision=True)
    err = info.value
    assert err.status == 400
    assert err.code == "fusion_no_panel"
    assert err.param == "fusion.models"
    assert err.message == (
        "No fusion panel: every requested member was dropped: nope (unknown), alpha/off-a (disabled), "
        "alpha/text-a (no_tools), beta/big-b (no_vision)."
    )


def test_no_member_given_is_a_400_saying_so(catalog: Catalog) -> None:
    with pytest.raises(ClientError) as info:
        _explicit(catalog, [])
    assert info.value.code == "fusion_no_panel"
    assert info.value.message == "No fusion panel: every requested member was dropped: none given."


def test_none_allowed_is_a_400(catalog: Catalog) -> None:
    with pytest.raises(ClientError) as info:
        _explicit(catalog, ["beta/big-b"], allowed=frozenset())
    assert "beta/big-b (not_allowed)" in info.value.message


# ---- automatic panels -------------------------------------------------------------------------------


def test_automatic_panel_takes_k_diverse_members_and_the_next_k_as_pool() -> None:
    candidates = [
        _route("a", "llama-3.3-70b"),
        _route("a", "qwen-2.5-72b"),
        _route("b", "llama-3.3-70b"),
        _route("c", "mistral-large"),
        _route("b", "gemma-3-27b"),
        _route("c", "phi-4"),
    ]
    plan = automatic_panel(candidates, k=2)
    assert _labels(plan.members) == ["a/llama-3.3-70b", "c/mistral-large"]
    assert _labels(plan.pool) == ["b/llama-3.3-70b", "a/qwen-2.5-72b"]
    assert plan.dropped == ()


def test_automatic_panel_with_fewer_candidates_than_k() -> None:
    plan = automatic_panel([_route("a", "x"), _route("a", "y")], k=4)
    assert _labels(plan.members) == ["a/x", "a/y"]
    assert plan.pool == ()


def test_automatic_panel_without_candidates_is_a_400() -> None:
    with pytest.raises(ClientError) as info:
        automatic_panel([], k=3)
    err = info.value
    assert err.status == 400
    assert err.code == "fusion_no_panel"
    assert err.param == "model"
    assert "no model can serve this request right now" in err.message


# ---- diversity ----------------------------------------------------------------------------------------


def test_diversify_puts_one_route_per_provider_first() -> None:
    routes = [_route("a", "m1"), _route("a", "m2"), _route("b", "m3"), _route("a", "m4"), _route("c", "m5")]
    assert _labels(diversify(routes)) == ["a/m1", "b/m3", "c/m5", "a/m2", "a/m4"]


def test_diversify_demotes_a_repeated_family_within_the_first_part() -> None:
    routes = [_route("a", "org/Llama-3.3-70B:free"), _route("b", "llama-3.3-70b"), _route("c", "qwen3-32b")]
    assert _labels(diversify(routes)) == ["a/org/Llama-3.3-70B:free", "c/qwen3-32b", "b/llama-3.3-70b"]


def test_diversify_demotes_families_already_seen_in_the_first_part_within_the_rest() -> None:
    routes = [
        _route("a", "gemma-3"),
        _route("b", "qwen3"),
        _route("a", "qwen3:free"),  # rest; family seen first
        _route("b", "phi-4"),  # rest; new family
        _route("a", "phi-4"),  # rest; family seen in rest
        _route("b", "mistral"),  # rest; new family
    ]
    assert _labels(diversify(routes)) == [
        "a/gemma-3",
        "b/qwen3",
        "b/phi-4",
        "b/mistral",
        "a/qwen3:free",
        "a/phi-4",
    ]


def test_a_first_part_route_is_never_moved_behind_the_rest() -> None:
    routes = [_route("a", "same"), _route("a", "new"), _route("b", "same")]
    out = _labels(diversify(routes))
    assert out == ["a/same", "b/same", "a/new"], "b's only route leads the rest even with a repeated family"


def test_diversify_dedupes_by_label_keeping_the_first_position() -> None:
    routes = [_route("a", "x"), _route("b", "y"), _route("a", "x"), _route("a", "z"), _route("b", "y")]
    assert _labels(diversify(routes)) == ["a/x", "b/y", "a/z"]


def test_diversify_is_stable_when_everything_is_distinct() -> None:
    routes = [_route(p, f"model-{p}") for p in "dcbaef"]
    assert diversify(routes) == routes


def test_diversify_of_nothing_is_nothing() -> None:
    assert diversify([]) == []


def test_diversify_does_not_change_its_input() -> None:
    routes = [_route("a", "m1"), _route("a", "m2"), _route("b", "m1")]
    copy = list(routes)
    diversify(routes)
    assert routes == copy


# ---- model families ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "family"),
    [
        ("org/Llama-3.3-70B:free", "llama-3.3-70b"),
        ("llama-3.3-70b", "llama-3.3-70b"),
        ("meta-llama/llama-3.3-70b-instruct", "llama-3.3-70b-instruct"),
        ("a/b/c/Qwen3-32B", "qwen3-32b"),
        ("gemma3:27b", "gemma3"),
        ("deepseek-r1:free:extra", "deepseek-r1"),
        ("GPT-4o", "gpt-4o"),
        ("", ""),
    ],
)
def test_model_family(model_id: str, family: str) -> None:
    assert model_family(model_id) == family
