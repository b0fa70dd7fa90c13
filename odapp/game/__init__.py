"""Play the attacker: its cached pool of people and rounds."""
