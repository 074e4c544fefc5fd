"""Clone fidelity: captures of real screens scored against the clone's rendering of the same screen."""
