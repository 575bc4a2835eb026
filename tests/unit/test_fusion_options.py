"""A fusion request's options (freellm/fusion/options.py): the request's object merged over the
``fusion`` config section, and every malformed field a 400 naming it before any upstream call."""

from __future__ import annotations

import json
from typing import Any

import pytest

from freellm.config import FusionConfig
from freellm.errors import ClientError
from freellm.fusion.options import FUSION_MODEL, FusionOptions, fusion_options, is_fusion_model


def _cfg(**fields: Any) -> FusionConfig:
    return FusionConfig.model_validate(fields)


def _bad(raw: object, *, cfg: FusionConfig | None = None, param: str = "fusion") -> ClientError:
    with pytest.raises(ClientError) as info:
        fusion_options(raw, cfg or _cfg(), param=param)
    err = info.value
    assert err.status == 400
    assert err.code == "invalid_fusion_options"
    assert err.type == "invalid_request_error"
    assert err.message.startswith(f"Invalid request: {err.param}: ")
    return err


# ---- the model name -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fusion", "FUSION", " Fusion ", "fusion\n"])
def test_fusion_model_name_is_case_and_space_insensitive(name: str) -> None:
    assert is_fusion_model(name)


@pytest.mark.parametrize("name", ["auto", "fusion:2", "alpha/fusion", "fusions", ""])
def test_other_names_are_not_fusion(name: str) -> None:
    assert not is_fusion_model(name)
    assert FUSION_MODEL == "fusion"


# ---- defaults and merging -----------------------------------------------------------------------------


def test_no_object_gives_the_config_defaults() -> None:
    cfg = _cfg(default_k=3, max_k=5, panel_timeout_s=12.5, max_cost_tokens=9000)
    assert fusion_options(None, cfg, param="fusion") == FusionOptions(
        models=(),
        k=3,
        judge=None,
        strategy="synthesize",
        expose_panel=False,
        max_k=5,
        panel_timeout_s=12.5,
        max_cost_tokens=9000,
    )


def test_the_built_in_defaults() -> None:
    opts = fusion_options({}, FusionConfig(), param="fusion")
    assert (opts.models, opts.k, opts.max_k, opts.judge, opts.strategy, opts.expose_panel) == (
        (),
        4,
        8,
        None,
        "synthesize",
        False,
    )
    assert (opts.panel_timeout_s, opts.max_cost_tokens) == (0.0, 0)


def test_the_config_panel_judge_and_strategy_apply_when_the_request_says_nothing() -> None:
    cfg = _cfg(panel=["alpha/a", "b", "c"], judge="alpha/judge", strategy="best_of", max_k=8)
    opts = fusion_options({}, cfg, param="fusion")
    assert opts.models == ("alpha/a", "b", "c")
    assert opts.k == 3, "explicit members and no k: one slot per member"
    assert opts.judge == "alpha/judge"
    assert opts.strategy == "best_of"


def test_request_fields_override_the_config() -> None:
    cfg = _cfg(panel=["a", "b"], judge="cfg-judge", strategy="best_of", default_k=2, max_k=6)
    raw = {
        "models": ["x", "y", "z"],
        "k": 2,
        "judge": "req-judge",
        "strategy": "synthesize",
        "expose_panel": True,
    }
    opts = fusion_options(raw, cfg, param="fusion")
    assert opts.models == ("x", "y", "z")
    assert opts.k == 2
    assert opts.judge == "req-judge"
    assert opts.strategy == "synthesize"
    assert opts.expose_panel is True
    assert opts.max_k == 6


def test_null_fields_keep_the_config_value() -> None:
    cfg = _cfg(judge="cfg-judge", strategy="best_of", default_k=3)
    raw = {"k": None, "judge": None, "strategy": None, "expose_panel": None}
    opts = fusion_options(raw, cfg, param="fusion")
    assert (opts.k, opts.judge, opts.strategy, opts.expose_panel) == (3, "cfg-judge", "best_of", False)


def test_null_models_keep_the_configured_panel() -> None:
    opts = fusion_options({"models": None}, _cfg(panel=["a", "b"], default_k=3), param="fusion")
    assert opts.models == ("a", "b") and opts.k == 2


@pytest.mark.parametrize("value", [[], "", " , "])
def test_empty_models_mean_an_automatic_panel_even_over_a_configured_one(value: object) -> None:
    opts = fusion_options({"models": value}, _cfg(panel=["a", "b"], default_k=3), param="fusion")
    assert opts.models == ()
    assert opts.k == 3


def test_a_json_string_object_is_parsed() -> None:
    raw = json.dumps({"models": ["a", "b"], "strategy": "best_of", "expose_panel": True})
    opts = fusion_options(raw, _cfg(), param="metadata.fusion")
    assert opts.models == ("a", "b")
    assert opts.k == 2
    assert opts.strategy == "best_of"
    assert opts.expose_panel is True


def test_models_may_be_a_comma_separated_string_stripped_and_without_empties() -> None:
    opts = fusion_options({"models": " alpha/a , b,, c ,"}, _cfg(), param="fusion")
    assert opts.models == ("alpha/a", "b", "c")
    assert opts.k == 3


