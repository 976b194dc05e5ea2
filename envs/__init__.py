"""The simulated world: discrete-event cluster simulator, its ground truth, Gymnasium envs.

Importing this package registers the ``oracle`` selector and the
``rlsched/ClusterScheduling-v0`` environment.
"""

from gymnasium.envs.registration import register, registry

from envs.oracle import OracleSelector
from rlsched.policies.registry import register_selector

register_selector("oracle", OracleSelector)

ENV_ID = "rlsched/ClusterScheduling-v0"
if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="envs.gym_env:ClusterSchedulingEnv")
