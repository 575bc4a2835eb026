"""toolfilter's rules: the schema (:mod:`.model`), the built-in definitions (:mod:`.builtin`) and the
operator's custom filter files (:mod:`.custom`)."""

from freellm.compression.filters.builtin import BUILTIN_RULES
from freellm.compression.filters.custom import MAX_CUSTOM_RULES, load_custom_filters
from freellm.compression.filters.model import CompiledRule, FilterRule, compile_rule

__all__ = ["BUILTIN_RULES", "MAX_CUSTOM_RULES", "CompiledRule", "FilterRule", "compile_rule", "load_custom_filters"]
