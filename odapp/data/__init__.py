"""Loading data: the bundled city, uploads, counts folders and zone files, each session's private folder,
and the cached tables every page reads (traces, weekly trips on the grid)."""