def test_model_names_and_judge_are_stripped_and_keep_their_order() -> None:
    opts = fusion_options({"models": [" z ", "a", "z"], "judge": "  beta/j  "}, _cfg(), param="fusion")
    assert opts.models == ("z", "a", "z"), "order kept; deduplication is the panel's job"
    assert opts.judge == "beta/j"


# ---- k ---------------------------------------------------------------------------------------------------


def test_k_with_explicit_models_and_no_k_is_capped_at_max_k() -> None:
    opts = fusion_options({"models": [f"m{i}" for i in range(7)]}, _cfg(default_k=2, max_k=4), param="fusion")
    assert opts.k == 4
    assert len(opts.models) == 7


def test_k_without_models_is_the_default() -> None:
    assert fusion_options({}, _cfg(default_k=2, max_k=4), param="fusion").k == 2
    assert fusion_options({}, _cfg(default_k=4, max_k=4), param="fusion").k == 4


@pytest.mark.parametrize("k", [1, 3, 5])
def test_k_within_range_is_kept(k: int) -> None:
    opts = fusion_options({"k": k, "models": ["a"]}, _cfg(max_k=5), param="fusion")
    assert opts.k == k, "an explicit k may exceed the member count"


def test_an_integral_float_k_is_an_integer() -> None:
    opts = fusion_options({"k": 3.0}, _cfg(), param="fusion")
    assert opts.k == 3
    assert type(opts.k) is int


@pytest.mark.parametrize("k", [0, -1, 9, 100, 9.0])
def test_k_out_of_range_is_a_400_naming_k(k: int | float) -> None:
    err = _bad({"k": k}, cfg=_cfg(max_k=8))
    assert err.param == "fusion.k"
    assert "between 1 and 8" in err.message


@pytest.mark.parametrize("k", ["2", 2.5, True, False, [2], {"n": 2}, float("nan"), float("inf")])
def test_a_non_integer_k_is_a_400_naming_k(k: object) -> None:
    err = _bad({"k": k})
    assert err.param == "fusion.k"
    assert err.message == "Invalid request: fusion.k: Input should be a valid integer"


def test_the_param_follows_the_surface() -> None:
    err = _bad({"k": 0}, param="metadata.fusion")
    assert err.param == "metadata.fusion.k"
    err = _bad(json.dumps({"k": "3"}), param="metadata.fusion")
    assert err.param == "metadata.fusion.k"


# ---- the other fields --------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["best-of", "SYNTHESIZE", "", 1, True, ["best_of"]])
def test_a_bad_strategy_is_a_400_naming_it(strategy: object) -> None:
    err = _bad({"strategy": strategy})
    assert err.param == "fusion.strategy"
    assert "'synthesize' or 'best_of'" in err.message


@pytest.mark.parametrize("expose", ["true", 1, 0, "yes", {}])
def test_a_non_bool_expose_panel_is_a_400_naming_it(expose: object) -> None:
    err = _bad({"expose_panel": expose})
    assert err.param == "fusion.expose_panel"
    assert "valid boolean" in err.message


@pytest.mark.parametrize("judge", ["", "   ", 3, ["a"], True])
def test_a_bad_judge_is_a_400_naming_it(judge: object) -> None:
    err = _bad({"judge": judge})
    assert err.param == "fusion.judge"
    assert "non-empty string" in err.message


@pytest.mark.parametrize("models", [{"a": 1}, 3, True])
def test_models_that_are_not_a_list_are_a_400_naming_them(models: object) -> None:
    err = _bad({"models": models})
    assert err.param == "fusion.models"
    assert "list of model names" in err.message


def test_a_bad_model_entry_is_a_400_naming_its_index() -> None:
    err = _bad({"models": ["a", "  ", "c"]})
    assert err.param == "fusion.models.1"
    err = _bad({"models": ["a", "b", 7]}, param="metadata.fusion")
    assert err.param == "metadata.fusion.models.2"


def test_unknown_fields_are_a_400_listing_them_and_the_allowed_ones() -> None:
    err = _bad({"k": 2, "temperature": 0.2, "Models": ["a"]})
    assert err.param == "fusion"
    assert err.message == (
        "Invalid request: fusion: unknown field(s) Models, temperature; "
        "allowed: expose_panel, judge, k, models, strategy"
    )


@pytest.mark.parametrize("raw", [[{"k": 2}], 3, True, "[1, 2]", '"text"', "null", "3"])
def test_a_non_object_is_a_400_naming_the_object(raw: object) -> None:
    err = _bad(raw, param="metadata.fusion")
    assert err.param == "metadata.fusion"
    assert err.message == "Invalid request: metadata.fusion: Input should be an object"


@pytest.mark.parametrize("raw", ["{k: 2}", "", "{", "not json"])
def test_a_string_that_is_not_json_is_a_400_naming_the_object(raw: str) -> None:
    err = _bad(raw, param="metadata.fusion")
    assert err.param == "metadata.fusion"
    assert "JSON string" in err.message


def test_the_first_bad_field_is_reported_and_the_input_is_not_changed() -> None:
    raw: dict[str, Any] = {"models": ["a"], "k": 0, "strategy": "nope"}
    before = json.dumps(raw)
    err = _bad(raw)
    assert err.param == "fusion.strategy", "strategy is checked before k"
    assert json.dumps(raw) == before
