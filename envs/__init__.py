"""The simulated world: discrete-event cluster simulator, its ground truth, Gymnasium envs.

Importing this package registers the ``rlsched/ClusterScheduling-v0`` environment with Gymnasium
(the Gymnasium convention). The clairvoyant ``oracle`` selector (``envs.oracle``) reaches the policy
registry through the ``rlsched.policies`` entry-point group, not through an import.
"""

from gymnasium.envs.registration import register, registry

from rlsched.lazy import lazy_dir, lazy_exports

_EXPORTS = {
    "Simulator": "envs.simulator",
    "ClusterSchedulingEnv": "envs.gym_env",
    "SimulatedWorlds": "envs.simulated_worlds",
    "capacity_bound": "envs.capacity",
    "OracleSelector": "envs.oracle",
    "SimulatedProfiler": "envs.simulated_instrument",
}
__all__ = ["ENV_ID", *sorted(_EXPORTS)]
__getattr__ = lazy_exports(__name__, _EXPORTS)
__dir__ = lazy_dir(__name__, _EXPORTS)

ENV_ID = "rlsched/ClusterScheduling-v0"
if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="envs.gym_env:ClusterSchedulingEnv")
