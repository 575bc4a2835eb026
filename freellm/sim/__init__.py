"""The upstream simulator: a real HTTP server speaking provider wires, with scripted faults.

It stands in for real providers in tests, in ``freellm demo`` and in the benchmark. See
``docs/simulator.md`` for the scenario fields, the ``/_sim/`` control API and the inline directive.
"""

from freellm.sim.app import create_sim_app
from freellm.sim.control import SimControl, SimControlError
from freellm.sim.embeddings import sim_vector
from freellm.sim.keys import SIM_STATE
from freellm.sim.scenario import Scenario, ScenarioError, ToolCallSpec, parse_scenario
from freellm.sim.server import SimServer, run_sim_forever, start_sim
from freellm.sim.settings import SimConfigError, SimSettings, build_sim_settings, load_sim_settings

__all__ = [
    "SIM_STATE",
    "Scenario",
    "ScenarioError",
    "SimConfigError",
    "SimControl",
    "SimControlError",
    "SimServer",
    "SimSettings",
    "ToolCallSpec",
    "build_sim_settings",
    "create_sim_app",
    "load_sim_settings",
    "parse_scenario",
    "run_sim_forever",
    "sim_vector",
    "start_sim",
]
