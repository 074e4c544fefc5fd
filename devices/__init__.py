"""Everything that talks to a phone: the uiautomator2 driver, the virtual phone and the farm."""
