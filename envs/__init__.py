"""The simulated world: discrete-event cluster simulator, its ground truth, Gymnasium envs.

Importing this package registers the ``rlsched/ClusterScheduling-v0`` environment with Gymnasium
(the Gymnasium convention). The clairvoyant ``oracle`` selector (``envs.oracle``) reaches the policy
registry through the ``rlsched.policies`` entry-point group, not through an import.
"""

from gymnasium.envs.registration import register, registry

ENV_ID = "rlsched/ClusterScheduling-v0"
if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="envs.gym_env:ClusterSchedulingEnv")
