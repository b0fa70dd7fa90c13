"""The Knock Knock page: its cached location time-series and defences' error."""
