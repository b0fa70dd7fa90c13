"""Widgets and helpers every page shares: the sidebar, page layout, words and numbers, charts, navigation,
the settings in session state, projector mode, downloads and the command line a page reproduces."""
