"""The verifiers plugin id `kernelarena-verifiers`: verifiers imports a plugin by its id
as a top-level module, so this one re-exports kernelarena.integrations.verifiers (its
Taskset, Env and Harness; docs/trainers.md, "verifiers")."""

from kernelarena.integrations.verifiers import *  # noqa: F401,F403
from kernelarena.integrations.verifiers import __all__  # noqa: F401
