"""Typed app keys, in their own module so the app and the control routes can share them without a cycle."""

from __future__ import annotations

from typing import Final

from aiohttp import web

from freellm.sim.state import SimState

__all__ = ["SIM_STATE"]

SIM_STATE: Final = web.AppKey("freellm_sim_state", SimState)
"""The one :class:`SimState` of a simulator app."""
