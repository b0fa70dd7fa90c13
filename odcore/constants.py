"""Column names used across the engine (one place, so pages and CLI agree).

Trace table schema (see README "Data formats"):

==========  ====================================  =========================
column      meaning                               dtype
==========  ====================================  =========================
``user``    pseudonymous user id                  string or integer
``time``    timestamp, UTC                        datetime64[ns, UTC]
``lat``     latitude, WGS84 degrees               float64
``lon``     longitude, WGS84 degrees              float64
``loc``     optional precomputed location id      integer (e.g. POI id)
==========  ====================================  =========================
"""

USER = "user"
TIME = "time"
LAT = "lat"
LON = "lon"
LOC = "loc"

CELL = "cell"
WEEK = "week"
HOUR = "hour"
ORIGIN = "origin"
DESTINATION = "destination"
COUNT = "count"          # distinct users on an (week, origin, destination) pair
TRIPS = "trips"          # total trips of a user in a week
UNIQUE_TRIPS = "unique_trips"
USER_WEEKS = "user_weeks"  # active user-weeks with given (week, trips, unique_trips): ODData.user_week_histogram()

TRUE_COUNT = "true_count"
NOISE = "noise"
NOISY_COUNT = "noisy_count"
RELEASED = "released"
RELEASE_PROB = "release_prob"

TRACE_COLUMNS = (USER, TIME, LAT, LON)

# Local time zone of formats whose documentation states it (used when the time zone is "auto"): the Cabspotting
# README gives America/Los_Angeles.
FORMAT_TZ = {"cabspotting": "America/Los_Angeles"}

# Defaults the command line prints in its help; kept here (no imports) so that ``python -m odcore --help`` does not
# load the modules that use them.
DEFAULT_SAMPLE_SEED = 2022
"""Seed of the bundled ``sample_data/synthetic_city.parquet`` (:mod:`odcore.data.synth`)."""
DEFAULT_DISTRICTS = 40
"""Voronoi districts of the bundled ``sample_data/districts.geojson`` (:func:`odcore.space.polygons.write_districts`)."""
DEFAULT_DISTRICTS_SEED = 16
DEFAULT_COMPARE_SPECS = ("square:0.5", "square:1.3", "square:5", "h3:9", "h3:8", "h3:7")
"""Zone systems compared when none are named (the bundled districts are added by the CLI and the app)."""
SIZE_PRESET_NAMES = ("single-column", "double-column", "slide")
"""Figure size presets (:data:`odcore.report.figures.SIZE_PRESETS` holds their sizes; a test checks the names agree)."""

# The published boundary's file names (odcore.report.published writes them; here so that the command line's --help
# names them without loading pandas). Files that may be shared, and the data holder's do-not-share record and sheet.
PUBLISHED_FILES = ("published.csv", "published.parquet", "zones.geojson", "release.json", "guarantee_sheet.html")
PUBLISHED_KIND = "odcore-published-release"
PRIVATE_RECORD = "DO_NOT_SHARE_record.json"
PRIVATE_SHEET = "DO_NOT_SHARE_guarantee_sheet.html"
