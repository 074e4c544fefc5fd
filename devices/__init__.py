"""Everything that talks to a phone: the uiautomator2 driver, the virtual phone and the farm."""

# A task parameter drawn from a clone's start state (``from_state``) needs the clones' samplers
# registered wherever a pack is instantiated, a run on a real phone included.
import clones.registry  # noqa: F401
